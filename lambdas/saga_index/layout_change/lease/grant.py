"""The lease's conditional writes on the STATE item (docs/control-contract.md, "The backfill
lease").

  acquire    refused while another run's lease is live, before the state's effectiveAt, when
             the direction disagrees with the state, or when the record is missing; a new
             token gets the next fencing epoch (`leaseEpoch`), which arms the run's fence
             slots (layout_change.backfill.fence)
  heartbeat  extends the lease; fails once the token no longer holds it or the state's version
             moved on (a transition while a run is in flight: the run must stop)
  release    frees the lease and records the run's completion (what `phase set` checks)

Each is one conditional UpdateItem, safe to retry: the caller supplies the token, and a retried
acquire, heartbeat or release that finds its own token (or its own recorded completion)
succeeds.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import MAX_SHARD_COUNT, Layout, RetryLaterError
from saga_index.layout_change.lease.epoch import newest_armed_epoch, next_epoch
from saga_index.layout_change.lease.errors import (
    InvalidBackfillControlError,
    LeaseDirectionError,
    LeaseHeldError,
    LeaseLostError,
    LeaseNotYetEffectiveError,
    LeaseOutcomeUnknownError,
)
from saga_index.layout_change.lease.events import (
    EVENT_LEASE_ACQUIRED,
    EVENT_LEASE_RELEASED,
    nonblank,
    record_control_event,
)
from saga_index.layout_change.lease.kinds import open_index_layouts
from saga_index.layout_change.record import (
    LEASE_ATTRIBUTES,
    LEASE_EPOCH,
    LEASE_EXPIRES_AT,
    LEASE_HEARTBEAT_AT,
    LEASE_PACE,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    STILL_THE_VERSION_READ,
    VERSION,
    BackfillCompletion,
    BackfillDirection,
    BackfillKind,
    ControlError,
    ControlRecordMissingError,
    ControlState,
    ControlStore,
    Lease,
    Phase,
    RecordCondition,
    VersionConflictError,
    WallClock,
    completion_attributes,
    format_time,
    lease_attributes,
    present,
    seconds_until,
    to_millis,
    utc_now,
)
from saga_index.store.dynamo import all_conditions, attribute_fragment

# A run that has not heartbeated for this long is dead and its lease may be taken over.
LEASE_TTL_SECONDS: Final = 120.0
# How often a run heartbeats is the runner's choice (backfill.keeper, every 5 s so throttle and
# pause apply quickly): it must stay well inside this TTL.

# ---- condition fragments -----------------------------------------------------------------
# Nobody holds the lease, its holder stopped heartbeating, or it is this run's (a retry).
LEASE_FREE_OR_OURS: Final = attribute_fragment(
    f"attribute_not_exists(#{LEASE_TOKEN}) OR #{LEASE_EXPIRES_AT} <= :now "
    f"OR #{LEASE_TOKEN} = :token",
    LEASE_TOKEN,
    LEASE_EXPIRES_AT,
    slots=(":now", ":token"),
)
# The lease is this run's.
OUR_LEASE: Final = attribute_fragment(f"#{LEASE_TOKEN} = :token", LEASE_TOKEN, slots=(":token",))
# The fencing epoch only grows: an acquire computed from an older read (another run took and lost
# the lease meanwhile) cannot hand out an epoch at or below one already handed out.
EPOCH_STILL_BELOW: Final = attribute_fragment(
    f"attribute_not_exists(#{LEASE_EPOCH}) OR #{LEASE_EPOCH} < :epoch",
    LEASE_EPOCH,
    slots=(":epoch",),
)
# The layouts have not changed since the lease was taken: a run moves rows for one state only.
UNDER_THE_LEASED_STATE: Final = attribute_fragment(
    f"#{LEASE_STATE_VERSION} = #{VERSION}", LEASE_STATE_VERSION, VERSION
)


class LeaseChangedHandsError(ControlError, RetryLaterError):
    """Another run's acquire or release won the race for the lease: a transient conflict."""


@dataclass(frozen=True)
class LeaseGrant:
    """A held lease and what the run must do under it."""

    lease: Lease
    source: Layout
    target: Layout
    state: ControlState
    # The lease's fencing epoch (Kleppmann's fencing token): what the run's fence slots carry.
    epoch: int


def new_lease_token() -> str:
    """A fresh run token; generate it ONCE per run and pass it to every retry."""
    return uuid.uuid4().hex


