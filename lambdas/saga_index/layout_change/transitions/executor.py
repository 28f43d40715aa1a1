"""`phase set` against the store: plan, check, compare-and-set, history (docs/control-contract.md,
"Transitions").

Crash safety without transactions: the compare-and-set writes the whole transition (from, to,
who, when, why, checks) onto the STATE item, and the HISTORY item is a copy of it keyed by
version and written only if absent. A crash between the two writes leaves a STATE whose history
item is missing; the next `set_phase` (or `repair_history`) writes it from the STATE. Repeating
either write changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.record.errors import (
    CheckResult,
    ControlRecordMissingError,
    PreconditionFailedError,
    VersionConflictError,
)
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import to_millis
from saga_index.layout_change.record.timing import DEFAULT_TIMING, ControlTiming, WallClock, utc_now
from saga_index.layout_change.transitions.rules import (
    BACKFILL_CHECK,
    Precondition,
    check_backfill,
    plan_move,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhaseChange:
    """A transition that was written: the state it left and what its checks said."""

    state: ControlState
    transition: Transition
    checks: tuple[CheckResult, ...]
    history_written: bool

    @property
    def forced(self) -> tuple[str, ...]:
        return self.transition.checks_forced


def set_phase(
    store: ControlStore,
    requested: Phase | str,
    *,
    changed_by: str,
    reason: str,
    shard_count: int | None = None,
    force: bool = False,
    checks: Sequence[Precondition] = (),
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
) -> PhaseChange:
    """Move the record to `requested` along an allowed edge.

    Raises TransitionNotAllowedError (not an allowed move, or a shard count that disagrees),
    PreconditionFailedError (a completing move whose checks failed; nothing written),
    VersionConflictError (someone else changed the record first; nothing written),
    ControlRecordMissingError (the STATE item was deleted: restore it first).
    `force` skips the checks of a completing move; it needs a reason, and the transition
    records the names of the checks it skipped.
    """
    changed_by, reason = _required("changed_by", changed_by), _required("reason", reason)
    state = store.read()
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    repair_history(store, state)
    move = plan_move(state, requested, shard_count=shard_count)

    results: tuple[CheckResult, ...] = ()
    forced: tuple[str, ...] = ()
    if move.completes is not None:
        names = (BACKFILL_CHECK, *(c.name for c in checks))
        if force:
            forced = names
        else:
            results = (
                check_backfill(state, move.completes),
                *(c.run(state) for c in checks),
            )
            failed = [r for r in results if not r.passed]
            if failed:
                raise PreconditionFailedError(move.to_phase.value, failed)

    now = to_millis(clock())
    transition = Transition(
        version=state.version + 1,
        layout=move.layout,
        moving_to=move.moving_to,
        previous_layout=state.layout,
        previous_moving_to=state.moving_to,
        changed_at=now,
        changed_by=changed_by,
        reason=reason,
        effective_at=now + timing.effective_delay,
        checks_passed=tuple(r.name for r in results if r.passed),
        checks_forced=forced,
    )
    if not store.compare_and_set(state.version, transition):
        current = store.read()
        # A retried request whose first attempt was applied finds its own transition.
        if current.transition != transition:
            raise VersionConflictError(state.version, current.version, current.phase.value)
    if forced:
        log.warning(
            "phase %s forced by %s, checks skipped: %s",
            transition.phase.value,
            changed_by,
            ", ".join(forced),
            extra={"version": transition.version, "checksForced": list(forced)},
        )
    written = store.put_history(transition)
    new_state = store.read()
    return PhaseChange(
        state=new_state, transition=transition, checks=results, history_written=written
    )


def repair_history(store: ControlStore, state: ControlState | None = None) -> bool:
    """Write the HISTORY item of the record's current version if it is missing; True when it
    was. Earlier versions' items cannot be rebuilt (the STATE holds only the newest)."""
    current = store.read() if state is None else state
    if current.condition is not RecordCondition.PRESENT or current.transition is None:
        return False
    written = store.put_history(current.transition)
    if written:
        log.warning(
            "control history item of version %d was missing: rewritten from the STATE item",
            current.version,
            extra={"version": current.version},
        )
    return written


def restore_state(store: ControlStore) -> ControlState:
    """Re-create a deleted STATE item from the newest HISTORY item (same version, same
    layouts). Lease, throttle, pause and the last backfill are not in history: they come back
    empty, so a completing move needs a new verified backfill. No-op when STATE exists."""
    state = store.read()
    if state.condition is RecordCondition.MISSING and state.transition is not None:
        store.restore(ControlState(transition=state.transition))
        log.warning(
            "control STATE item restored from history version %d",
            state.version,
            extra={"version": state.version},
        )
        return store.read()
    return state


def _required(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    return value.strip()
