"""The backfill run in this process: every segment on a local thread, then the read-back.

The CLI without --state-machine-arn and the demo call backfill_locally: the control record
names the move, the run takes the lease, heartbeats (following the record's throttle and pause)
while its segments run, reads back what it did and releases the lease with its completion.
run_backfill is its threaded runner (benchmarks and tests drive it directly, without a lease).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from saga_index.index import INDEX_NAME, MAX_CONCURRENT_SEGMENTS, SagaIndexError
from saga_index.layout_change.backfill.fence import SLOT_CHECK, FenceCheck, LeaseFence
from saga_index.layout_change.backfill.inputs import BackfillRequest
from saga_index.layout_change.backfill.keeper import (
    CONTROL_POLL_SECONDS,
    LeaseKeeper,
    take_run,
)
from saga_index.layout_change.backfill.leased import leased_run
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.open_readback import (
    DEFAULT_OPEN_VERIFY,
    OpenVerify,
    finish_open_index,
    release_run,
)
from saga_index.layout_change.backfill.pace_curve import PaceRules
from saga_index.layout_change.backfill.pacing import TokenBucket, Wait, event_wait, throttle_count
from saga_index.layout_change.backfill.readback import finish_backfill
from saga_index.layout_change.backfill.segment import run_segment
from saga_index.layout_change.backfill.summary import BackfillSummary, summarise
from saga_index.layout_change.backfill.wire import RunTicket, SegmentCounts, SegmentResult
from saga_index.layout_change.lease import (
    LEASE_TTL_SECONDS,
    LeaseLostError,
    new_lease_token,
    release_lease,
)
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    BackfillCompletion,
    BackfillKind,
    ControlState,
    ControlStore,
    ControlTiming,
    WallClock,
    utc_now,
)
from saga_index.store.dynamo import ThrottleCounter, attach_throttle_observer

log = logging.getLogger(__name__)


class LocalRun(BaseModel):
    """The outcome of run_backfill: per-segment results, and why it ended early if it did."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    results: list[SegmentResult]
    failures: dict[int, str]
    interrupted: bool
    throttles: int  # seen by the shared client during the run

    @property
    def complete(self) -> bool:
        return not self.failures and not self.interrupted


def paced_bucket(
    request: BackfillRequest,
    stop: threading.Event,
    *,
    clock: Callable[[], float] = time.monotonic,
    wait: Wait = event_wait,
    rules: PaceRules | None = None,
) -> TokenBucket:
    """The run's one bucket, shared by its segments, at the run's cap and paced by its pacer
    (under `rules`, by default the request's), on `clock` (its waits cut short by `stop`)."""
    return TokenBucket(
        request.max_writes_per_second,
        clock=clock,
        sleep=lambda seconds: wait(stop, seconds),
        rules=rules or request.pace_rules(),
        segments=request.total_segments,
    )


def run_backfill(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    *,
    run: RunTicket,
    throttles: ThrottleCounter | None = None,
    stop: threading.Event | None = None,
    on_progress: Callable[[SegmentResult], None] | None = None,
    page_size: int | None = None,
    max_concurrency: int = MAX_CONCURRENT_SEGMENTS,
    bucket: TokenBucket | None = None,
    fence: LeaseFence | None = None,
) -> LocalRun:
    """Run every segment in this process, one thread per segment, with no deadline.

    The threads share ONE token bucket at the total cap: the cap then holds exactly however
    unevenly the rows fall into segments (with a bucket per segment, as in Lambda, a segment
    that finishes early leaves its share unused), and a throttle slows the whole run, which is
    right, since every segment writes to the same hot partition. The first failing segment
    stops the others after their in-flight write (a throttle storm or a permission error hits
    them all alike); `stop` does the same from outside. `bucket`: the shared bucket (its cap
    and pause follow the record when a LeaseKeeper drives it); by default one at the run's cap.
    `fence`: the run's lease fence, shared by every segment (None: an unleased run).
    """
    stop = stop or threading.Event()
    segments = request.segment_requests(run)
    bucket = bucket or paced_bucket(request, stop)
    results: dict[int, SegmentResult] = {}
    failures: dict[int, str] = {}
    # The live counts of every segment: a segment that fails still reports what it did.
    latest: dict[int, SegmentResult] = {}

    def track(result: SegmentResult) -> None:
        latest[result.segment] = result
        if on_progress is not None:
            on_progress(result)

    throttles_before = throttle_count(throttles)
    workers = min(len(segments), max_concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="backfill") as pool:
        futures: dict[Future[SegmentResult], int] = {
            pool.submit(
                run_segment,
                client,
                table_name,
                segment,
                throttles=throttles,
                stop=stop,
                on_progress=track,
                page_size=page_size,
                bucket=bucket,
                fence=fence,
            ): segment.segment
            for segment in segments
        }
        try:
            for future, number in futures.items():
                try:
                    results[number] = future.result()
                except (SagaIndexError, ClientError, BotoCoreError) as err:
                    failures[number] = f"{type(err).__name__}: {err}"
                    log.error("backfill segment %d failed: %s", number, failures[number])
                    stop.set()
                    if number in latest:
                        results[number] = latest[number]
        except BaseException:
            # A bug or KeyboardInterrupt: let the other threads finish their write and stop.
            stop.set()
            raise
    return LocalRun(
        results=[results[n] for n in sorted(results)],
        failures=failures,
        interrupted=any(r.interrupted for r in results.values()),
        throttles=throttle_count(throttles) - throttles_before,
    )


