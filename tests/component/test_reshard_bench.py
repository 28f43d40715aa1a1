"""bench.reshard end to end at a tiny size on dynalite: the 16 -> 32 move re-stamps exactly the
rows the split property predicts (about half), verified, nothing misrouted; the hottest key's
share and headroom are measured for both layouts from the same plan."""

from __future__ import annotations

import json

import pytest

from bench import reshard
from devkit.seed import SeedSpec
from devkit.traffic.mix import TrafficMix

pytestmark = pytest.mark.conformance

TINY = SeedSpec(open_sagas=40, terminal_sagas=120, persons=200, property_managers=2)
QUIET = TrafficMix(transitions_per_s=0.5, cohort_size=4, inbound_messages_per_s=0.5)


def test_run_moves_about_half_the_rows_and_relieves_the_hottest_key(
    dynalite_endpoint: str,
) -> None:
    result = reshard.run(
        scales=(1,),
        source=16,
        segments=2,
        duration=10,
        model_scale=2,
        base_spec=TINY,
        base_mix=QUIET,
        endpoint_url=dynalite_endpoint,
    )

    move = result["moves"]["1x"]
    assert move["verified"] is True
    assert move["moved"] == move["expectedMoves"]
    assert 0.3 <= move["movedShare"] <= 0.7
    assert move["misroutedRowsAfter"] == 0
    assert move["capWritesPerSecond"] == reshard.MAX_WRITES_PER_SECOND
    assert result["targetShards"] == 32
    for row in result["hotKey"].values():
        assert set(row) == {"16", "32", "ratios"}
        assert row["32"]["hottestKeyShare"] < row["16"]["hottestKeyShare"]
    json.dumps(result)  # JSON-ready as the runner saves it
