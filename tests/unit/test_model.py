"""The phase: one vocabulary, and the override phases are the ones that name one shard count."""

from __future__ import annotations

import pytest

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.record.phase import SINGLE_COUNT_PHASES, Phase, layouts_for_phase


def test_given_every_phase_then_only_resharding_names_no_single_shard_count() -> None:
    for phase in Phase:
        if phase.value in SINGLE_COUNT_PHASES:
            assert layouts_for_phase(phase, 16)[0] is not None
        else:
            with pytest.raises(InvalidInputError, match="names no single shard count"):
                layouts_for_phase(phase, 16)
    assert SINGLE_COUNT_PHASES == ("legacy", "migrating", "sharded", "rolling-back")


@pytest.mark.parametrize("text", ["Sharded", " rolling-back ", "RESHARDING"])
def test_given_any_case_or_padding_then_the_phase_parses(text: str) -> None:
    assert Phase.parse(text).value == text.strip().lower()


def test_given_an_unknown_phase_then_the_error_lists_every_phase() -> None:
    with pytest.raises(InvalidInputError, match="legacy, migrating, sharded, rolling-back"):
        Phase.parse("half-sharded")
