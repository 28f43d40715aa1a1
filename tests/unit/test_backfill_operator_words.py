"""The words a backfill's operator reads: an interrupted run says "interrupted" once, a wrong
--direction names the flag to give, and the run logs the command that paused or resumed it."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from saga_index.index.layout import Layout
from saga_index.layout_change.backfill.keeper import LeaseKeeper
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.lease import LeaseDirectionError
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import BackfillDirection, ControlState
from saga_index_cli.backfill.advice import local_failure_advice, move_for
from tests.support.control_seed import transition


def test_an_interrupted_runs_advice_does_not_repeat_the_word() -> None:
    line = "backfill did not finish cleanly" + "; interrupted" + "; "
    line += local_failure_advice({}, interrupted=True)
    assert line.count("interrupted") == 1
    assert "stopped by Ctrl-C or SIGTERM" in line


def _state(phase: Phase, layout: Layout, moving_to: Layout | None) -> ControlState:
    state = ControlState(transition=transition(layout, moving_to, version=3))
    assert state.phase is phase
    return state


@pytest.mark.parametrize(
    ("phase", "layout", "moving_to", "direction", "hint"),
    [
        (
            Phase.ROLLING_BACK,
            Layout.sharded(16),
            Layout.legacy(),
            BackfillDirection.FORWARD,
            "add --direction rollback",
        ),
        (
            Phase.MIGRATING,
            Layout.legacy(),
            Layout.sharded(16),
            BackfillDirection.ROLLBACK,
            "drop --direction rollback",
        ),
    ],
)
def test_a_direction_the_record_disagrees_with_names_the_flag_to_give(
    phase: Phase,
    layout: Layout,
    moving_to: Layout | None,
    direction: BackfillDirection,
    hint: str,
) -> None:
    state = _state(phase, layout, moving_to)
    with pytest.raises(LeaseDirectionError) as refused:
        move_for(state, direction)
    assert hint in str(refused.value)


class _Store:
    """LeaseKeeper.apply reads nothing from the store."""


def test_the_run_logs_the_command_that_paused_or_resumed_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    keeper = LeaseKeeper(_Store(), "token", TokenBucket(10.0), own_rate=10.0)  # type: ignore[arg-type]

    def record(paused: bool) -> Any:
        return SimpleNamespace(backfill_max_writes_per_second=None, backfill_paused=paused)

    with caplog.at_level(logging.WARNING, logger="saga_index"):
        keeper.apply(record(False))
        keeper.apply(record(True))
        keeper.apply(record(False))
    paused, resumed = (
        r.getMessage() for r in caplog.records if "by the control record" in r.getMessage()
    )
    assert "paused by the control record (saga-index backfill pause)" in paused
    assert "until `saga-index backfill resume`" in paused
    assert resumed == "backfill resumed by the control record (saga-index backfill resume)"
