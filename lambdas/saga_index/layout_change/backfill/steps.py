"""The backfill as the Step Functions state machine runs it: one function per state, each what
that state's Lambda handler (handlers/backfill_*.py) calls.

  plan     plan_run: take the run's lease (none for a dry run), arm its fence slots and lay
           out the segments
  worker   run_leased_segment: one invocation on one segment, under the lease
  verify   verify_run: read back what is left on the source keys (an open-index run: compare
           the table with the open index), then release the lease (a layout run's with its
           completion)

Every step carries the run's ticket (the record's move when the run started, the lease token,
the run's kind), so a retried step finds its own lease, and each picks what differs by kind as
layout_change.backfill.local does in one process: the row rule (segment.py, from the ticket),
the verification and the release (open_readback).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from saga_index.layout_change.backfill.caps import extend_caps
from saga_index.layout_change.backfill.inputs import (
    PlanRequest,
    SegmentPlan,
    SegmentRequest,
    VerifyRequest,
    check_state_machine_segments,
    plan_segments,
    segment_share,
)
from saga_index.layout_change.backfill.keeper import take_run, token_for_execution
from saga_index.layout_change.backfill.leased import leased_run
from saga_index.layout_change.backfill.open_readback import (
    DEFAULT_OPEN_VERIFY,
    OpenVerify,
    finish_open_index,
    release_run,
)
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.readback import finish_backfill
from saga_index.layout_change.backfill.segment import DEFAULT_SAFETY_MARGIN_SECONDS, run_segment
from saga_index.layout_change.backfill.summary import BackfillSummary
from saga_index.layout_change.backfill.wire import SegmentResult
from saga_index.layout_change.lease import LeaseLostError, heartbeat_lease, lease_released
from saga_index.layout_change.record import BackfillKind, ControlStore
from saga_index.store.dynamo import attach_throttle_observer


def plan_run(client: Any, table_name: str, plan: PlanRequest) -> SegmentPlan:
    """Take the run's lease for the execution `plan.holder`, arm its fence slots (the workers'
    re-stamps check them) and lay out its segments.

    The token is derived from the execution id, so a retried plan step finds its own lease
    and arms again (idempotent). Refusals, before any row is written: an open-index run of
    more segments than the state machine's state can carry (inputs.check_state_machine_segments,
    before the lease is taken) and keeper.take_run's (an open-index run's too: its direction
    from the open index's state, its start once the open index's switch settled).
    """
    check_state_machine_segments(plan.request)
    ticket, _ = take_run(
        ControlStore(client, table_name),
        plan.request,
        holder=plan.holder,
        token=token_for_execution(plan.holder),
    )
    return plan_segments(plan.request, ticket)


@dataclass(frozen=True)
class SegmentOutcome:
    """One worker invocation: its result, and the lost lease that stopped it, if one did."""

    result: SegmentResult
    lease_lost: LeaseLostError | None = None

    def metric_values(self) -> dict[str, int]:
        """This invocation's own counts (never the carried totals), by worker metric name."""
        return (self.result.invocation or self.result).metric_values()

    def unwrap(self) -> SegmentResult:
        """The result, or the LeaseLostError that stopped the invocation after its in-flight
        write."""
        if self.lease_lost is not None:
            raise self.lease_lost
        return self.result


