"""DynamoDB building blocks shared by every adapter of the domain library.

client      the low-level client: botocore retry modes, bounded timeouts, the throttle observer
codec       items between the wire shape and Python values, and on to plain JSON
conditions  is_condition_failed: a conditional write refused
expressions request expressions with exactly their names and values; shared fragments
key_pace    pacing the reads of one index key: at most N read units on it in any second
pages       reading a Query or Scan to its last page (botocore's paginator, or paced)
retry       a write refused for now, sent again (botocore_resent: whether it may have landed)
scan        the rate-limited parallel Scan of the base table's saga rows
sizing      DynamoDB's item-size rule
target      IndexTarget: the client, table, index and shard count a reader points at
"""

from saga_index.store.dynamo.client import (
    THROTTLE_CODES,
    ThrottleCounter,
    attach_throttle_observer,
    error_code,
    is_throttle,
    make_client,
    retry_config,
)
from saga_index.store.dynamo.codec import deserialize, serialize, to_plain_json
from saga_index.store.dynamo.conditions import CONDITION_FAILED, is_condition_failed
from saga_index.store.dynamo.expressions import (
    Expression,
    all_conditions,
    all_of,
    attribute_fragment,
    attribute_list,
    on_index_partition,
    on_open_index_key,
    request_expressions,
    unchanged_since_read,
    update,
)
from saga_index.store.dynamo.key_pace import (
    DEFAULT_KEY_READ_UNITS,
    PAGE_READ_UNITS,
    PARTITION_READ_UNITS,
    KeyReadIncompleteError,
    KeyReadPace,
    KeyReadPacer,
)
from saga_index.store.dynamo.pages import query_pages
from saga_index.store.dynamo.retry import (
    DEFAULT_POLICY,
    RetryPolicy,
    botocore_resent,
    retry_transient,
)
from saga_index.store.dynamo.scan import (
    PageListener,
    PageRead,
    SagaTableScanner,
    ScanIncompleteError,
    ScanOptions,
)
from saga_index.store.dynamo.sizing import item_size, raw_bytes
from saga_index.store.dynamo.target import IndexTarget

__all__ = [
    "CONDITION_FAILED",
    "DEFAULT_KEY_READ_UNITS",
    "DEFAULT_POLICY",
    "PAGE_READ_UNITS",
    "PARTITION_READ_UNITS",
    "THROTTLE_CODES",
    "Expression",
    "IndexTarget",
    "KeyReadIncompleteError",
    "KeyReadPace",
    "KeyReadPacer",
    "PageListener",
    "PageRead",
    "RetryPolicy",
    "SagaTableScanner",
    "ScanIncompleteError",
    "ScanOptions",
    "ThrottleCounter",
    "all_conditions",
    "all_of",
    "attach_throttle_observer",
    "attribute_fragment",
    "attribute_list",
    "botocore_resent",
    "deserialize",
    "error_code",
    "is_condition_failed",
    "is_throttle",
    "item_size",
    "make_client",
    "on_index_partition",
    "on_open_index_key",
    "query_pages",
    "raw_bytes",
    "request_expressions",
    "retry_config",
    "retry_transient",
    "serialize",
    "to_plain_json",
    "unchanged_since_read",
    "update",
]