@dataclass(frozen=True)
class LocalBackfill:
    """A local run and its summary (read back and verified only when the run completed)."""

    run: LocalRun
    summary: BackfillSummary
    seconds: float  # wall time of the segments' run, without the read-back
    ticket: RunTicket
    # The completion recorded with the release (None: a dry run, an open-index run, lease lost).
    completion: BackfillCompletion | None = None
    # Why the run stopped when it lost its lease (then nothing was recorded).
    lease_lost: str | None = None
    # The lease fence the run ended with (fence.FenceMode: transactional, or clock where the
    # server has no transactions); None for a dry run.
    fence_mode: str | None = None

    @property
    def move(self) -> Move:
        return self.ticket.move()


def _running_totals(on_totals: Callable[[SegmentCounts], None]) -> Callable[[SegmentResult], None]:
    """Turn per-segment live results into the run's totals, one report at a time."""
    lock = threading.Lock()
    latest: dict[int, SegmentResult] = {}

    def track(result: SegmentResult) -> None:
        with lock:
            latest[result.segment] = result
            totals = SegmentCounts()
            for counts in latest.values():
                totals.add(counts, key_limit=0)
            # Under the lock: the totals reach the display in the order they grew.
            on_totals(totals)

    return track


def backfill_locally(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    *,
    holder: str,
    store: ControlStore | None = None,
    clock: WallClock = utc_now,
    lease_ttl_seconds: float = LEASE_TTL_SECONDS,
    poll_seconds: float = CONTROL_POLL_SECONDS,
    index_name: str = INDEX_NAME,
    stop: threading.Event | None = None,
    on_start: Callable[[RunTicket, ControlState], None] | None = None,
    on_progress: Callable[[SegmentCounts], None] | None = None,
    while_running: AbstractContextManager[object] | None = None,
    page_size: int | None = None,
    transactional_fence: bool = True,
    fence_check: FenceCheck | None = None,
    on_control: Callable[[ControlState], None] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    timing: ControlTiming = DEFAULT_TIMING,
    open_verify: OpenVerify = DEFAULT_OPEN_VERIFY,
    bucket: TokenBucket | None = None,
    wait: Wait = event_wait,
    pace_rules: PaceRules | None = None,
) -> LocalBackfill:
    """Run the move the control record names, under its lease, then judge what it did.
    Refused before anything runs: a direction the record's writers would undo (LeaseDirectionError),
    a missing record, and (not for a dry run) a state younger than effectiveAt or another run's live
    lease (LeaseNotYetEffectiveError, LeaseHeldError). While the segments run, a thread heartbeats
    every poll_seconds, applying throttle and pause to the run's `bucket` (default: paced_bucket's,
    under `pace_rules`); a lost lease stops the run (`lease_lost`). A complete run is read back
    (finish_backfill; open-index: open_readback), an incomplete one summarised; then the lease is
    released (release_run: a layout run's with its completion). on_start gets the ticket and state
    first, on_progress the live totals, on_control each state the keeper applied; `monotonic` is the
    run's clock, `wait` its waits; while_running wraps the segments' run. Every write goes through
    the run's lease fence (transactional unless `transactional_fence` is False or the server has
    none; checking `fence_check`). `timing`: the margin an open-index run awaits."""
    store, stop = store or ControlStore(client, table_name), stop or threading.Event()
    ticket, state = take_run(
        store,
        request,
        holder=holder,
        token=new_lease_token(),
        clock=clock,
        ttl_seconds=lease_ttl_seconds,
        arm=transactional_fence,
        timing=timing,
    )
    bucket = bucket or paced_bucket(request, stop, clock=monotonic, wait=wait, rules=pace_rules)
    leased = leased_run(
        client,
        store,
        ticket,
        bucket,
        own_rate=request.max_writes_per_second,
        stop=stop,
        clock=clock,
        monotonic=monotonic,
        ttl_seconds=lease_ttl_seconds,
        poll_seconds=poll_seconds,
        transactional=transactional_fence,
        check=fence_check or SLOT_CHECK,
        on_control=on_control,
        wait=wait,
    )
    fence, keeper = (leased.fence, leased.keeper) if leased is not None else (None, None)
    try:
        if keeper is not None:
            keeper.apply(state)
        if on_start is not None:
            on_start(ticket, state)
        outcome = _run_and_judge(
            client,
            table_name,
            request,
            ticket,
            keeper=keeper,
            bucket=bucket,
            index_name=index_name,
            stop=stop,
            on_progress=on_progress,
            while_running=while_running,
            page_size=page_size,
            fence=fence,
            open_verify=open_verify,
        )
    except BaseException:
        if ticket.lease_token is not None:
            # Free the lease for the next run at once; the killed run's would expire anyway.
            with contextlib.suppress(SagaIndexError, ClientError, BotoCoreError):
                release_lease(store, token=ticket.lease_token, clock=clock)
        raise
    if ticket.lease_token is None or outcome.lease_lost is not None:
        return outcome
    try:
        completion = release_run(store, ticket, outcome.summary, clock=clock)
    except LeaseLostError as err:
        return replace(outcome, lease_lost=str(err))
    return replace(outcome, completion=completion)


