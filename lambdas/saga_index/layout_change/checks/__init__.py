"""The checks that judge a move (docs/observability.md):

expectations   where a state's rows may sit, and how a check names a row (shared by drift,
               parity and the layout probe)
layout_probe   which index keys carry saga rows, when the control record cannot say
read_progress  how a progress display hears of a check's reads
open_index     the open-saga index against the base table (its completing moves' checks, and
               the drift guard's watch of it)
drift/         the drift guard: what is wrong now, judged against the state (its front:
               checks.drift)
parity/        the parity verifier: the reads against the base table or a snapshot, re-checked
               (its front: checks.parity)
"""

from saga_index.layout_change.checks.expectations import Expectations, RowRef, Verdict
from saga_index.layout_change.checks.layout_probe import (
    PROBE_WORKERS,
    InferredLayout,
    RowsSeen,
    infer_layout,
    probe_keys,
    probe_shard_keys,
    shard_rows_refusal,
)
from saga_index.layout_change.checks.open_index import (
    OpenIndexDifference,
    OpenIndexReader,
    concerns_open_index,
)
from saga_index.layout_change.checks.open_index import compare as compare_open_index
from saga_index.layout_change.checks.read_progress import ReadCounter, ReadsDone

__all__ = [
    "PROBE_WORKERS",
    "Expectations",
    "InferredLayout",
    "OpenIndexDifference",
    "OpenIndexReader",
    "ReadCounter",
    "ReadsDone",
    "RowRef",
    "RowsSeen",
    "Verdict",
    "compare_open_index",
    "concerns_open_index",
    "infer_layout",
    "probe_keys",
    "probe_shard_keys",
    "shard_rows_refusal",
]
