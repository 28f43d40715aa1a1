"""The allowed phase moves and what each one requires (pure; executor.py applies them).

  legacy        -> migrating      (N = --shards, default 16)            never blocked
  migrating     -> sharded        completes the forward move            checks required
  migrating     -> rolling-back   abort: current sharded(N), movingTo legacy   never blocked
  sharded       -> rolling-back                                         never blocked
  rolling-back  -> legacy         completes the rollback                checks required
  rolling-back  -> migrating      abort the rollback (swap back)        never blocked
  sharded       -> resharding     N -> M = --shards, M = 2N or N/2       never blocked
  resharding    -> sharded        completes the re-shard (N becomes M)  checks required
  resharding    -> resharding     abort: --shards N swaps back, M -> N  never blocked

A move that opens or aborts a migration or a re-shard keeps reads dual and changes which key
writers stamp only at its effectiveAt (until then they stamp what the state before it stamped:
prior_write_for), so a reader still following the state before it never misses a fresh write:
it is never blocked by checks. A move that COMPLETES a migration or a re-shard stops reading
the source layout, so every row must have left it first.

A re-shard changes N by one factor of two per move: with powers of two, shard(p, 2N) is
shard(p, N) or shard(p, N) + N (docs/shard-contract.md), so a split moves only the rows whose
new shard is the upper one, and a merge is the same move backwards. The way back from a
re-shard is never a rollback: it is the abort (or, once completed, a merge), a forward move.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    LEGACY,
    MAX_SHARD_COUNT,
    Layout,
    validate_shard_count,
)
from saga_index.layout_change.record import (
    BackfillDirection,
    ControlRecordMissingError,
    ControlState,
    OpenIndex,
    Phase,
    RecordCondition,
    Transition,
    format_time,
)
from saga_index.layout_change.transitions.errors import (
    PreconditionResult,
    TransitionNotAllowedError,
)

ALLOWED_MOVES: dict[Phase, tuple[Phase, ...]] = {
    Phase.LEGACY: (Phase.MIGRATING,),
    Phase.MIGRATING: (Phase.SHARDED, Phase.ROLLING_BACK),
    Phase.SHARDED: (Phase.ROLLING_BACK, Phase.RESHARDING),
    Phase.ROLLING_BACK: (Phase.LEGACY, Phase.MIGRATING),
    Phase.RESHARDING: (Phase.SHARDED, Phase.RESHARDING),
}

BACKFILL_CHECK = "backfill-verified"


@dataclass(frozen=True)
class Precondition:
    """A named check run against the state a transition starts from (injected by the CLI:
    drift counts, parity). `run` returns the verdict; an exception it raises is not a pass."""

    name: str
    run: Callable[[ControlState], PreconditionResult]


@dataclass(frozen=True)
class PlannedMove:
    """A move that is allowed from the state it was planned on."""

    from_state: ControlState
    to_phase: Phase
    layout: Layout
    moving_to: Layout | None
    # The backfill direction this move completes; None when the move is never blocked.
    completes: BackfillDirection | None

    @property
    def guarded(self) -> bool:
        return self.completes is not None

    @property
    def open_index(self) -> OpenIndex:
        # A layout move leaves the open index as it is (one dimension per transition).
        return self.from_state.open_index

    def prior_write(self, changed_at: datetime) -> Layout:
        return prior_write_for(self.from_state, self, changed_at)


class PlannedChange(Protocol):
    """What a transition is built from, whichever dimension of the record it moves (a layout
    move, PlannedMove, or an open index move, open_index_rules.PlannedOpenIndexMove)."""

    @property
    def from_state(self) -> ControlState: ...

    @property
    def layout(self) -> Layout: ...

    @property
    def moving_to(self) -> Layout | None: ...

    @property
    def open_index(self) -> OpenIndex: ...

    def prior_write(self, changed_at: datetime) -> Layout:
        """The layout the new state's writers stamp until its effectiveAt."""
        ...


