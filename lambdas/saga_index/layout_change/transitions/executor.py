"""`phase set` against the store: plan, check, intent, compare-and-set, settle
(docs/control-contract.md, "Transitions").

Crash safety without transactions: the HISTORY item of version v+1 is written FIRST, as an
intent (`applied = false`, only into an empty slot or over an intent nobody confirmed), then the
STATE compare-and-set on version v, then the intent is settled (`applied = true`). No STATE can
exist without its history item. A crash or failure after the intent leaves an item that is not
confirmed: a failed STATE write marks it abandoned, a lost race has the winner's transition
settled into the slot, and a crash leaves it undecided (record/history.py, `restore_point`, says
what a restore follows then). The next `change_phase` (or `repair_history`, settle.py) settles the
current version's item from the STATE. Repeating any write changes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import InvalidInputError, RetryLaterError
from saga_index.layout_change.checks import probe_shard_keys
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlRecordInvalidError,
    ControlRecordMissingError,
    ControlState,
    ControlStore,
    ControlTiming,
    Phase,
    RecordCondition,
    Transition,
    VersionConflictError,
    WallClock,
    format_time,
    to_millis,
    utc_now,
)
from saga_index.layout_change.transitions.errors import (
    MoveOutcomeUnknownError,
    NotAppliedRetryLaterError,
    PreconditionFailedError,
    PreconditionResult,
    StateWriteFailedError,
)
from saga_index.layout_change.transitions.requirements import (
    CompletionCheckOptions,
    ShardKeyProbe,
    completion_checks,
    first_move_guard,
)
from saga_index.layout_change.transitions.rules import (
    BACKFILL_CHECK,
    PlannedMove,
    Precondition,
    backfill_verified,
    plan_move,
    settled_at,
    transition_for,
)
from saga_index.layout_change.transitions.settle import repair_history

__all__ = [
    "PhaseChange",
    "apply_transition",
    "change_phase",
    "repair_history",
]

log = logging.getLogger(__name__)
DEFAULT_CHECK_OPTIONS = CompletionCheckOptions()
_T = TypeVar("_T")


@dataclass(frozen=True)
class PhaseChange:
    """A transition that was written: the state it left and what its checks said."""

    state: ControlState
    transition: Transition
    checks: tuple[PreconditionResult, ...]
    history_written: bool
    # What failed AFTER the STATE write landed (the move is applied) and how it is repaired.
    warnings: tuple[str, ...] = ()

    @property
    def forced(self) -> tuple[str, ...]:
        return self.transition.checks_forced


def change_phase(
    store: ControlStore,
    requested: Phase | str,
    *,
    changed_by: str,
    reason: str,
    shard_count: int | None = None,
    force: bool = False,
    options: CompletionCheckOptions = DEFAULT_CHECK_OPTIONS,
    probe: ShardKeyProbe = probe_shard_keys,
    sleep: Callable[[float], None] = time.sleep,
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
) -> PhaseChange:
    """Move the record to `requested` along an allowed edge: `phase set`, the one way a move
    is written. It plans the move from the record it reads and chooses what the move requires
    itself (requirements.py): a completing move's checks, and the guard of a table's first
    move. `options` says how the checks read the table, `probe` how the guard reads the shard
    keys, `sleep` waits out the parity re-check; none of them can leave a check out.

    Raises TransitionNotAllowedError (not an allowed move, or a shard count that disagrees),
    PreconditionFailedError (a completing move whose checks failed; nothing written),
    VersionConflictError (someone else changed the record first: not applied),
    StateWriteFailedError (the STATE write failed and STATE still holds the version read: not
    applied), MoveOutcomeUnknownError (neither the write nor the read-back answered),
    ControlRecordMissingError (the STATE item was deleted: restore it first),
    RetryLaterError (a completing move, forced or not, before the state's effectiveAt plus the
    in-flight margin: writes chosen under its prior layout may still land; nothing written,
    `retry_at` says when).
    Once the STATE write landed the move is returned as applied, whatever fails after it: what
    failed is in PhaseChange.warnings. `guards` run before any move (not only completing ones).
    `force` skips the checks and guards (never the settled switch); it needs a reason, and the
    transition records the names of the checks it skipped.
    """

    def required(state: ControlState, move: PlannedMove) -> _Requirements:
        checks = (
            completion_checks(store, state, move.to_phase, options, sleep=sleep)
            if move.guarded
            else []
        )
        return checks, [first_move_guard(store, probe)] if state.version == 0 else []

    return _set_phase(
        store,
        requested,
        changed_by=changed_by,
        reason=reason,
        shard_count=shard_count,
        force=force,
        requirements=required,
        clock=clock,
        timing=timing,
    )


# A move's completion checks and its guards, chosen from the record as read and the move.
_Requirements = tuple[Sequence[Precondition], Sequence[Precondition]]


def _set_phase(
    store: ControlStore,
    requested: Phase | str,
    *,
    changed_by: str,
    reason: str,
    shard_count: int | None,
    force: bool,
    requirements: Callable[[ControlState, PlannedMove], _Requirements],
    clock: WallClock,
    timing: ControlTiming,
) -> PhaseChange:
    """The write of a move whose requirements `change_phase` chose (tests of the write
    protocol pass their own)."""
    changed_by, reason = required_text("changed_by", changed_by), required_text("reason", reason)
    state = store.read()
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    repair_history(store, state)
    move = plan_move(state, requested, shard_count=shard_count)
    if move.completes is not None:
        _require_settled_switch(state, move, clock(), timing)

    checks, guards = requirements(state, move)
    results, forced = _judge(state, move, checks, guards, force=force)
    now = to_millis(clock())
    transition = transition_for(
        move,
        now,
        changed_by=changed_by,
        reason=reason,
        effective_delay=timing.effective_delay,
        checks_passed=tuple(r.name for r in results if r.passed),
        checks_forced=forced,
    )
    warnings = apply_transition(store, state, transition)
    if forced:
        log.warning(
            "phase %s forced by %s, checks skipped: %s",
            transition.phase.value,
            changed_by,
            ", ".join(forced),
            extra={"version": transition.version, "checksForced": list(forced)},
        )
    try:
        new_state = store.read()
    except (ClientError, BotoCoreError) as err:
        # The move is applied: a failed read-back changes nothing but what is shown.
        warnings.append(f"the record could not be read back ({_describe(err)}): phase show")
        new_state = ControlState(transition=transition)
    return PhaseChange(
        state=new_state,
        transition=transition,
        checks=results,
        history_written=not any(w.startswith(_UNSETTLED) for w in warnings),
        warnings=tuple(warnings),
    )


def _require_settled_switch(
    state: ControlState, move: PlannedMove, now: datetime, timing: ControlTiming
) -> None:
    """A completing move stops readers from reading the source layout: refused until every
    write that could still target it has landed (rules.settled_at). The checks run after this,
    so they judge the table as it is once those writes landed. `--force` does not skip it."""
    settled = settled_at(state, timing.in_flight_margin_seconds)
    if settled is None or now >= settled:
        return
    wait = (settled - now).total_seconds()
    raise RetryLaterError(
        f"phase {move.to_phase.value} stops readers from reading {state.layout}, and writes "
        f"keyed under version {state.version}'s prior layout may still land until "
        f"{format_time(settled)} (effectiveAt {format_time(state.effective_at or settled)} "
        f"plus the {timing.in_flight_margin_seconds:g} s in-flight margin): nothing written; "
        f"run it again at or after {format_time(settled)} (in {wait:.1f} s). --force does not "
        "skip this wait",
        retry_at=settled,
    )


def _judge(
    state: ControlState,
    move: PlannedMove,
    checks: Sequence[Precondition],
    guards: Sequence[Precondition],
    *,
    force: bool,
) -> tuple[tuple[PreconditionResult, ...], tuple[str, ...]]:
    """Run what the move requires against `state`: (the results, the names `force` skipped).
    Raises PreconditionFailedError, before anything is written, when one of them failed."""
    if move.completes is None and not guards:
        return (), ()
    names = (
        *((BACKFILL_CHECK, *(c.name for c in checks)) if move.completes else ()),
        *(g.name for g in guards),
    )
    if force:
        return (), names
    results = (
        *(
            (backfill_verified(state, move.completes), *(c.run(state) for c in checks))
            if move.completes is not None
            else ()
        ),
        *(g.run(state) for g in guards),
    )
    failed = [r for r in results if not r.passed]
    if failed:
        raise PreconditionFailedError(move.to_phase.value, failed)
    return results, ()


_UNSETTLED = "applied, but its history item"


def apply_transition(store: ControlStore, state: ControlState, transition: Transition) -> list[str]:
    """Intent, compare-and-set, settle. Returns warnings about an APPLIED move (exit 0); raises
    when the move was not applied (lost the race, or the STATE write failed)."""
    try:
        _write_intent(store, state, transition)
    except (ClientError, BotoCoreError) as err:
        log.error(
            "the history intent of version %d could not be written (%s): the move was NOT "
            "applied, nothing changed",
            transition.version,
            _describe(err),
        )
        raise
    try:
        won = store.compare_and_set(state.version, transition)
    except (RetryLaterError, ClientError, BotoCoreError) as err:
        # Refused past the retries, or no answer: an attempt may have landed with its answer
        # lost (botocore resends after a timeout or a dropped connection): STATE decides.
        return _after_failed_write(store, state, transition, err)
    if not won:
        current = store.read()
        # A retried request whose first attempt was applied finds its own transition.
        if current.transition != transition:
            if current.transition is not None and current.condition is RecordCondition.PRESENT:
                # The winner settles its own item too; doing it here as well means our
                # intent, if it took that version's slot, never outlives the race.
                _try_settle(store, current.transition)
            raise VersionConflictError(state.version, current.version, current.phase.value)
    return _settle_applied(store, transition)


def _write_intent(store: ControlStore, state: ControlState, transition: Transition) -> None:
    """HISTORY of version v+1 before STATE: no STATE can exist without its history item."""
    if store.put_intent(transition):
        return
    seen = store.history_entry(transition.version)
    if seen is not None and seen.transition == transition:
        return  # a retry of this very change
    current = store.read()
    if current.version != state.version:
        raise VersionConflictError(state.version, current.version, current.phase.value)
    if seen is not None and seen.applied:
        raise ControlRecordInvalidError(
            f"history version {transition.version} is marked applied while the STATE item is "
            f"at version {state.version}: the record was rolled back by hand. Compare them "
            "(phase show --history) before changing the phase"
        )
    # An intent over the same STATE version that no STATE write confirmed: another operator's
    # change in flight (the compare-and-set decides between us) or one whose STATE write
    # failed. Taking over its slot is safe either way: the STATE winner settles the slot.
    if seen is None or not store.take_over_intent(seen, transition):
        current = store.read()
        raise VersionConflictError(state.version, current.version, current.phase.value)
    log.warning(
        "history version %d held an unconfirmed intent by %s: taken over",
        transition.version,
        seen.transition.changed_by,
        extra={"version": transition.version},
    )


def _after_failed_write(
    store: ControlStore, state: ControlState, transition: Transition, err: Exception
) -> list[str]:
    """The STATE write raised (an error, or refusals past the retries): one of its requests
    may have landed with its answer lost, so what STATE holds now decides."""
    try:
        current = store.read()
    except (ClientError, BotoCoreError, RetryLaterError) as read_err:
        raise MoveOutcomeUnknownError(transition.version, err, read_err) from err
    # Only a STATE item holding the transition says it landed: with no STATE item (the first
    # move), the read follows the history, and our own intent is what it follows.
    stored = current.version if current.condition is RecordCondition.PRESENT else 0
    if current.condition is RecordCondition.PRESENT and current.transition == transition:
        return [
            f"the STATE write's answer was lost ({_describe(err)}); read back, the record "
            f"holds version {transition.version}: the move was applied",
            *_settle_applied(store, transition),
        ]
    if stored != state.version:
        raise VersionConflictError(state.version, stored, current.phase.value) from err
    abandoned = _try(lambda: store.abandon_intent(transition))
    if isinstance(err, RetryLaterError):
        raise NotAppliedRetryLaterError(transition.version, err, abandoned is True) from err
    failed = StateWriteFailedError(transition.version, err, abandoned is True)
    # Said here too: a caller that reports the service failure behind it (the CLI's exit 4)
    # still tells the operator that nothing was applied.
    log.error("%s", failed)
    raise failed from err


def _settle_applied(store: ControlStore, transition: Transition) -> list[str]:
    if _try_settle(store, transition):
        return []
    return [
        f"{_UNSETTLED} (HISTORY version {transition.version}) is still an unconfirmed intent: "
        "the next `phase set` or `phase restore` settles it from the STATE item; until then a "
        "restore after a lost STATE item follows it unless it completes a move"
    ]


def _try_settle(store: ControlStore, transition: Transition) -> bool:
    """True when the item of the transition's version is settled (written now or before)."""
    written = _try(lambda: store.settle_history(transition))
    if written is None:
        return False
    if not written:
        entry = _try(lambda: store.history_entry(transition.version))
        return entry is not None and entry.applied and entry.transition == transition
    return True


def _try(call: Callable[[], _T]) -> _T | None:
    try:
        return call()
    except (ClientError, BotoCoreError, RetryLaterError) as err:
        log.warning("control history write failed: %s", _describe(err))
        return None


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def required_text(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    return value.strip()
