"""The backfill: move every saga row's GSI4PK from the control record's source layout to its
target layout (ADR-0085; docs/control-contract.md).

One module per idea:

  move       which rows a run moves: the record's source and target layouts and the row rule
             (forward legacy -> sharded(N), rollback sharded(N) -> legacy, the same machinery
             for sharded(N) -> sharded(M))
  wire       the wire shapes of every payload: the camelCase JSON model (the Step Functions and
             CLI contracts), a table key, a Scan cursor, a layout, the size budget that keeps
             every payload within Step Functions' 256 KB state, the run's ticket, a segment's
             counts and result, and the steps' inputs
  caps       the write caps a run applied: how many a result carries, how they merge (pure)
  summary    what a run did: the read-back's verification and the summary of all segments
  pacer      the pace chosen from DynamoDB's ThrottlingReasons (pure, clock injected): a hot
             key slows its segment, a table or index limit the run, an account or on-demand
             maximum pauses it; recovery by Vitess' throttler's rules, under the cap
  pacing     the token bucket that meters the writes at the pacer's rate, and pauses
  row        what happens to one row: the row rule applied, the conditional re-stamp
  segment    the segment worker: one parallel-Scan segment, row by row, from its cursor until
             it is done or must stop
  readback   what is left to move on the source keys after a run, read back and judged
  local      the threaded runner of every segment in this process, and the one local
             orchestration (lease, run, read back, release with the completion) the CLI and
             the demo call
  estimate   what a run will cost before it runs: its time at the cap and its write capacity
             on the legacy key, from the dry run's count and a sample of row sizes
  steps      the same run as the Step Functions state machine takes it: one function per
             state (plan, worker, verify), the one call of that state's Lambda handler
  keeper     a run under its lease: taken, heartbeated (applying the record's throttle and
             pause to the run's pacing), released with the run's completion
  fence      the lease proved at write time; what a re-stamp condition-checks is a strategy
             (FenceCheck: the segment's own fence slot, SlotCheck, unless a harness passes
             another)
  leased     a leased run built once (its fence and keeper), for the steps and the local run
  stale_slots  the operator's clearing of fence slots no run holds (`backfill clear-fence`)
  open_row   the open-saga index's change to one row (a ticket of kind open-index selects it
             in the segment worker): OpenSagaPK stamped on the open rows that predate
             `adding`, cleared from closed ones, removed from every row in `removing`; the
             same segments, pacer, lease, fence and cursor as the layout's
  open_readback  after an open-index run: the table compared with the open index (the check
             `open-index set open|off` makes), and the release of a run's lease by its kind

The lease's writes in the control record are layout_change.lease (the room below this one).

The Lambda handlers (handlers/backfill_*.py) and the CLI (saga_index_cli/backfill/) are thin
shells around these. Nothing here reads os.environ; the DynamoDB client is injected.
"""

from saga_index.layout_change.backfill.estimate import (
    PARTITION_WCU_PER_SECOND,
    BackfillEstimate,
    LegacyKeyEffect,
    RowSample,
    count_rows_to_move,
    sample_rows_to_move,
)
from saga_index.layout_change.backfill.fence import FenceCheck, LeaseFence
from saga_index.layout_change.backfill.inputs import (
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    BackfillRequest,
    PlanRequest,
    SegmentPlan,
    SegmentRequest,
    VerifyRequest,
)
from saga_index.layout_change.backfill.keeper import CONTROL_POLL_SECONDS, token_for_execution
from saga_index.layout_change.backfill.local import (
    LocalBackfill,
    backfill_locally,
    paced_bucket,
    run_backfill,
)
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.open_readback import OpenVerify
from saga_index.layout_change.backfill.pace_curve import DEFAULT_FLOOR_FRACTION, paced_rules
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.readback import (
    count_source_rows,
    finish_backfill,
    verify_source_drained,
)
from saga_index.layout_change.backfill.segment import DEFAULT_SAFETY_MARGIN_SECONDS, run_segment
from saga_index.layout_change.backfill.stale_slots import clear_fence
from saga_index.layout_change.backfill.steps import plan_run, run_leased_segment, verify_run
from saga_index.layout_change.backfill.summary import BackfillSummary, summarise
from saga_index.layout_change.backfill.throttle_reasons import reasons_of
from saga_index.layout_change.backfill.wire import (
    MAX_OPEN_STATE_MACHINE_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    RunTicket,
    SegmentCounts,
    SegmentResult,
)

__all__ = [
    "CONTROL_POLL_SECONDS",
    "DEFAULT_FLOOR_FRACTION",
    "DEFAULT_MAX_WRITES_PER_SECOND",
    "DEFAULT_SAFETY_MARGIN_SECONDS",
    "DEFAULT_TOTAL_SEGMENTS",
    "MAX_OPEN_STATE_MACHINE_SEGMENTS",
    "MAX_TOTAL_SEGMENTS",
    "PARTITION_WCU_PER_SECOND",
    "BackfillEstimate",
    "BackfillRequest",
    "BackfillSummary",
    "FenceCheck",
    "LeaseFence",
    "LegacyKeyEffect",
    "LocalBackfill",
    "Move",
    "OpenVerify",
    "PlanRequest",
    "RowSample",
    "RunTicket",
    "SegmentCounts",
    "SegmentPlan",
    "SegmentRequest",
    "SegmentResult",
    "TokenBucket",
    "VerifyRequest",
    "backfill_locally",
    "clear_fence",
    "count_rows_to_move",
    "count_source_rows",
    "finish_backfill",
    "paced_bucket",
    "paced_rules",
    "plan_run",
    "reasons_of",
    "run_backfill",
    "run_leased_segment",
    "run_segment",
    "sample_rows_to_move",
    "summarise",
    "token_for_execution",
    "verify_run",
    "verify_source_drained",
]