def prior_write_for(previous: ControlState, move: PlannedMove, changed_at: datetime) -> Layout:
    """The layout the new state's writers stamp until its effectiveAt: what the previous
    state's writers stamp at `changed_at` (its prior layout before its own effectiveAt, else
    its target), so no writer switches before every process can read the new key.

    It must be a layout the new state reads. Only a completing move before the previous
    effectiveAt could break that (the previous prior is the source it stops reading), and
    change_phase refuses one until effectiveAt plus the margin (settled_at), forced or not; should
    it happen anyway, writers stamp the new state's layout at once, which readers of both states
    read."""
    stamped = previous.writes_at(changed_at)  # legacy when never migrated
    if stamped not in (move.layout, move.moving_to):
        return move.moving_to or move.layout
    return stamped


def transition_for(
    move: PlannedChange,
    changed_at: datetime,
    *,
    changed_by: str,
    reason: str,
    effective_delay: timedelta,
    checks_passed: tuple[str, ...] = (),
    checks_forced: tuple[str, ...] = (),
) -> Transition:
    """The transition `phase set` or `open-index set` writes for `move` at `changed_at`: the
    next version, the move's layouts and open index, the state it leaves, effectiveAt and the
    prior write layout."""
    previous = move.from_state
    return Transition(
        version=previous.version + 1,
        layout=move.layout,
        moving_to=move.moving_to,
        previous_layout=previous.layout,
        previous_moving_to=previous.moving_to,
        changed_at=changed_at,
        changed_by=changed_by,
        reason=reason,
        effective_at=changed_at + effective_delay,
        checks_passed=checks_passed,
        checks_forced=checks_forced,
        prior_write=move.prior_write(changed_at),
        open_index=move.open_index,
        previous_open_index=previous.open_index,
    )


def allowed_moves(phase: Phase) -> tuple[str, ...]:
    return tuple(p.value for p in ALLOWED_MOVES[phase])


def plan_move(
    state: ControlState, requested: Phase | str, *, shard_count: int | None = None
) -> PlannedMove:
    """The state a move leads to, or TransitionNotAllowedError naming the allowed moves.

    shard_count is required-with-default for legacy -> migrating and required for a move to
    `resharding` (the N it moves to: reshard_targets); elsewhere N comes from the record and a
    shard_count that disagrees with it is refused.
    """
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    target = Phase.parse(requested)
    current = state.phase
    allowed = allowed_moves(current)

    def refuse(detail: str) -> TransitionNotAllowedError:
        return TransitionNotAllowedError(current.value, target.value, allowed, detail)

    if target is current and target is not Phase.RESHARDING:
        raise refuse(f"the record is already {current.value!r} (version {state.version})")
    if target not in ALLOWED_MOVES[current]:
        raise refuse("not an allowed move")
    if target is Phase.RESHARDING or current is Phase.RESHARDING:
        return _plan_reshard(state, target, shard_count, refuse)
    if shard_count is not None:
        validate_shard_count(shard_count)
    if current is Phase.LEGACY:
        n = validate_shard_count(DEFAULT_SHARD_COUNT if shard_count is None else shard_count)
        return PlannedMove(state, target, LEGACY, Layout.sharded(n), None)
    sharded = state.moving_to if current is Phase.MIGRATING else state.layout
    if sharded is None or sharded.shard_count is None:  # excluded by phase_of; keeps mypy sure
        raise refuse(f"the record names no sharded layout ({state.layout} -> {state.moving_to})")
    if shard_count is not None and shard_count != sharded.shard_count:
        raise refuse(
            f"the record's shard count is {sharded.shard_count}; --shards {shard_count} "
            "disagrees (a different N needs a re-shard, not this move)"
        )
    moves: dict[tuple[Phase, Phase], PlannedMove] = {
        (Phase.MIGRATING, Phase.SHARDED): PlannedMove(
            state, target, sharded, None, BackfillDirection.FORWARD
        ),
        (Phase.MIGRATING, Phase.ROLLING_BACK): PlannedMove(state, target, sharded, LEGACY, None),
        (Phase.SHARDED, Phase.ROLLING_BACK): PlannedMove(state, target, sharded, LEGACY, None),
        (Phase.ROLLING_BACK, Phase.LEGACY): PlannedMove(
            state, target, LEGACY, None, BackfillDirection.ROLLBACK
        ),
        (Phase.ROLLING_BACK, Phase.MIGRATING): PlannedMove(state, target, LEGACY, sharded, None),
    }
    return moves[(current, target)]


