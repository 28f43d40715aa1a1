"""Which run the lease may be taken for, by the kind of change it makes (record BackfillKind):
the layout's rule is grant.backfill_layouts; the open index's is here.

An open-index run changes OpenSagaPK only, never GSI4PK: its "layouts" are the record's current
layout as both source and target (the layout it leaves as it is). Its direction follows the
open index's state, as the layout's follows the phase:

  forward   adding or open: stamp OpenSagaPK on every open saga that lacks its key, remove it
            from a closed one (writers stamp in these states, so the run never fights them)
  rollback  removing: remove OpenSagaPK from every row (writers stopped stamping)
"""

from __future__ import annotations

from datetime import datetime

from saga_index.index import Layout, RetryLaterError
from saga_index.layout_change.lease.errors import LeaseDirectionError
from saga_index.layout_change.record import (
    BackfillDirection,
    ControlState,
    ControlTiming,
    OpenIndexState,
    format_time,
)
from saga_index.layout_change.transitions import settled_at

_WANTED = {
    BackfillDirection.FORWARD: (OpenIndexState.ADDING, OpenIndexState.OPEN),
    BackfillDirection.ROLLBACK: (OpenIndexState.REMOVING,),
}


def open_index_direction(state: ControlState) -> BackfillDirection:
    """The direction an open-index run takes in `state`; LeaseDirectionError while `off`."""
    if state.open_index.state is OpenIndexState.REMOVING:
        return BackfillDirection.ROLLBACK
    if state.open_index.state in _WANTED[BackfillDirection.FORWARD]:
        return BackfillDirection.FORWARD
    raise LeaseDirectionError(
        "the open index is off: nothing to stamp or remove (`saga-index open-index set "
        f"adding` first; version {state.version})"
    )


def open_index_layouts(state: ControlState, direction: BackfillDirection) -> tuple[Layout, Layout]:
    """(source, target) of an open-index run in `direction` under `state` (both the current
    layout), or LeaseDirectionError when the open index's writers would undo the run."""
    wanted = _WANTED[direction]
    if state.open_index.state not in wanted:
        names = " or ".join(s.value for s in wanted)
        raise LeaseDirectionError(
            f"a {direction.value} open-index backfill needs the open index {names}, but it is "
            f"{state.open_index} (version {state.version}): its writers would undo the run"
        )
    return state.layout, state.layout


def require_open_index_settled(state: ControlState, now: datetime, timing: ControlTiming) -> None:
    """An open-index run starts once the open index's switch settled (effectiveAt plus the
    in-flight margin): before it a writer may still write as the state before did, and a row
    it stamped or cleared after the run passed it would stay wrong. RetryLaterError before."""
    settled = settled_at(state, timing.in_flight_margin_seconds)
    if settled is not None and now < settled:
        raise RetryLaterError(
            f"until {format_time(settled)} (effectiveAt plus the in-flight margin) a writer "
            f"may still write as the state before open index {state.open_index} did: the "
            f"backfill starts after it; nothing written",
            retry_at=settled,
        )
