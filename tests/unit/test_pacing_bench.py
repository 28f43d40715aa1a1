"""bench.pacing's verdicts (bench.pace_figures, which bench.pacing_engine shares): each figure
against its target, on made-up runs (no simulation)."""

from __future__ import annotations

import importlib
from collections import Counter
from typing import Any

import pytest

from bench import BENCHMARKS, pace_figures, pacing


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
    verdicts = pacing.verdicts(run)
    assert (
        verdicts["budget_used"],
        verdicts["traffic_throttled"],
        verdicts["settle_seconds"],
    ) == expected


def test_the_pace_is_settled_from_the_last_second_outside_the_band() -> None:
    budget = 400.0
    # 80-102 % of 400: 320-408 writes a second
    written = Counter({100: 500, 101: 200, 102: 330, 103: 409, 104: 400, 105: 320, 106: 408})
    assert pace_figures.settled_after(written, 100, 107, budget) == 4
    assert pace_figures.settled_after(written, 104, 107, budget) == 0
    # Nothing written: never settled.
    assert pace_figures.settled_after(Counter(), 0, 10, budget) == 10


def test_a_step_still_outside_the_band_when_its_phase_ends_never_settled() -> None:
    # Phases of 20 s, the step at 10 s; budget 40 then 10 writes a second (ceiling 50).
    settling = Counter({s: 40 for s in range(20)} | {s: 10 for s in range(13, 20)})
    unsettled = Counter({s: 40 for s in range(20)} | {s: 10 for s in range(13, 19)})
    figures = {
        name: pace_figures.measure(
            written,
            Counter(),
            Counter(),
            bounds=[0, 10, 20],
            loads=[0.2, 0.8],
            budgets=[40.0, 10.0],
            backfill_throttled=0,
        )
        for name, written in (("settling", settling), ("unsettled", unsettled))
    }
    assert (figures["settling"]["settle_seconds"], figures["settling"]["settled"]) == (3, True)
    # Its last second wrote 40, four times the budget: 10 s, under the target, but no settling.
    assert (figures["unsettled"]["settle_seconds"], figures["unsettled"]["settled"]) == (10, False)
    assert pace_figures.verdicts(figures["settling"])["settle_seconds"]
    assert not pace_figures.verdicts(figures["unsettled"])["settle_seconds"]


def test_at_a_small_budget_one_write_over_it_is_within_the_band() -> None:
    # 2 % of 40 is under one write: 41 is as close to the budget as a whole count gets.
    assert pace_figures.settled_after(Counter({0: 41, 1: 32}), 0, 2, 40.0) == 0
    assert pace_figures.settled_after(Counter({0: 42, 1: 40}), 0, 2, 40.0) == 1


def test_the_engine_shape_runs_the_paced_side_once_per_offset() -> None:
    shaped = pacing.engine_shape(2, seconds=12.0, loads=(0.3, 0.6), tick=0.01)
    figures = shaped["figures"]
    assert all(len(values) == 2 for values in figures.values())
    # each offset is its own run: the traffic's arrivals move, and so do its throttled seconds
    assert shaped["traffic_throttled_per_second"][0] != shaped["traffic_throttled_per_second"][1]
    assert all(0 <= met <= 2 for met in shaped["met"].values())
    assert shaped["shape"]["loads"] == [0.3, 0.6]


def test_every_benchmark_answers_help_on_its_own() -> None:
    # `python -m bench.<name> --help`, as docs/demo.md says each one is
    for name in BENCHMARKS:
        module = importlib.import_module(name)
        with pytest.raises(SystemExit) as raised:
            module.main(["--help"])
        assert raised.value.code == 0, name


def test_the_engine_bench_counts_re_stamps_in_the_keys_own_seconds() -> None:
    from bench.pace_traffic import key_seconds

    writes = Counter(
        {
            ("TransactWriteItems", 1000): 5,
            ("UpdateItem", 1000): 9,  # the traffic's, not the backfill's
            ("TransactWriteItems", 1001): 4,
            ("TransactWriteItems", 1003): 2,
        }
    )
    # the run's second 0 began at engine time 999.7: each engine second lands on the nearest
    assert key_seconds(writes, 999.7) == Counter({0: 5, 1: 4, 3: 2})
    assert key_seconds(writes, 999.2) == Counter({1: 5, 2: 4, 4: 2})
