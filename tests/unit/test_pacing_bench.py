"""bench.pacing's verdicts (bench.pace_figures, which bench.pacing_engine shares): each figure
against its target, on made-up runs (no simulation)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench import pace_figures, pacing


def a_run(budget_used: float, throttled: float, settle: int) -> dict[str, Any]:
    return {"budget_used": budget_used, "traffic_throttled": throttled, "settle_seconds": settle}


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        (a_run(0.80, 0.00099, 60), (True, True, True)),
        (a_run(0.799, 0.00099, 60), (False, True, True)),
        (a_run(0.9, 0.001, 60), (True, False, True)),
        (a_run(0.9, 0.0, 61), (True, True, False)),
    ],
)
def test_each_figure_meets_its_target_or_not(
    run: dict[str, Any], expected: tuple[bool, bool, bool]
) -> None:
    verdicts = pacing.verdicts(run, throttles_held=True)
    assert (
        verdicts["budget_used"],
        verdicts["traffic_throttled"],
        verdicts["settle_seconds"],
    ) == expected


def test_given_a_step_not_held_to_the_throttle_target_then_that_figure_has_no_verdict() -> None:
    verdicts = pacing.verdicts(a_run(0.9, 0.5, 10), throttles_held=False)
    assert verdicts == {"budget_used": True, "traffic_throttled": None, "settle_seconds": True}


def test_the_pace_is_settled_from_the_last_second_outside_the_band() -> None:
    budget = 400.0
    # 80-102 % of 400: 320-408 writes a second
    written = Counter({100: 500, 101: 200, 102: 330, 103: 409, 104: 400, 105: 320, 106: 408})
    assert pace_figures.settled_after(written, 100, 107, budget) == 4
    assert pace_figures.settled_after(written, 104, 107, budget) == 0
    # Nothing written: never settled.
    assert pace_figures.settled_after(Counter(), 0, 10, budget) == 10
