"""`phase set` against the store: plan, check, then the write every move of the record takes
(write_move: intent, compare-and-set, settle in apply.py; docs/control-contract.md,
"Transitions"). `open-index set` (open_index_move.py) writes through the same write_move with
its own planner and requirements."""

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
    ControlRecordMissingError,
    ControlState,
    ControlStore,
    ControlTiming,
    Phase,
    RecordCondition,
    Transition,
    WallClock,
    format_time,
    to_millis,
    utc_now,
)
from saga_index.layout_change.transitions.apply import (
    UNSETTLED,
    apply_transition,
    describe_error,
)
from saga_index.layout_change.transitions.errors import (
    PreconditionFailedError,
    PreconditionResult,
)
from saga_index.layout_change.transitions.requirements import (
    CompletionCheckOptions,
    ShardKeyProbe,
    completion_checks,
    first_move_guard,
)
from saga_index.layout_change.transitions.rules import (
    BACKFILL_CHECK,
    PlannedChange,
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
_Move = TypeVar("_Move", bound=PlannedChange)


@dataclass(frozen=True)
class Judged:
    """What a move's requirements said before it is written: the checks' results, and the
    names of those `force` skipped (the transition records both)."""

    results: tuple[PreconditionResult, ...] = ()
    forced: tuple[str, ...] = ()


def write_move(
    store: ControlStore,
    *,
    changed_by: str,
    reason: str,
    plan: Callable[[ControlState], _Move],
    judge: Callable[[ControlState, _Move], Judged],
    describe: Callable[[_Move], str],
    clock: WallClock,
    timing: ControlTiming,
) -> PhaseChange:
    """The one way a move of the record is written, whichever dimension it moves: read the
    record, settle its history, `plan` the move from it, `judge` what the move requires (it
    raises, before anything is written, when the move must not be written yet or at all), then
    the transition (rules.transition_for) through apply_transition, and the record read back.
    `describe` names the move in the log line of a forced one."""
    changed_by, reason = required_text("changed_by", changed_by), required_text("reason", reason)
    state = store.read()
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    repair_history(store, state)
    move = plan(state)
    judged = judge(state, move)
    transition = transition_for(
        move,
        to_millis(clock()),
        changed_by=changed_by,
        reason=reason,
        effective_delay=timing.effective_delay,
        checks_passed=tuple(r.name for r in judged.results if r.passed),
        checks_forced=judged.forced,
    )
    warnings = apply_transition(store, state, transition)
    if judged.forced:
        log.warning(
            "%s forced by %s, checks skipped: %s",
            describe(move),
            changed_by,
            ", ".join(judged.forced),
            extra={"version": transition.version, "checksForced": list(judged.forced)},
        )
    try:
        new_state = store.read()
    except (ClientError, BotoCoreError) as err:
        # The move is applied: a failed read-back changes nothing but what is shown.
        warnings.append(f"the record could not be read back ({describe_error(err)}): phase show")
        new_state = ControlState(transition=transition)
    return PhaseChange(
        state=new_state,
        transition=transition,
        checks=judged.results,
        history_written=not any(w.startswith(UNSETTLED) for w in warnings),
        warnings=tuple(warnings),
    )


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

    def judge(state: ControlState, move: PlannedMove) -> Judged:
        if move.completes is not None:
            _require_settled_switch(state, move, clock(), timing)
        checks, guards = requirements(state, move)
        return _judge(state, move, checks, guards, force=force)

    return write_move(
        store,
        changed_by=changed_by,
        reason=reason,
        plan=lambda state: plan_move(state, requested, shard_count=shard_count),
        judge=judge,
        describe=lambda move: f"phase {move.to_phase.value}",
        clock=clock,
        timing=timing,
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
) -> Judged:
    """Run what the move requires against `state`: the results, or the names `force` skipped.
    Raises PreconditionFailedError, before anything is written, when one of them failed."""
    if move.completes is None and not guards:
        return Judged()
    names = (
        *((BACKFILL_CHECK, *(c.name for c in checks)) if move.completes else ()),
        *(g.name for g in guards),
    )
    if force:
        return Judged(forced=names)
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
    return Judged(results)


def required_text(name: str, value: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    return value.strip()