def backfill_layouts(state: ControlState, direction: BackfillDirection) -> tuple[Layout, Layout]:
    """(source, target) of a run in `direction` under `state`, or LeaseDirectionError.

    forward   migrating: legacy -> sharded(N); sharded: legacy -> sharded(N) (rows repaired
              later); resharding: sharded(N) -> sharded(M)
    rollback  rolling-back: sharded(N) -> legacy; legacy (after a migration): every shard key
              -> legacy, the clean-up of stray rows (a row a paused worker, or a writer that
              had not seen the record, left on a shard key that no reader in legacy reads),
              the mirror of forward-in-sharded. "Every shard key" is sharded(MAX_SHARD_COUNT):
              every shard key of every N is one of its keys.
    """
    phase = state.phase
    if direction is BackfillDirection.FORWARD and phase in (
        Phase.MIGRATING,
        Phase.RESHARDING,
    ):
        assert state.moving_to is not None
        return state.layout, state.moving_to
    if direction is BackfillDirection.FORWARD and phase is Phase.SHARDED:
        return Layout.legacy(), state.layout
    if direction is BackfillDirection.ROLLBACK and phase is Phase.ROLLING_BACK:
        assert state.moving_to is not None
        return state.layout, state.moving_to
    if (
        direction is BackfillDirection.ROLLBACK
        and phase is Phase.LEGACY
        and state.condition is RecordCondition.PRESENT
    ):
        return Layout.sharded(MAX_SHARD_COUNT), Layout.legacy()
    wanted = {
        BackfillDirection.FORWARD: "migrating or sharded (or resharding)",
        BackfillDirection.ROLLBACK: "rolling-back, or legacy after a migration (the clean-up)",
    }[direction]
    # A re-shard has no rollback run: its way back is the abort (a swap), then a forward run.
    hint = (
        f"; the way back from a re-shard is `phase set resharding --shards "
        f"{state.layout.shard_count}` (the abort), then a forward backfill"
        if phase is Phase.RESHARDING
        else ""
    )
    raise LeaseDirectionError(
        f"a {direction.value} backfill needs the record in phase {wanted}, but it is "
        f"{phase.value!r} (version {state.version}): writers in {phase.value!r} stamp "
        f"{state.target}, so the run would fight them{hint}"
    )


def acquire_lease(
    store: ControlStore,
    *,
    holder: str,
    token: str,
    direction: BackfillDirection | str,
    clock: WallClock = utc_now,
    ttl_seconds: float = LEASE_TTL_SECONDS,
    state: ControlState | None = None,
    kind: BackfillKind = BackfillKind.LAYOUT,
) -> LeaseGrant:
    """Take the backfill lease for one run (see the module docstring for the refusals).

    state: the record as the caller just read it (a run's planning reads it once and passes it
    on); read here when not given. The compare-and-set on its version keeps it honest.
    """
    wanted = BackfillDirection.parse(direction)
    holder, token = nonblank("holder", holder), nonblank("token", token)
    now = to_millis(clock())
    state = state if state is not None else store.read()
    source, target = _check_acquirable(state, wanted, token, now, kind)
    held = state.lease
    if held is not None and held.token == token and held.state_version == state.version:
        return LeaseGrant(held, source, target, state, _epoch_of(state))
    epoch = next_epoch(state, now, newest_armed_epoch(store))
    lease = Lease(
        holder=holder,
        token=token,
        direction=wanted,
        acquired_at=now,
        heartbeat_at=now,
        expires_at=now + timedelta(seconds=ttl_seconds),
        state_version=state.version,
        kind=kind,
    )
    try:
        updated = store.update(
            set_values={**present(lease_attributes(lease)), LEASE_EPOCH: epoch},
            # A new lease has reported no pace yet; an expired one's must not show as its.
            remove=(LEASE_PACE,),
            condition=all_conditions(STILL_THE_VERSION_READ, LEASE_FREE_OR_OURS, EPOCH_STILL_BELOW),
            values={
                ":expectedVersion": state.version,
                ":now": format_time(now),
                ":token": token,
                ":epoch": epoch,
            },
        )
    except (RetryLaterError, ClientError, BotoCoreError) as err:
        # A request of the acquire may have landed with its answer lost: the record decides.
        updated = _read_back_acquire(store, token, err)
    if updated is None:
        fresh = store.read()
        if fresh.lease is not None and fresh.lease.token == token:
            return LeaseGrant(fresh.lease, source, target, fresh, _epoch_of(fresh))
        if fresh.version != state.version:
            raise VersionConflictError(state.version, fresh.version, fresh.phase.value)
        _check_acquirable(fresh, wanted, token, now, kind)
        raise LeaseChangedHandsError(
            "the backfill lease changed hands while it was taken: start again"
        )
    record_control_event(
        store,
        EVENT_LEASE_ACQUIRED,
        holder,
        now,
        updated.version,
        {**present(lease_attributes(lease)), LEASE_EPOCH: epoch},
    )
    return LeaseGrant(lease, source, target, updated, epoch)


def _read_back_acquire(store: ControlStore, token: str, err: BaseException) -> ControlState | None:
    """After an acquire whose outcome is unknown: the state when this run's token holds the
    lease (the lost request landed: the run goes on with it, nothing orphaned), else the error
    again, now known not to have landed."""
    try:
        fresh = store.read()
    except (RetryLaterError, ClientError, BotoCoreError) as read_err:
        raise LeaseOutcomeUnknownError(token, err, read_err) from err
    if fresh.lease is not None and fresh.lease.token == token:
        return fresh
    if isinstance(err, RetryLaterError) and not err.outcome_known:
        raise RetryLaterError(
            f"{err}. Read back, the backfill lease is not this run's: the acquire did not "
            "land, nothing was written",
            retry_at=err.retry_at,
        ) from err
    raise err


