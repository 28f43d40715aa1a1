"""What a benchmark's tiny run must show whatever the machine's speed, by benchmark name
(tests/component/test_benches.py holds each tiny run to its entry here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench import backfill_rate, fence, fence_engine, pacing_engine


def fence_figures(result: dict[str, Any]) -> None:
    """bench.fence: what each re-stamp consumes per kind of partition, and that nothing refuses
    a heartbeat or an operator write when no re-stamp is a transaction."""
    runs = {(r["fence"], r["segments"]): r for r in result["runs"]}
    assert set(runs) == {(f, s) for f in fence.FENCES for s in fence.TINY["segments"]}
    for segments in fence.TINY["segments"]:
        unfenced, shared = runs[("unfenced", segments)], runs[("shared-state", segments)]
        assert unfenced["vs_unfenced"] == pytest.approx(1.0)
        assert unfenced["restamped"] == unfenced["rows"]
        # A plain UpdateItem: 1 WCU on its row, a delete and a put on the index, no control.
        assert unfenced["wcu_per_restamp"] == {"index": 2.0, "rows": 1.0}
        assert unfenced["heartbeat_success"] == 1.0
        assert unfenced["operator_success"] == 1.0
        assert unfenced["cancelled_transactions"] == 0
        # The shared-state fence: its items doubled (the row, and the STATE item every
        # re-stamp checks), the index's delete and put once each, as the plain UpdateItem's.
        wcu = shared["wcu_per_restamp"]
        assert wcu["rows"] == pytest.approx(2.0)
        assert wcu["index"] == pytest.approx(2.0)
        assert wcu["control"] >= 2.0


def engine_fence_figures(result: dict[str, Any]) -> None:
    """bench.fence_engine (bench.fence's engine runs), their time dilated: the result says the
    scale and the verdict's target, each run has its rates per engine second beside the real
    one, and every row moved with the lease held."""
    tiny = fence.ENGINE_TINY
    # bench.fence_engine judged it (at this scale the verdict means nothing: it is not asserted).
    assert result["steady_target"] == fence_engine.STEADY_TARGET
    assert isinstance(result["ok"], bool)
    assert result["time_scale"] == tiny["time_scale"]
    assert result["time"] == ("engine time at 0.1x real time: 1 engine second = 10 real seconds")
    assert [(r["fence"], r["segments"]) for r in result["runs"]] == [
        (name, segments) for segments in tiny["segments"] for name in fence.ENGINE_FENCES
    ]
    for run in result["runs"]:
        assert run["restamped"] == run["rows"]
        assert run["lease_lost"] is None
        # Engine seconds are the real ones times the scale, and the rates follow.
        assert run["seconds"] == pytest.approx(run["real_seconds"] * tiny["time_scale"], abs=1e-3)
        assert run["achieved_per_second"] == pytest.approx(
            run["achieved_per_real_second"] / tiny["time_scale"]
        )
        for column in ("arming_seconds", "steady_per_second", "steady_over_cap"):
            assert column in run
        # Every row was handled, so its first and last tenths were timed, in that order.
        assert run["head_seconds"] >= 0
        assert run["tail_seconds"] >= 0
        # The run paced on the engine's clock: its cap holds per engine second (on real
        # seconds it would run as fast as this machine serves it, several times the cap).
        assert run["achieved_over_cap"] <= 1.25


def backfill_rate_figures(result: dict[str, Any]) -> None:
    """bench.backfill_rate: the layout's backfill and the open index's measured side by side,
    each run writing every row once, each verdict its kind's tolerance (the open index's 5 %)
    applied to the median of its runs' ratios."""
    configs = result["configs"]
    assert [c["kind"] for c in configs] == ["layout", "open-index"]
    assert result["tolerances"] == {"layout": 0.10, "open-index": 0.05}
    for config in configs:
        assert config["tolerance"] == result["tolerances"][config["kind"]]
        assert [r["writes"] for r in config["runs"]] == [config["rows"]] * len(config["runs"])
        assert {r["kind"] for r in config["runs"]} == {config["kind"]}
        assert config["withinTolerance"] == (abs(config["medianRatio"] - 1) <= config["tolerance"])
    assert result["ok"] == all(c["withinTolerance"] for c in configs)
    assert set(backfill_rate.TOLERANCES) == set(backfill_rate.KINDS)


def pacing_engine_figures(result: dict[str, Any]) -> None:
    """bench.pacing_engine: the paced run and the fixed-cap one beside the same traffic on the
    engine, each judged by its own figures: the traffic sent its schedule and met nothing but
    throttles, the paced run slowed under the key's ceiling and the fixed-cap run never did."""
    tiny = pacing_engine.TINY
    assert result["time_scale"] == tiny["time_scale"]
    assert result["loads"] == list(pacing_engine.LOADS)
    paced, fixed = result["runs"]
    assert (paced["paced"], fixed["paced"]) == (True, False)
    nominal = sum(load * tiny["ceiling"] * tiny["phase_seconds"] for load in result["loads"])
    for run in (paced, fixed):
        assert run["traffic_errors"] == {}
        assert run["traffic_requests"] >= 0.9 * nominal
        assert len(run["phases"]) == len(result["loads"])
        assert set(run["verdicts"]) == {"budget_used", "traffic_throttled", "settle_seconds"}
        # Every re-stamp counted in a second was one the backfill reported.
        assert 0 < sum(run["per_second"]) <= run["restamped"]
    # The traffic plus the cap overrun the key's ceiling from the first second: the pacer
    # slowed the paced run below its cap; the fixed cap's floor held it there.
    assert paced["decreases"] >= 1
    assert paced["lowest_rate"] < result["cap"]
    assert (fixed["decreases"], fixed["lowest_rate"]) == (0, result["cap"])
    assert fixed["backfill_throttled"] > 0
    assert result["ok"] == (
        paced["ran_to_the_end"] and all(v is not False for v in paced["verdicts"].values())
    )


FIGURES: dict[str, Callable[[dict[str, Any]], None]] = {
    "backfill_rate": backfill_rate_figures,
    "fence": fence_figures,
    "fence_engine": engine_fence_figures,
    "pacing_engine": pacing_engine_figures,
}