def run_leased_segment(
    client: Any,
    table_name: str,
    request: SegmentRequest,
    *,
    remaining_seconds: Callable[[], float],
    safety_margin_seconds: float = DEFAULT_SAFETY_MARGIN_SECONDS,
    bucket: TokenBucket | None = None,
) -> SegmentOutcome:
    """Re-stamp one segment from request.cursor until it is done or the deadline is near
    (segment.run_segment), under the run's lease (not for a dry run, which holds none).

    The invocation heartbeats when it starts (LeaseLostError propagates: nothing is written),
    every few seconds while it runs and when it ends; each heartbeat applies the record's
    throttle (this segment's share of it) and pause flag to the token bucket, and the result
    carries the caps applied (in the run's total units, after the earlier invocations'). Every
    re-stamp is fenced (fence.py: a transaction that condition-checks this segment's fence slot
    for the run's lease epoch): a lease lost while it runs stops it before its next write: the
    outcome then carries the error.
    remaining_seconds: the Lambda's remaining time. bucket: the invocation's token bucket, by
    default one at the segment's rate whose waits end when the lease is lost (a test's: on
    its own clock); the carried pace is restored into it either way.
    """
    stop = threading.Event()
    bucket = bucket or TokenBucket(
        request.max_writes_per_second, sleep=stop.wait, rules=request.pace_rules()
    )
    carried_pace = request.totals.pace if request.totals is not None else None
    if carried_pace is not None:
        # The pace and its memory go on from the segment's previous invocation, the segment's
        # own key-range slowdown included.
        bucket.pacer.restore(carried_pace)
    token = request.run.lease_token
    # DynamoDB on AWS has transactions: every re-stamp proves the lease at write time.
    leased = (
        None
        if request.dry_run or token is None
        else leased_run(
            client,
            ControlStore(client, table_name),
            request.run,
            bucket,
            own_rate=request.max_writes_per_second,
            share=lambda total: segment_share(total, request.total_segments),
            run_rate=request.run_cap(),
            stop=stop,
            pace_label=f"segment {request.segment}: ",
        )
    )
    fence, keeper = (leased.fence, leased.keeper) if leased is not None else (None, None)
    with keeper if keeper is not None else contextlib.nullcontext():
        result = run_segment(
            client,
            table_name,
            request,
            # One invocation at a time per environment: the counter's increments are this run's.
            throttles=attach_throttle_observer(client),
            remaining_seconds=remaining_seconds,
            safety_margin_seconds=safety_margin_seconds,
            stop=stop,
            bucket=bucket,
            fence=fence,
        )
    # Only for the segment's next invocation: a finished segment's result (one of up to 1,000
    # the Map hands the verification) carries none.
    result.pace = None if result.done else bucket.pacer.snapshot(request.segment)
    # The pauses are this invocation's own (its metric) and the segment's running count.
    result.pace_pauses += bucket.pacer.pauses
    if result.invocation is not None:
        result.invocation.pace_pauses = bucket.pacer.pauses
    if keeper is not None:
        # The caps this invocation ran at, after the earlier invocations' (the report's).
        carried = request.totals.applied_caps if request.totals is not None else []
        result.applied_caps = extend_caps(carried, keeper.run_caps, limit=request.applied_cap_limit)
    return SegmentOutcome(result, keeper.lost if keeper is not None else None)


def verify_run(
    client: Any, table_name: str, verify: VerifyRequest, *, index_name: str
) -> BackfillSummary:
    """Aggregate the segments' results, judge what the run did and release its lease, as the
    local run does by the run's kind: a layout run reads back what is left on the source keys
    (readback.finish_backfill) and releases with its completion (counts, complete, verified:
    what `phase set` checks); an open-index run compares the table with the open index
    (open_readback.finish_open_index, its Scan at the request's verifyReadUnitsPerSecond) and
    releases recording none (open_readback.release_run). A dry run holds no lease and records
    nothing.

    The lease is heartbeated before the read-back: LeaseLostError when it is gone, and nothing is
    recorded. A retry after the release landed reads back again and returns the summary,
    recording nothing new.
    """
    store = ControlStore(client, table_name)
    run = verify.run
    if run.lease_token is not None:
        _heartbeat_unless_released(store, run.lease_token, run.kind)
    if run.kind is BackfillKind.OPEN_INDEX:
        rate = verify.request.verify_read_units_per_second
        summary = finish_open_index(
            client,
            table_name,
            verify.request,
            verify.segments,
            run,
            options=DEFAULT_OPEN_VERIFY if rate is None else OpenVerify(read_units_per_second=rate),
        )
    else:
        summary = finish_backfill(
            client,
            table_name,
            verify.request,
            verify.segments,
            index_name=index_name,
            move=run.move(),
        )
    if run.lease_token is not None:
        release_run(store, run, summary)
    return summary


def _heartbeat_unless_released(store: ControlStore, token: str, kind: BackfillKind) -> None:
    """Extend the lease for the read-back. A retried verify step whose first attempt already
    released it goes on (its release is then a no-op): a layout run's release left its
    completion, an open-index run's its lease-released EVENT item. Any other loss fails the
    step (LeaseLostError): the run's verdict cannot be trusted to be this run's."""
    try:
        heartbeat_lease(store, token=token)
    except LeaseLostError:
        if kind is BackfillKind.OPEN_INDEX:
            if lease_released(store, token):
                return
            raise
        last = store.read().last_backfill
        if last is None or last.lease_token != token:
            raise