def _epoch_of(state: ControlState) -> int:
    """The epoch of the lease `state` holds for the caller's token (a retry finds its own)."""
    if state.lease_epoch is None:
        raise ControlError(
            "the backfill lease is held without a fencing epoch (`leaseEpoch`): it was taken "
            "by an older release of saga-index; release it (`saga-index backfill --stop`) or "
            "let it expire, then start the run again"
        )
    return state.lease_epoch


def heartbeat_lease(
    store: ControlStore,
    *,
    token: str,
    clock: WallClock = utc_now,
    ttl_seconds: float = LEASE_TTL_SECONDS,
    pace: str | None = None,
) -> ControlState:
    """Extend this run's lease; the state it returns carries the current throttle and pause.
    `pace`: the pace the run chose and why, written with the heartbeat for `status` to show.

    LeaseLostError when another run took the lease over, it was released, or the state's
    version changed since the lease was taken (the run must stop: its layouts are stale).
    """
    now = to_millis(clock())
    extended: dict[str, Any] = {
        LEASE_HEARTBEAT_AT: format_time(now),
        LEASE_EXPIRES_AT: format_time(now + timedelta(seconds=ttl_seconds)),
    }
    if pace is not None:
        extended[LEASE_PACE] = pace
    updated = store.update(
        set_values=extended,
        condition=all_conditions(OUR_LEASE, UNDER_THE_LEASED_STATE),
        values={":token": token},
    )
    if updated is not None:
        return updated
    raise LeaseLostError(why_lost(store.read(), token))


def release_lease(
    store: ControlStore,
    *,
    token: str,
    completion: BackfillCompletion | None = None,
    clock: WallClock = utc_now,
) -> ControlState:
    """Free this run's lease, recording its completion when given.

    A release repeated after it succeeded returns the state. LeaseLostError when the lease is
    no longer this run's and the completion (if any) was not recorded: `phase set` will not
    see this run.
    """
    if completion is not None and completion.lease_token != token:
        raise InvalidBackfillControlError("the completion belongs to another lease token")
    now = to_millis(clock())
    updated = store.update(
        set_values=completion_attributes(completion) if completion else {},
        remove=LEASE_ATTRIBUTES,
        condition=OUR_LEASE,
        values={":token": token},
    )
    if updated is None:
        fresh = store.read()
        recorded = fresh.last_backfill is not None and fresh.last_backfill.lease_token == token
        if completion is None or recorded:
            return fresh
        raise LeaseLostError(why_lost(fresh, token) + "; its completion was not recorded")
    details: dict[str, Any] = {LEASE_TOKEN: token}
    if completion is not None:
        details.update(completion_attributes(completion))
    record_control_event(
        store,
        EVENT_LEASE_RELEASED,
        completion.holder if completion else "",
        now,
        updated.version,
        details,
    )
    return updated


# ---- internals -------------------------------------------------------------------------------


def _check_acquirable(
    state: ControlState,
    direction: BackfillDirection,
    token: str,
    now: datetime,
    kind: BackfillKind = BackfillKind.LAYOUT,
) -> tuple[Layout, Layout]:
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    by_kind = open_index_layouts if kind is BackfillKind.OPEN_INDEX else backfill_layouts
    layouts = by_kind(state, direction)
    lease = state.lease
    if lease is not None and lease.token == token and lease.state_version == state.version:
        return layouts
    check_startable(state, now, token=token)
    return layouts


def check_startable(state: ControlState, now: datetime, *, token: str | None = None) -> None:
    """The backfill's start rule, the one every starter asks: the acquire (the Step Functions
    plan step and the local run take the lease through it), and the CLI before it starts a
    Step Functions execution (so a refusal is its exit, not a failed execution). Refused, in
    this order: a state younger than its effectiveAt (writers may still stamp the old key;
    LeaseNotYetEffectiveError), another run's live lease (LeaseHeldError). `token`: the run
    asking, whose own lease is no refusal; none asks for any run."""
    wait = seconds_until(state.effective_at, now)
    if wait > 0 and state.effective_at is not None:
        raise LeaseNotYetEffectiveError(
            format_time(state.effective_at), wait, retry_at=state.effective_at
        )
    lease = state.lease
    if lease is not None and lease.token != token and lease.is_live(now):
        expires = format_time(lease.expires_at)
        raise LeaseHeldError(lease.holder, expires, retry_at=lease.expires_at, kind=lease.kind)


def why_lost(state: ControlState, token: str) -> str:
    lease = state.lease
    if lease is None:
        return "this run no longer holds the backfill lease: it was released"
    if lease.token != token:
        return f"the backfill lease was taken over by {lease.holder!r} after this run's expired"
    return (
        f"the record moved to version {state.version} (phase {state.phase.value!r}) since this "
        f"run took its lease under version {lease.state_version}: stop, the layouts changed"
    )
