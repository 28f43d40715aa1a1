"""A run under its lease: take it, heartbeat while the run runs (following the record's
throttle and pause), release it with the run's completion.

One run at a time (docs/control-contract.md, "The backfill lease"): a run takes the lease in
the control record before it writes (take_run), heartbeats while it runs (LeaseKeeper), and
releases it with its completion (release_with_completion), which is what `phase set` checks.
Every heartbeat returns the record, so it is also how a running backfill sees `saga-index
backfill throttle|pause|resume`:

  locally          a background thread heartbeats every `poll_seconds` (a few seconds)
  Step Functions   each worker invocation heartbeats when it starts, every `poll_seconds`
                   while it runs, and when it ends

The new cap goes to the token bucket (each Lambda segment gets its share of it), and a pause
makes the bucket hand out no token: the run stops writing, still heartbeating, until resumed.
A heartbeat that fails because the lease is gone (taken over after it expired, released, or the
state's version moved on) sets the stop event and makes the bucket refuse every further token:
the run ends after its in-flight writes, and whoever runs it reports the loss. The writes
themselves are fenced (layout_change.backfill.fence): checked by DynamoDB at write time against
the run's fence slots (armed by take_run) where the server has transactions, and by the age of
the last good heartbeat everywhere, dated when that heartbeat was sent.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Final

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import RetryLaterError, SagaIndexError
from saga_index.layout_change.backfill.fence import LeaseFence
from saga_index.layout_change.backfill.inputs import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.pacing import TokenBucket, Wait, event_wait
from saga_index.layout_change.backfill.slots import arm_fence
from saga_index.layout_change.backfill.summary import BackfillSummary
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.lease import (
    LEASE_TTL_SECONDS,
    LeaseLostError,
    acquire_lease,
    heartbeat_lease,
    open_index_layouts,
    release_lease,
    require_open_index_settled,
)
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    BackfillCompletion,
    BackfillKind,
    ControlState,
    ControlStore,
    ControlTiming,
    WallClock,
    format_time,
    parse_time,
    utc_now,
)

log = logging.getLogger(__name__)

# How often a running backfill heartbeats, and so re-reads the throttle and pause: "every few
# seconds", far inside the lease's TTL.
CONTROL_POLL_SECONDS: Final = 5.0


def token_for_execution(execution_id: str) -> str:
    """The lease token of a Step Functions execution, derived from its id (ARN): every retry of
    the plan step, and the CLI that started the execution, name the same run."""
    return uuid.uuid5(uuid.NAMESPACE_URL, execution_id).hex


def take_run(
    store: ControlStore,
    request: BackfillRequest,
    *,
    holder: str,
    token: str,
    clock: WallClock = utc_now,
    ttl_seconds: float = LEASE_TTL_SECONDS,
    arm: bool = True,
    timing: ControlTiming = DEFAULT_TIMING,
) -> tuple[RunTicket, ControlState]:
    """The ticket of a run of `request`, and the state it runs under: the move is the record's,
    and the run takes the lease with `token` (a dry run, which writes nothing, takes none: its
    ticket has no token), then arms its fence slots with the lease's epoch (backfill.slots;
    `arm` False: a run with the clock fence only, on a server without transactions).

    Refused before anything is written: a direction the record's writers would undo
    (LeaseDirectionError), a missing record, and (not for a dry run) a state younger than its
    effectiveAt or another run's live lease (LeaseNotYetEffectiveError, LeaseHeldError). A
    retry with the same token finds its own lease. An open-index run (request.kind) takes the
    same lease, recorded with its kind, once the open index's switch settled (`timing`'s
    in-flight margin after effectiveAt; RetryLaterError before), in the direction the open
    index's state gives (lease.kinds).
    """
    # The record is read once: the lease is taken under the very state the move comes from.
    state = store.read()
    started_at = now_text(clock)
    epoch: int | None = None
    opens = request.kind is BackfillKind.OPEN_INDEX
    if opens:
        require_open_index_settled(state, clock(), timing)
    if request.dry_run:
        move = (
            Move(request.direction, *open_index_layouts(state, request.direction))
            if opens
            else Move.for_state(state, request.direction)
        )
        lease_token: str | None = None
    else:
        grant = acquire_lease(
            store,
            holder=holder,
            token=token,
            direction=request.direction,
            clock=clock,
            ttl_seconds=ttl_seconds,
            state=state,
            kind=request.kind,
        )
        state = grant.state
        move = Move(request.direction, grant.source, grant.target)
        lease_token, epoch = token, grant.epoch
        started_at = format_time(grant.lease.acquired_at)
        if arm:
            _arm_or_release(store, request, grant.epoch, token, state.version, holder, clock)
    ticket = RunTicket.of(
        move,
        state_version=state.version,
        holder=holder,
        lease_token=lease_token,
        lease_epoch=epoch if lease_token is not None else None,
        started_at=started_at,
        open_shard_count=state.open_index.shard_count if opens else None,
    )
    return ticket, state


def _arm_or_release(
    store: ControlStore,
    request: BackfillRequest,
    epoch: int,
    token: str,
    state_version: int,
    holder: str,
    clock: WallClock,
) -> None:
    try:
        arm_fence(
            store.client,
            store.table_name,
            epoch=epoch,
            token=token,
            state_version=state_version,
            segments=request.total_segments,
            armed_by=holder,
            clock=clock,
        )
    except (SagaIndexError, ClientError, BotoCoreError):
        # The run never wrote: free the lease for the next attempt at once (a slot held by a
        # higher epoch included: the lease in STATE is still this run's, and holding it would
        # refuse every other run until it expired).
        with contextlib.suppress(SagaIndexError, ClientError, BotoCoreError):
            release_lease(store, token=token, clock=clock)
        raise


def completion_of(
    ticket: RunTicket, summary: BackfillSummary, *, completed_at: str
) -> BackfillCompletion:
    """The result a run records when it releases its lease."""
    if ticket.lease_token is None:
        raise ValueError("a run without a lease (a dry run) records no completion")
    move = ticket.move()
    return BackfillCompletion(
        direction=move.direction,
        source=move.source,
        target=move.target,
        state_version=ticket.state_version,
        started_at=parse_time(ticket.started_at, "startedAt"),
        completed_at=parse_time(completed_at, "completedAt"),
        scanned=summary.scanned,
        restamped=summary.restamped,
        anomalies=summary.anomalies,
        complete=summary.complete,
        verified=summary.verified,
        holder=ticket.holder,
        lease_token=ticket.lease_token,
    )


def release_with_completion(
    store: ControlStore,
    ticket: RunTicket,
    summary: BackfillSummary,
    *,
    clock: WallClock = utc_now,
) -> BackfillCompletion:
    """Free the run's lease, recording the completion `summary` makes (what `phase set` checks),
    and return that completion. A repeated release that finds the run's completion already
    recorded changes nothing. LeaseLostError when the lease is no longer the run's and its
    completion was not recorded; ValueError for a ticket without a lease (a dry run).
    """
    completion = completion_of(ticket, summary, completed_at=now_text(clock))
    release_lease(store, token=completion.lease_token, completion=completion, clock=clock)
    return completion


def now_text(clock: WallClock = utc_now) -> str:
    return format_time(clock())


class LeaseKeeper:
    """Keeps a run's lease while the `with` block runs, and applies the record's control.

    Entering heartbeats once (LeaseLostError propagates: the run must not start) and starts the
    heartbeat thread; leaving stops it and heartbeats once more (the worker's "at the end").
    `lost` holds the LeaseLostError that stopped the run, if one did.

    share: the run's cap from the record's total (a Lambda segment's share; identity locally).
    own_rate: the cap when the record sets none, and the most the record's throttle can give:
    a throttle lowers a run's cap, never raises it above the run's own.
    run_rate: own_rate in the run's total units (what `run_caps` report; default own_rate).
    on_apply: called with every state the keeper applied (a display of the pause and pace).
    pace_label: put before the pace each heartbeat writes to the lease (`status` shows it):
    which segment's, in Step Functions, where each worker invocation paces its own segment.
    fence: the run's lease fence: every good heartbeat marks it (with the clocks' readings
    taken when the heartbeat was sent), and a lost lease closes it (and the bucket).
    wait: how the thread waits poll_seconds of `monotonic`'s time between heartbeats.
    """

    def __init__(
        self,
        store: ControlStore,
        token: str,
        bucket: TokenBucket,
        *,
        own_rate: float,
        share: Callable[[float], float] = lambda total: total,
        run_rate: float | None = None,
        stop: threading.Event | None = None,
        clock: WallClock = utc_now,
        ttl_seconds: float = LEASE_TTL_SECONDS,
        poll_seconds: float = CONTROL_POLL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        fence: LeaseFence | None = None,
        on_apply: Callable[[ControlState], None] | None = None,
        pace_label: str = "",
        wait: Wait = event_wait,
    ) -> None:
        self.store = store
        self.pace_label = pace_label
        self.on_apply = on_apply
        self.fence = fence
        if fence is not None:
            fence.on_lost = self.lose
        self.token = token
        self.bucket = bucket
        self.own_rate = own_rate
        self.run_rate = own_rate if run_rate is None else run_rate
        self.share = share
        self.stop = stop or threading.Event()
        self.clock, self.ttl_seconds, self.poll_seconds = clock, ttl_seconds, poll_seconds
        self._monotonic, self._wait = monotonic, wait
        self.lost: LeaseLostError | None = None
        self.state: ControlState | None = None
        # Every cap applied, in the run's total units (the run's report), and every pause flag,
        # in order; the cap the bucket has now (the run's share of the latest).
        self.run_caps: list[float] = []
        self._bucket_cap: float | None = None
        self.pauses: list[bool] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_ok = monotonic()

    # ---- one heartbeat -------------------------------------------------------------------

    def heartbeat(self) -> ControlState:
        """Extend the lease and apply what the record says; LeaseLostError when it is gone.

        The proof is dated when the request was SENT (both clocks read before it): an answer
        that arrives late, or a pause right after it, cannot make the lease look younger."""
        sent_wall, sent_mono = self.clock(), self._monotonic()
        state = heartbeat_lease(
            self.store,
            token=self.token,
            clock=lambda: sent_wall,
            ttl_seconds=self.ttl_seconds,
            pace=self.pace_label + self.bucket.pace().describe(),
        )
        self._last_ok = sent_mono
        if self.fence is not None:
            self.fence.mark_heartbeat(sent_wall, sent_mono)
        self.apply(state)
        return state

    def apply(self, state: ControlState) -> None:
        self.state = state
        total = state.backfill_max_writes_per_second
        # The operator's own --max-writes-per-second is the ceiling: a throttle only lowers it.
        run_cap, cap = (
            (total, self.share(total))
            if total is not None and total < self.run_rate
            else (self.run_rate, self.own_rate)
        )
        if self._bucket_cap != cap:
            if self._bucket_cap is not None:
                log.warning(
                    "backfill write cap now %.3f/s (%s)",
                    cap,
                    "the record's throttle" if run_cap == total else "the run's own setting",
                    extra={"writesPerSecond": cap, "recordThrottle": total},
                )
            self.bucket.set_cap(cap)
            self._bucket_cap = cap
            self.run_caps.append(run_cap)
        paused = state.backfill_paused
        if not self.pauses or self.pauses[-1] != paused:
            if paused or self.pauses:
                log.warning(
                    # Named by the command that made the change, never the one that undoes it.
                    "backfill %s by the control record (saga-index backfill %s)%s",
                    "paused" if paused else "resumed",
                    "pause" if paused else "resume",
                    ": no writes until `saga-index backfill resume`" if paused else "",
                    extra={"paused": paused},
                )
            self.bucket.set_paused(paused)
            self.pauses.append(paused)
        if self.on_apply is not None:
            self.on_apply(state)

    # ---- the thread ----------------------------------------------------------------------

    def __enter__(self) -> LeaseKeeper:
        self.heartbeat()
        self._thread = threading.Thread(
            target=self._beat, name="backfill-lease-heartbeat", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self.lost is None and exc_type is None:
            try:
                self.heartbeat()
            except LeaseLostError as err:
                self.lose(err)
            except (ClientError, BotoCoreError, RetryLaterError) as err:
                log.warning("final backfill heartbeat failed: %s", err)

    def _beat(self) -> None:
        while not self._wait(self._done, self.poll_seconds):
            try:
                self.heartbeat()
            except LeaseLostError as err:
                self.lose(err)
                return
            except (ClientError, BotoCoreError, RetryLaterError) as err:
                # A heartbeat may fail now and then (the TTL allows several misses); past half
                # the TTL without one, the lease can no longer be assumed held: stop writing.
                silent = self._monotonic() - self._last_ok
                log.warning("backfill heartbeat failed (%.0f s since the last): %s", silent, err)
                if silent > self.ttl_seconds / 2:
                    self.lose(
                        LeaseLostError(
                            f"no heartbeat reached the control record for {silent:.0f} s "
                            f"(TTL {self.ttl_seconds:.0f} s): the lease may have been taken "
                            f"over; stopped. Last error: {err}"
                        )
                    )
                    return

    def lose(self, err: LeaseLostError) -> None:
        """The lease is gone (a heartbeat said so, or the fence refused a write): stop the run,
        hand out no further write token, and close the fence. Only the first loss counts."""
        if self.lost is not None:
            return
        log.error("backfill lease lost, stopping after the in-flight writes: %s", err)
        self.lost = err
        self.stop.set()
        self.bucket.refuse()
        if self.fence is not None:
            self.fence.lose(err)
