"""The moves between states: `rules` (pure: the allowed edges and the backfill each completing
move requires), `requirements` (the checks of a completing move and the first move's guard, read
from the table), `executor` (`phase set` against the store: checks, compare-and-set, history),
`settle` (a version's history item settled from STATE) and `restore`."""

from saga_index.layout_change.transitions.executor import PhaseChange, set_phase
from saga_index.layout_change.transitions.requirements import (
    CheckOptions,
    completion_checks,
    failing_checks,
    first_move_guard,
)
from saga_index.layout_change.transitions.restore import Restored, restore_state
from saga_index.layout_change.transitions.rules import (
    Precondition,
    allowed_moves,
    check_backfill,
    plan_move,
    prior_write_for,
    seconds_until,
    transition_for,
)
from saga_index.layout_change.transitions.settle import repair_history

__all__ = [
    "CheckOptions",
    "PhaseChange",
    "Precondition",
    "Restored",
    "allowed_moves",
    "check_backfill",
    "completion_checks",
    "failing_checks",
    "first_move_guard",
    "plan_move",
    "prior_write_for",
    "repair_history",
    "restore_state",
    "seconds_until",
    "set_phase",
    "transition_for",
]
