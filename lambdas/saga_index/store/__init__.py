"""Reading and writing saga rows through GSI4, along a key plan handed in by the caller.

  dynamo      DynamoDB building blocks (client, codec, conditions, pages, scan, sizing, target)
  repository  the by-person read, the complete enumerations and their pages
  paging      a page of an enumeration and the cursor of the next (cursor: its one format)
  writer      creates and transitions sagas, stamping the key the plan says

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
from saga_index.store.paging import SagaPage, read_page
from saga_index.store.partitions import count_partition
from saga_index.store.plan import KeyPlan
from saga_index.store.repository import ReadResult, SagaRepository
from saga_index.store.writer import SagaWriter, utc_iso

__all__ = [
    "CursorLayoutChangedError",
    "InvalidCursorError",
    "KeyPlan",
    "PagingDuringMoveError",
    "Position",
    "ReadResult",
    "SagaPage",
    "SagaRepository",
    "SagaWriter",
    "count_partition",
    "decode_cursor",
    "encode_cursor",
    "plan_fingerprint",
    "read_page",
    "utc_iso",
]