def reshard_targets(shard_count: int) -> dict[int, str]:
    """The shard counts one re-shard can move sharded(N) to: {N/2: "merge", 2N: "split"},
    each a power of two within 1..1024."""
    targets = {shard_count // 2: "merge", shard_count * 2: "split"}
    return {
        m: kind for m, kind in targets.items() if 1 <= m <= MAX_SHARD_COUNT and m != shard_count
    }


def describe_reshard_targets(targets: dict[int, str]) -> str:
    """ "8 (merge) or 32 (split)": the values a refused --shards names."""
    return " or ".join(f"{m} ({kind})" for m, kind in sorted(targets.items()))


def _plan_reshard(
    state: ControlState,
    target: Phase,
    shard_count: int | None,
    refuse: Callable[[str], TransitionNotAllowedError],
) -> PlannedMove:
    """sharded(N) -> resharding(N -> M), its abort (swap) and its completion."""
    source, moving_to = state.layout, state.moving_to
    if source.shard_count is None:  # excluded by phase_of; keeps mypy sure
        raise refuse(f"the record names no sharded layout ({source} -> {moving_to})")
    if state.phase is Phase.SHARDED:
        targets = reshard_targets(source.shard_count)
        allowed = f"allowed: {describe_reshard_targets(targets)}"
        if shard_count is None:
            raise refuse(f"a re-shard needs --shards M, the shard count to move to ({allowed})")
        if shard_count not in targets:
            raise refuse(
                f"--shards {shard_count} is not one factor of two from the record's "
                f"{source.shard_count} ({allowed})"
            )
        return PlannedMove(state, target, source, Layout.sharded(shard_count), None)
    if moving_to is None or moving_to.shard_count is None:  # excluded by phase_of
        raise refuse(f"the record names no sharded target ({source} -> {moving_to})")
    if target is Phase.RESHARDING:
        allowed = f"allowed: {source.shard_count} (abort: back to {source})"
        if shard_count is None:
            raise refuse(
                f"the record is already resharding {source} -> {moving_to}; the abort needs "
                f"--shards {source.shard_count} ({allowed})"
            )
        if shard_count != source.shard_count:
            raise refuse(
                f"--shards {shard_count}: a move already runs {source} -> {moving_to}, only its "
                f"abort can start now ({allowed}); complete it first for another factor of two"
            )
        return PlannedMove(state, target, moving_to, source, None)
    if shard_count is not None and shard_count != moving_to.shard_count:
        raise refuse(
            f"the re-shard moves to shard count {moving_to.shard_count}; --shards "
            f"{shard_count} disagrees"
        )
    return PlannedMove(state, target, moving_to, None, BackfillDirection.FORWARD)


def backfill_verified(state: ControlState, direction: BackfillDirection) -> PreconditionResult:
    """The built-in precondition of a completing move: the last backfill ran in `direction`
    over exactly this state's move, under this version, started no earlier than effectiveAt
    (so no writer still stamped the source key) and finished complete and verified."""
    run = state.last_backfill
    name = BACKFILL_CHECK
    if run is None:
        return PreconditionResult(name, False, f"no {direction.value} backfill has been recorded")
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
        return PreconditionResult(name, False, "; ".join(problems))
    return PreconditionResult(
        name,
        True,
        f"{direction.value} backfill {run.source} -> {run.target} completed at "
        f"{format_time(run.completed_at)}: scanned {run.scanned}, restamped {run.restamped}, "
        f"anomalies {run.anomalies}, verified",
    )


def settled_at(state: ControlState, margin_seconds: float) -> datetime | None:
    """When a completing move from `state` may be judged: its effectiveAt plus the in-flight
    margin (None: the state has no effectiveAt, never migrated).

    Writers stamp the state's prior layout until effectiveAt by their own clock, and a request
    that chose its key just before may still be on its way, or a writer's clock may run behind:
    the margin bounds both together. Until it has passed, a write that readers of the completed
    state would not read can still land after checks that did not see it, so a completing move
    (forced or not) is refused before then, and its checks run only after it."""
    effective_at = state.effective_at
    if effective_at is None:
        return None
    return effective_at + timedelta(seconds=margin_seconds)
