"""What a benchmark's tiny run must show whatever the machine's speed, by benchmark name
(tests/component/test_benches.py holds each tiny run to its entry here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench import backfill_rate, fence


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
        # Today's fence: every item doubled, and the STATE item checked by every re-stamp.
        wcu = shared["wcu_per_restamp"]
        assert wcu["rows"] == pytest.approx(2.0)
        assert wcu["index"] == pytest.approx(4.0)
        assert wcu["control"] >= 2.0


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


FIGURES: dict[str, Callable[[dict[str, Any]], None]] = {
    "backfill_rate": backfill_rate_figures,
    "fence": fence_figures,
}
