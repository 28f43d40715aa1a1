"""The moves between states: `rules` (pure: the allowed edges and the backfill each completing
move requires), `requirements` (the checks of a completing move and the first move's guard, read
from the table), `executor` (`change_phase`: it chooses the move's checks and guards itself,
then writes it through `write_move`, the one way any move of the record is written), `apply`
(that write: intent, compare-and-set, history), `open_index_rules` and `open_index_move` (the
open index's moves, written the same way), `settle` (a version's history item settled from
STATE) and `restore`."""

from saga_index.layout_change.transitions.errors import PreconditionFailedError, PreconditionResult
from saga_index.layout_change.transitions.executor import PhaseChange, change_phase
from saga_index.layout_change.transitions.open_index_move import ReadinessCheck, change_open_index
from saga_index.layout_change.transitions.open_index_rules import (
    allowed_open_index_moves,
    plan_open_index_move,
)
from saga_index.layout_change.transitions.requirements import (
    CompletionCheckOptions,
    failing_completion_checks,
)
from saga_index.layout_change.transitions.restore import Restored, restore_state
from saga_index.layout_change.transitions.rules import (
    allowed_moves,
    backfill_verified,
    plan_move,
    settled_at,
    transition_for,
)
from saga_index.layout_change.transitions.settle import repair_history

__all__ = [
    "CompletionCheckOptions",
    "PhaseChange",
    "PreconditionFailedError",
    "PreconditionResult",
    "ReadinessCheck",
    "Restored",
    "allowed_moves",
    "allowed_open_index_moves",
    "backfill_verified",
    "change_open_index",
    "change_phase",
    "failing_completion_checks",
    "plan_move",
    "plan_open_index_move",
    "repair_history",
    "restore_state",
    "settled_at",
    "transition_for",
]
