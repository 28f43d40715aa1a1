"""The open-saga index's moves (pure; open_index_move.py applies them), the record's second
dimension beside the layout (record/open_index.py):

  off       -> adding     --shards N (default: the layout's N, else 16)   never blocked
  adding    -> open       completes the addition: reads switch to it     checks required
  adding    -> removing   the rollback: writers stop stamping            never blocked
  removing  -> off        completes the rollback                         checks required
  removing  -> adding     aborts the rollback                            never blocked
  open      -> (nothing)  the end: a rollback after it is refused

Each move is a transition like a layout move (version + 1, HISTORY intent first, CAS,
effectiveAt, the writers' switch at effectiveAt) that keeps the layout as it is. Until
effectiveAt writers stamp as the state before did. `open` stops nothing but GSI4 enumerations
(GSI4 keeps every row), so a reader that falls back to GSI4 never misses a saga; what must hold
before readers switch is that every open saga is in the open index and no closed one is, judged
only once no write chosen under the state before can still land (effectiveAt plus the margin).

While the layout moves (migrating, rolling back, resharding) the open index does not: a move of
one would postpone the other's settled switch, so the open index waits for the layout move to
complete or abort.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from saga_index.index import DEFAULT_SHARD_COUNT, Layout, validate_shard_count
from saga_index.layout_change.record import (
    ControlRecordMissingError,
    ControlState,
    OpenIndex,
    OpenIndexState,
    RecordCondition,
)
from saga_index.layout_change.transitions.errors import TransitionNotAllowedError

OFF, ADDING, OPEN, REMOVING = (
    OpenIndexState.OFF,
    OpenIndexState.ADDING,
    OpenIndexState.OPEN,
    OpenIndexState.REMOVING,
)
ALLOWED_OPEN_INDEX_MOVES: dict[OpenIndexState, tuple[OpenIndexState, ...]] = {
    OFF: (ADDING,),
    ADDING: (OPEN, REMOVING),
    REMOVING: (OFF, ADDING),
    OPEN: (),
}
# The moves whose checks are required: they complete the addition or the rollback.
COMPLETING: frozenset[tuple[OpenIndexState, OpenIndexState]] = frozenset(
    {(ADDING, OPEN), (REMOVING, OFF)}
)


class OpenIndexMoveNotAllowedError(TransitionNotAllowedError):
    """The requested open index state is not reachable from the record's (CLI exit 2)."""


@dataclass(frozen=True)
class PlannedOpenIndexMove:
    """An open index move that is allowed from the state it was planned on."""

    from_state: ControlState
    to: OpenIndex

    @property
    def completes(self) -> bool:
        return (self.from_state.open_index.state, self.to.state) in COMPLETING

    # What the transition keeps of the layout (rules.transition_for builds it): the layout as
    # it is, and writers keep stamping the layout key they stamp at the move's time.
    @property
    def layout(self) -> Layout:
        return self.from_state.layout

    @property
    def moving_to(self) -> Layout | None:
        return self.from_state.moving_to

    @property
    def open_index(self) -> OpenIndex:
        return self.to

    def prior_write(self, changed_at: datetime) -> Layout:
        return self.from_state.writes_at(changed_at)


def allowed_open_index_moves(state: OpenIndexState) -> tuple[str, ...]:
    return tuple(s.value for s in ALLOWED_OPEN_INDEX_MOVES[state])


def plan_open_index_move(
    state: ControlState, requested: OpenIndexState | str, *, shard_count: int | None = None
) -> PlannedOpenIndexMove:
    """The open index state a move leads to, or OpenIndexMoveNotAllowedError naming the
    allowed moves. `shard_count` is the open index's N: required-with-default for off ->
    adding (the layout's N, else 16), elsewhere it must agree with the record's."""
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    target = OpenIndexState.parse(requested)
    current = state.open_index
    allowed = allowed_open_index_moves(current.state)

    def refuse(detail: str) -> OpenIndexMoveNotAllowedError:
        return OpenIndexMoveNotAllowedError(
            f"open index {current.state.value}", target.value, allowed, detail
        )

    if shard_count is not None:
        validate_shard_count(shard_count)
        if current.state is not OFF and shard_count != current.shard_count:
            raise refuse(another_shard_count(current, shard_count))
    if current.state is OPEN:
        raise refuse(
            "`open` is the end of the open index's move: enumerations read it, and it has no "
            "rollback (nothing was written)"
            if target is not OPEN
            else f"the open index is already open (version {state.version})"
        )
    if target is current.state:
        raise refuse(f"the open index is already {target.value!r} (version {state.version})")
    if target not in ALLOWED_OPEN_INDEX_MOVES[current.state]:
        raise refuse("not an allowed move")
    if state.moving_to is not None:
        raise refuse(
            f"the layout is moving ({state.phase.value}: {state.layout} -> {state.moving_to}); "
            "complete or abort that move first (`phase set`), then move the open index"
        )
    if current.state is OFF:
        default = state.layout.shard_count or DEFAULT_SHARD_COUNT
        n = validate_shard_count(default if shard_count is None else shard_count)
        return PlannedOpenIndexMove(state, OpenIndex(target, n))
    if target is OFF:
        return PlannedOpenIndexMove(state, OpenIndex.off())
    return PlannedOpenIndexMove(state, OpenIndex(target, current.shard_count))


def another_shard_count(current: OpenIndex, requested: int) -> str:
    """Why `--shards` cannot change the open index's N here, and the way to another N: its N is
    in every stamp the writers and the backfill made, so it changes only by removing the index's
    stamps (back to `off`) and adding it again; once `open`, never (`open` is the end)."""
    said = (
        f"the open index's shard count is {current.shard_count} and --shards {requested} "
        "disagrees; nothing was written"
    )
    if current.state is OPEN:
        return f"{said}. Its N is fixed once it is open: `open` is the end, it has no rollback"
    steps = ["`saga-index open-index set removing --reason ...`"] if current.state is ADDING else []
    steps += [
        "`saga-index open-index backfill` (in removing it removes every stamp)",
        "`saga-index open-index set off --reason ...`",
        f"`saga-index open-index set adding --shards {requested} --reason ...`",
    ]
    return (
        f"{said}. The open index's N changes only by taking it back to off and adding it again "
        f"(before `open`): {', then '.join(steps)}"
    )
