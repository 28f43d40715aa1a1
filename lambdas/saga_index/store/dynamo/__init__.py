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

from saga_index.store.dynamo.client import error_code, make_client, retry_config
from saga_index.store.dynamo.codec import deserialize, serialize, to_plain_json
from saga_index.store.dynamo.conditions import CONDITION_FAILED
from saga_index.store.dynamo.key_pace import (
    DEFAULT_KEY_READ_UNITS,
    PAGE_READ_UNITS,
    PARTITION_READ_UNITS,
    KeyReadIncompleteError,
    KeyReadPace,
    KeyReadPacer,
)
from saga_index.store.dynamo.retry import botocore_resent
from saga_index.store.dynamo.scan import PageRead, ScanOptions
from saga_index.store.dynamo.sizing import item_size, raw_bytes

__all__ = [
    "CONDITION_FAILED",
    "DEFAULT_KEY_READ_UNITS",
    "PAGE_READ_UNITS",
    "PARTITION_READ_UNITS",
    "KeyReadIncompleteError",
    "KeyReadPace",
    "KeyReadPacer",
    "PageRead",
    "ScanOptions",
    "botocore_resent",
    "deserialize",
    "error_code",
    "item_size",
    "make_client",
    "raw_bytes",
    "retry_config",
    "serialize",
    "to_plain_json",
]
