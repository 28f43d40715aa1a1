"""The operator's run-time control of the running backfill: its write cap (throttle) and its
pause flag, in the STATE item (docs/control-contract.md, "The backfill lease"). The lease's
holder follows them on its next heartbeat (layout_change.backfill.keeper); neither bumps
`version`.
"""

from __future__ import annotations

from typing import Any, Final

from saga_index.index import MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.lease.errors import InvalidBackfillControlError
from saga_index.layout_change.lease.events import (
    EVENT_PAUSE,
    EVENT_RESUME,
    EVENT_THROTTLE,
    nonblank,
    record_control_event,
)
from saga_index.layout_change.record import (
    BACKFILL_MAX_WRITES_PER_SECOND,
    BACKFILL_PAUSED,
    STATE_EXISTS,
    ControlRecordMissingError,
    ControlState,
    ControlStore,
    RecordCondition,
    WallClock,
    to_millis,
    utc_now,
)


def set_throttle(
    store: ControlStore,
    max_writes_per_second: float,
    *,
    changed_by: str,
    reason: str = "",
    clock: WallClock = utc_now,
) -> ControlState:
    """Set the running backfill's write cap; workers pick it up on their next read."""
    if (
        isinstance(max_writes_per_second, bool)
        or not isinstance(max_writes_per_second, int | float)
        or not MIN_WRITES_PER_SECOND <= max_writes_per_second <= MAX_WRITES_PER_SECOND
    ):
        raise InvalidBackfillControlError(
            f"max writes per second must be a number from {MIN_WRITES_PER_SECOND:g} to "
            f"{MAX_WRITES_PER_SECOND:g}, got {max_writes_per_second!r}"
        )
    rate = float(max_writes_per_second)
    return _set_control(
        store,
        EVENT_THROTTLE,
        {BACKFILL_MAX_WRITES_PER_SECOND: rate},
        changed_by=changed_by,
        reason=reason,
        clock=clock,
    )


# The EVENT of `backfill throttle --clear`: the runtime cap removed, the run's own cap applies.
EVENT_THROTTLE_CLEARED: Final = "throttle-cleared"


def clear_throttle(
    store: ControlStore, *, changed_by: str, reason: str = "", clock: WallClock = utc_now
) -> ControlState:
    """Remove the runtime write cap: a running backfill goes back to its own
    --max-writes-per-second at its next heartbeat, and the next run starts with its own."""
    return _set_control(
        store,
        EVENT_THROTTLE_CLEARED,
        {},
        remove=(BACKFILL_MAX_WRITES_PER_SECOND,),
        details={"cleared": BACKFILL_MAX_WRITES_PER_SECOND},
        changed_by=changed_by,
        reason=reason,
        clock=clock,
    )


def pause_backfill(
    store: ControlStore, *, changed_by: str, reason: str = "", clock: WallClock = utc_now
) -> ControlState:
    return _set_control(
        store,
        EVENT_PAUSE,
        {BACKFILL_PAUSED: True},
        changed_by=changed_by,
        reason=reason,
        clock=clock,
    )


def resume_backfill(
    store: ControlStore, *, changed_by: str, reason: str = "", clock: WallClock = utc_now
) -> ControlState:
    return _set_control(
        store,
        EVENT_RESUME,
        {BACKFILL_PAUSED: False},
        changed_by=changed_by,
        reason=reason,
        clock=clock,
    )


def _set_control(
    store: ControlStore,
    event: str,
    values: dict[str, Any],
    *,
    changed_by: str,
    reason: str,
    clock: WallClock,
    remove: tuple[str, ...] = (),
    details: dict[str, Any] | None = None,
) -> ControlState:
    changed_by = nonblank("changed_by", changed_by)
    now = to_millis(clock())
    updated = store.update(set_values=values, remove=remove, condition=STATE_EXISTS)
    if updated is None:
        state = store.read()
        if state.condition is RecordCondition.MISSING:
            raise ControlRecordMissingError(state.version)
        raise InvalidBackfillControlError(
            "there is no control record yet (phase legacy, never migrated): nothing to "
            f"{event}; the first `phase set` creates it"
        )
    record_control_event(store, event, changed_by, now, updated.version, details or values, reason)
    return updated
