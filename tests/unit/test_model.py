"""The migration phase: the operator's words (saga_index.index.names) and their behaviour agree."""

from __future__ import annotations

from saga_index.index import names
from saga_index.index.model import Phase


def test_given_the_phase_names_then_the_phase_behaviour_has_exactly_those_values() -> None:
    assert tuple(phase.value for phase in Phase) == names.PHASE_NAMES
