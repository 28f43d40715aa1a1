"""Reading and writing saga rows through GSI4, along a key plan handed in by the caller.

  dynamo      DynamoDB building blocks (client, codec, conditions, pages, scan, sizing, target)
  repository  the by-person read and the complete enumerations
  writer      creates and transitions sagas, stamping the key the plan says

The store never imports saga_index.layout_change: the machinery provides the plan.
"""

from saga_index.store.partitions import count_partition
from saga_index.store.plan import KeyPlan
from saga_index.store.repository import ReadResult, SagaRepository
from saga_index.store.writer import SagaWriter, utc_iso

__all__ = [
    "KeyPlan",
    "ReadResult",
    "SagaRepository",
    "SagaWriter",
    "count_partition",
    "utc_iso",
]
