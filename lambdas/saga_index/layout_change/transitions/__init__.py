"""The moves between states: `rules` (pure: the allowed edges and what each requires) and
`executor` (`phase set` against the store: checks, compare-and-set, history)."""

from saga_index.layout_change.transitions.executor import PhaseChange, set_phase
from saga_index.layout_change.transitions.restore import Restored, restore_state
from saga_index.layout_change.transitions.rules import (
    Precondition,
    allowed_moves,
    check_backfill,
    plan_move,
    prior_write_for,
    seconds_until,
)

__all__ = [
    "PhaseChange",
    "Precondition",
    "Restored",
    "allowed_moves",
    "check_backfill",
    "plan_move",
    "prior_write_for",
    "restore_state",
    "seconds_until",
    "set_phase",
]
