"""Reading and writing saga rows through GSI4, along a key plan handed in by the caller.

  dynamo      DynamoDB building blocks (client, codec, conditions, pages, scan, sizing, target)
  repository  the by-person read, the complete enumerations and their pages
  paging      a page of an enumeration and the cursor of the next (cursor: its one format)
  writer      creates and transitions sagas, stamping the key the plan says
  partitions  reading GSI4 partitions: a set of them whole, one partition's rows, its count
  repair      the repair of one anomalous saga row (a row write, like the writer's)
  watch       the index's throttle events over a window (DynamoDB's CloudWatch metrics)
  open_index  is the sparse open-saga index there, ACTIVE and built as the readers expect
              (DescribeTable), and the AWS CLI commands that add it and show its status

The store never imports saga_index.layout_change: the machinery provides the plan.
"""

from saga_index.store.cursor import (
    CursorLayoutChangedError,
    InvalidCursorError,
    PagingDuringMoveError,
    Position,
    decode_cursor,
    encode_cursor,
    plan_fingerprint,
)
from saga_index.store.open_index import (
    OpenIndexReadiness,
    add_open_index_command,
    open_index_attribute_definitions,
    open_index_create,
    open_index_readiness,
    open_index_status_command,
    readiness_from_description,
)
from saga_index.store.paging import MAX_PAGE_LIMIT, SagaPage, read_page, validate_limit
from saga_index.store.partitions import count_partition, partition_rows, read_partitions
from saga_index.store.plan import KeyPlan
from saga_index.store.repair import RepairStatus, repair_anomaly
from saga_index.store.repository import ReadResult, SagaRepository
from saga_index.store.watch import DEFAULT_DAYS, MAX_DAYS, WatchReport, read_throttle_window
from saga_index.store.writer import SagaWriter, utc_iso

__all__ = [
    "DEFAULT_DAYS",
    "MAX_DAYS",
    "MAX_PAGE_LIMIT",
    "CursorLayoutChangedError",
    "InvalidCursorError",
    "KeyPlan",
    "OpenIndexReadiness",
    "PagingDuringMoveError",
    "Position",
    "ReadResult",
    "RepairStatus",
    "SagaPage",
    "SagaRepository",
    "SagaWriter",
    "WatchReport",
    "add_open_index_command",
    "count_partition",
    "decode_cursor",
    "encode_cursor",
    "open_index_attribute_definitions",
    "open_index_create",
    "open_index_readiness",
    "open_index_status_command",
    "partition_rows",
    "plan_fingerprint",
    "read_page",
    "read_partitions",
    "read_throttle_window",
    "readiness_from_description",
    "repair_anomaly",
    "utc_iso",
    "validate_limit",
]
