"""The allowed phase moves and what each one requires (pure; executor.py applies them).

  legacy        -> migrating      (N = --shards, default 16)            never blocked
  migrating     -> sharded        completes the forward move            checks required
  migrating     -> rolling-back   abort: current sharded(N), movingTo legacy   never blocked
  sharded       -> rolling-back                                         never blocked
  rolling-back  -> legacy         completes the rollback                checks required
  rolling-back  -> migrating      abort the rollback (swap back)        never blocked

A move toward the layout rows came from (an abort, a rollback) only changes which key writers
stamp and reads stay dual, so no row can hide: it is never blocked by checks. A move that
COMPLETES a migration stops reading the source layout, so every row must have left it first.
`resharding` (issue 13) is a state the record can hold but no move reaches yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from saga_index.control.errors import (
    CheckResult,
    ControlRecordMissingError,
    TransitionNotAllowedError,
)
from saga_index.control.layout import LEGACY, Layout, StatePhase
from saga_index.control.record import format_time
from saga_index.control.state import BackfillDirection, ControlState, RecordCondition
from saga_index.shard import DEFAULT_SHARD_COUNT, validate_shard_count

ALLOWED_MOVES: dict[StatePhase, tuple[StatePhase, ...]] = {
    StatePhase.LEGACY: (StatePhase.MIGRATING,),
    StatePhase.MIGRATING: (StatePhase.SHARDED, StatePhase.ROLLING_BACK),
    StatePhase.SHARDED: (StatePhase.ROLLING_BACK,),
    StatePhase.ROLLING_BACK: (StatePhase.LEGACY, StatePhase.MIGRATING),
    StatePhase.RESHARDING: (),
}

BACKFILL_CHECK = "backfill-verified"


@dataclass(frozen=True)
class Precondition:
    """A named check run against the state a transition starts from (injected by the CLI:
    drift counts, parity). `run` returns the verdict; an exception it raises is not a pass."""

    name: str
    run: Callable[[ControlState], CheckResult]


@dataclass(frozen=True)
class PlannedMove:
    """A move that is allowed from the state it was planned on."""

    from_state: ControlState
    to_phase: StatePhase
    layout: Layout
    moving_to: Layout | None
    # The backfill direction this move completes; None when the move is never blocked.
    completes: BackfillDirection | None

    @property
    def guarded(self) -> bool:
        return self.completes is not None


def allowed_moves(phase: StatePhase) -> tuple[str, ...]:
    return tuple(p.value for p in ALLOWED_MOVES[phase])


def plan_move(
    state: ControlState, requested: StatePhase | str, *, shard_count: int | None = None
) -> PlannedMove:
    """The state a move leads to, or TransitionNotAllowedError naming the allowed moves.

    shard_count is required-with-default only for legacy -> migrating; elsewhere N comes from
    the record and a shard_count that disagrees with it is refused.
    """
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    target = StatePhase.parse(requested)
    current = state.phase
    allowed = allowed_moves(current)

    def refuse(detail: str) -> TransitionNotAllowedError:
        return TransitionNotAllowedError(current.value, target.value, allowed, detail)

    if target is current:
        raise refuse(f"the record is already {current.value!r} (version {state.version})")
    if target not in ALLOWED_MOVES[current]:
        raise refuse("not an allowed move")
    if current is StatePhase.LEGACY:
        n = validate_shard_count(DEFAULT_SHARD_COUNT if shard_count is None else shard_count)
        return PlannedMove(state, target, LEGACY, Layout.sharded(n), None)
    sharded = state.moving_to if current is StatePhase.MIGRATING else state.layout
    if sharded is None or sharded.shard_count is None:  # excluded by phase_of; keeps mypy sure
        raise refuse(f"the record names no sharded layout ({state.layout} -> {state.moving_to})")
    if shard_count is not None and shard_count != sharded.shard_count:
        raise refuse(
            f"the record's shard count is {sharded.shard_count}; --shards {shard_count} "
            "disagrees (a different N needs a re-shard, not this move)"
        )
    moves: dict[tuple[StatePhase, StatePhase], PlannedMove] = {
        (StatePhase.MIGRATING, StatePhase.SHARDED): PlannedMove(
            state, target, sharded, None, BackfillDirection.FORWARD
        ),
        (StatePhase.MIGRATING, StatePhase.ROLLING_BACK): PlannedMove(
            state, target, sharded, LEGACY, None
        ),
        (StatePhase.SHARDED, StatePhase.ROLLING_BACK): PlannedMove(
            state, target, sharded, LEGACY, None
        ),
        (StatePhase.ROLLING_BACK, StatePhase.LEGACY): PlannedMove(
            state, target, LEGACY, None, BackfillDirection.ROLLBACK
        ),
        (StatePhase.ROLLING_BACK, StatePhase.MIGRATING): PlannedMove(
            state, target, LEGACY, sharded, None
        ),
    }
    return moves[(current, target)]


def check_backfill(state: ControlState, direction: BackfillDirection) -> CheckResult:
    """The built-in precondition of a completing move: the last backfill ran in `direction`
    over exactly this state's move, under this version, started no earlier than effectiveAt
    (so no writer still stamped the source key) and finished complete and verified."""
    run = state.last_backfill
    name = BACKFILL_CHECK
    if run is None:
        return CheckResult(name, False, f"no {direction.value} backfill has been recorded")
    source, target = state.layout, state.moving_to
    problems: list[str] = []
    if run.direction is not direction:
        problems.append(f"the last run was {run.direction.value}, not {direction.value}")
    if run.state_version != state.version:
        problems.append(
            f"it ran under version {run.state_version}, the record is at version {state.version}"
        )
    if run.source != source or run.target != target:
        problems.append(f"it moved {run.source} -> {run.target}, not {source} -> {target}")
    effective_at = state.effective_at
    if effective_at is not None:
        if run.started_at < effective_at:
            problems.append(
                f"it started at {format_time(run.started_at)}, before effectiveAt "
                f"{format_time(effective_at)}"
            )
        if run.completed_at <= effective_at:
            problems.append(
                f"it completed at {format_time(run.completed_at)}, not after effectiveAt"
            )
    if not run.complete:
        problems.append("it did not complete")
    if not run.verified:
        problems.append("its verification did not pass")
    if problems:
        return CheckResult(name, False, "; ".join(problems))
    return CheckResult(
        name,
        True,
        f"{direction.value} backfill {run.source} -> {run.target} completed at "
        f"{format_time(run.completed_at)}: scanned {run.scanned}, restamped {run.restamped}, "
        f"anomalies {run.anomalies}, verified",
    )


def seconds_until(moment: datetime | None, now: datetime) -> float:
    """How long from now until `moment` (0 when it has passed or there is none)."""
    if moment is None:
        return 0.0
    return max(0.0, (moment - now).total_seconds())
