"""The moves between states: `rules` (pure: the allowed edges and the backfill each completing
move requires), `requirements` (the checks of a completing move and the first move's guard, read
from the table), `executor` (`change_phase`, the one way a move is written: it chooses the
move's checks and guards itself, then compare-and-set, history),
`settle` (a version's history item settled from STATE) and `restore`."""

from saga_index.layout_change.transitions.errors import (
    CheckResult,
    MoveOutcomeUnknownError,
    NotAppliedRetryLaterError,
    PreconditionFailedError,
    StateWriteFailedError,
    TransitionNotAllowedError,
)
from saga_index.layout_change.transitions.executor import PhaseChange, change_phase
from saga_index.layout_change.transitions.open_index_move import (
    CHECK_NO_OPEN_INDEX_KEYS,
    CHECK_OPEN_INDEX_PARITY,
    OpenIndexBuildingError,
    OpenIndexNotReadyError,
    Readiness,
    ReadinessCheck,
    change_open_index,
)
from saga_index.layout_change.transitions.open_index_rules import (
    OpenIndexMoveNotAllowedError,
    PlannedOpenIndexMove,
    allowed_open_index_moves,
    open_index_transition_for,
    plan_open_index_move,
)
from saga_index.layout_change.transitions.requirements import (
    CheckOptions,
    ShardKeyProbe,
    failing_checks,
)
from saga_index.layout_change.transitions.restore import Restored, restore_state
from saga_index.layout_change.transitions.rules import (
    Precondition,
    allowed_moves,
    check_backfill,
    plan_move,
    prior_write_for,
    transition_for,
)
from saga_index.layout_change.transitions.settle import repair_history

__all__ = [
    "CHECK_NO_OPEN_INDEX_KEYS",
    "CHECK_OPEN_INDEX_PARITY",
    "CheckOptions",
    "CheckResult",
    "MoveOutcomeUnknownError",
    "NotAppliedRetryLaterError",
    "OpenIndexBuildingError",
    "OpenIndexMoveNotAllowedError",
    "OpenIndexNotReadyError",
    "PhaseChange",
    "PlannedOpenIndexMove",
    "Precondition",
    "PreconditionFailedError",
    "Readiness",
    "ReadinessCheck",
    "Restored",
    "ShardKeyProbe",
    "StateWriteFailedError",
    "TransitionNotAllowedError",
    "allowed_moves",
    "allowed_open_index_moves",
    "change_open_index",
    "change_phase",
    "check_backfill",
    "failing_checks",
    "open_index_transition_for",
    "plan_move",
    "plan_open_index_move",
    "prior_write_for",
    "repair_history",
    "restore_state",
    "transition_for",
]