def _run_and_judge(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    ticket: RunTicket,
    *,
    keeper: LeaseKeeper | None,
    bucket: TokenBucket,
    index_name: str,
    stop: threading.Event,
    on_progress: Callable[[SegmentCounts], None] | None,
    while_running: AbstractContextManager[object] | None,
    page_size: int | None,
    fence: LeaseFence | None,
    open_verify: OpenVerify,
) -> LocalBackfill:
    move = ticket.move()
    throttles = attach_throttle_observer(client)
    started = time.monotonic()
    with contextlib.ExitStack() as running:
        if keeper is not None:
            running.enter_context(keeper)
        running.enter_context(
            while_running if while_running is not None else contextlib.nullcontext()
        )
        run = run_backfill(
            client,
            table_name,
            request,
            run=ticket,
            throttles=throttles,
            stop=stop,
            on_progress=_running_totals(on_progress) if on_progress is not None else None,
            page_size=page_size,
            bucket=bucket,
            fence=fence,
        )
    seconds = time.monotonic() - started
    lost = keeper.lost if keeper is not None else None
    # One keeper followed the record for every segment: its caps are the run's.
    caps = list(keeper.run_caps) if keeper is not None else []
    if run.complete and lost is None and ticket.kind is BackfillKind.OPEN_INDEX:
        summary = finish_open_index(
            client,
            table_name,
            request,
            run.results,
            ticket,
            throttles=run.throttles,
            applied_caps=caps,
            options=open_verify,
        )
    elif run.complete and lost is None:
        summary = finish_backfill(
            client,
            table_name,
            request,
            run.results,
            index_name=index_name,
            move=move,
            throttles=run.throttles,
            applied_caps=caps,
        )
    else:
        summary = summarise(
            request,
            run.results,
            complete=False,
            throttles=run.throttles,
            move=move,
            applied_caps=caps,
        )
    return LocalBackfill(
        run=run,
        summary=summary,
        seconds=seconds,
        ticket=ticket,
        lease_lost=None if lost is None else str(lost),
        fence_mode=fence.mode.value if fence is not None else None,
    )
