"""The layout lab's targets for the sparse open-saga index: the pure calculations, exactly."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from bench.layouts import _index_writes
from bench.layouts_keys import LAYOUTS_BY_NAME
from bench.layouts_model import (
    Aggregates,
    KeySpace,
    PlanArrays,
    enumeration_figures,
    open_rows_rcu,
    transition_cost,
)
from bench.layouts_targets import (
    binding_side,
    cohort_peak_wcu,
    recommended_shard_count,
    shard_ladder,
    verdicts,
)
from devkit.capacity.ledger import LoadLedger
from devkit.capacity.pricing import Charge
from saga_index.index import InvalidInputError, shard


def test_open_rows_cost_is_their_bytes_in_eventually_consistent_4kb_units() -> None:
    assert open_rows_rcu(0) == 0.0
    assert open_rows_rcu(1) == 0.5
    assert open_rows_rcu(4096) == 0.5
    assert open_rows_rcu(4097) == 1.0
    assert open_rows_rcu(3 * 8192) == 3.0
    # 100x persons, 100x history: the open rows' 27,532,743 bytes.
    assert open_rows_rcu(27_532_743) == 3361.0


def test_enumeration_over_open_rows() -> None:
    assert enumeration_figures(339_222.0, 27_532_743) == {
        "enumerationRcu": 339_222.0,
        "openRowsRcu": 3361.0,
        "enumerationOverOpenRows": round(339_222 / 3361, 4),
    }
    assert enumeration_figures(3.0, 0)["enumerationOverOpenRows"] is None


@pytest.mark.parametrize(
    ("layout", "to_state", "writes"),
    [
        ("adr-n16", "SIGNED", 1),  # the GSI4 entry updated in place
        ("adr-n16", "NEGOTIATING", 1),
        ("sparse-open-index", "SIGNED", 2),  # plus the open index entry's delete
        ("sparse-open-index", "NEGOTIATING", 2),  # plus the open index entry's update
        ("state-split", "SIGNED", 2),  # the GSI4 entry moves: delete and put
        ("state-split", "NEGOTIATING", 1),
    ],
)
def test_index_writes_of_a_transition(layout: str, to_state: str, writes: int) -> None:
    space = KeySpace(16, ("p",))
    cost, _ = transition_cost(LAYOUTS_BY_NAME[layout], space, 3, 0, 1500, "OFFER_SENT", to_state)
    assert cost.index_writes == writes


def test_the_metered_index_writes_count_every_index_charge() -> None:
    ledger = LoadLedger()
    ledger.add(0, [Charge("table", "saga#1", wcu=2), Charge("GSI4", "RenewalSaga#3", wcu=2)])
    ledger.add(1, [Charge("open", "RenewalSagaOpen#3", wcu=2), Charge("GSI4", "k", wcu=1)])
    assert _index_writes(ledger, ["GSI4", "open"]) == 3
    assert _index_writes(ledger, ["GSI4"]) == 2
    assert _index_writes(ledger, ["missing"]) == 0


def test_shard_ladder_refuses_what_is_not_a_ladder_of_valid_n() -> None:
    assert shard_ladder([16, 32, 64]) == (16, 32, 64)
    with pytest.raises(InvalidInputError, match="at least one"):
        shard_ladder([])
    with pytest.raises(InvalidInputError, match="power of two"):
        shard_ladder([16, 48])
    with pytest.raises(InvalidInputError, match="must increase"):
        shard_ladder([32, 16])


def _rung(n: int, headroom: float) -> dict[str, Any]:
    return {"shardCount": n, "headroomStaggered": headroom}


def test_the_recommended_n_is_the_smallest_that_reaches_the_target() -> None:
    rungs = [_rung(64, 5.4), _rung(16, 1.68), _rung(32, 3.2)]
    assert recommended_shard_count(rungs) == 32
    assert recommended_shard_count([_rung(16, 2.0)]) == 16
    assert recommended_shard_count([_rung(16, 1.68), _rung(32, 1.99)]) is None
    assert recommended_shard_count([_rung(16, 1.68), _rung(32, 3.2)], minimum=4.0) is None


def test_binding_side_is_the_smaller_headroom() -> None:
    assert binding_side(1.85, 1.68) == "writes"
    assert binding_side(1.5, 1.68) == "reads"
    assert binding_side(2.0, 2.0) == "reads"
    assert binding_side(None, 3.0) == "writes"
    assert binding_side(3.0, None) == "reads"


def test_cohort_peak_is_the_opens_on_one_key_in_one_second() -> None:
    persons = tuple(f"person_{i}" for i in range(40))
    shards = np.asarray([shard(p, 16) for p in persons], dtype=np.int64)
    zeros = np.zeros(len(persons), dtype=np.int64)
    agg = Aggregates(persons, shards, zeros, zeros, zeros, zeros, 0, 0, {})
    first = persons[0]
    same = next(p for p in persons[1:] if shard(p, 16) == shard(first, 16))
    other = next(p for p in persons if shard(p, 16) != shard(first, 16))
    # 1,500-byte rows: 2 WCU per entry, on GSI4's shard key and on the open index's.
    creates = ((7, first, 1500), (7, same, 1500), (7, other, 1500), (8, first, 1500))
    empty = np.zeros(0, dtype=np.int64)
    plan = PlanArrays(10, empty, empty, (), (), creates)
    assert cohort_peak_wcu(KeySpace(16, persons), agg, plan) == 4.0


def _side(headroom: float = 3.2) -> dict[str, Any]:
    sparse = {
        "enumerationRcu": 3367.0,
        "openRowsRcu": 3361.0,
        "enumerationOverOpenRows": 1.0018,
        "terminalIndexWrites": 2.0,
        "terminalTransitionWcu": 6.0,
        "requestsPerByPerson": 1,
        "byPersonRcu": 3.06,
    }
    adr = {
        **sparse,
        "enumerationRcu": 339_222.0,
        "enumerationOverOpenRows": 100.9288,
        "terminalIndexWrites": 1.0,
        "terminalTransitionWcu": 4.0,
    }
    rung = {
        "shardCount": 32,
        "headroomStaggered": headroom,
        "binds": "writes",
        "peakWcuPerKeyStaggered": 311.0,
        "cohortPeakWcuPerKey": 298.0,
    }
    return {
        "scale": 100,
        "historyFactor": 100,
        "adr": adr,
        "adrStaggered": {"headroom": 0.1308},
        "sparse": sparse,
        "sparseAtFirstRung": sparse,
        "ladder": [{**rung, "shardCount": 16, "headroomStaggered": 1.68}, rung],
        "recommendedShardCount": 32 if headroom >= 2 else None,
    }


def test_verdicts_hold_for_the_sparse_index() -> None:
    result = verdicts(_side(), None)
    assert result["ok"]
    values = {v["figure"]: v["value"] for v in result["verdicts"]}
    assert values == {
        "all-open enumeration / what its open rows cost": 1.0018,
        "sweeps' headroom, sweeps staggered": 3.2,
        "closing a saga: index writes more than adr-n16's": 1.0,
        "by-person read: queries": 1,
    }


def test_each_verdict_fails_when_its_figure_misses_the_target() -> None:
    # The ADR layout's own figures in place of the sparse index's: the enumeration fails.
    side = _side()
    side["sparseAtFirstRung"] = side["adr"]
    assert _failed(verdicts(side, None)) == ["all-open enumeration / what its open rows cost"]
    # No N of the ladder reaches 2x.
    assert _failed(verdicts(_side(headroom=1.9), None)) == ["sweeps' headroom, sweeps staggered"]
    # A close that writes two extra index entries; a by-person read of two queries.
    side = _side()
    side["sparse"] = {**side["sparse"], "terminalIndexWrites": 3.0, "requestsPerByPerson": 2}
    assert _failed(verdicts(side, None)) == [
        "closing a saga: index writes more than adr-n16's",
        "by-person read: queries",
    ]


def test_the_metered_run_is_judged_too() -> None:
    side = _side()
    check = {
        "historyFactor": 10,
        "layouts": {
            "sparse-open-index": {"metered": side["sparse"]},
            "adr-n16": {"metered": side["adr"]},
        },
    }
    assert len(verdicts(side, check)["verdicts"]) == 4 + 3
    bad = copy.deepcopy(check)
    bad["layouts"]["sparse-open-index"]["metered"]["terminalIndexWrites"] = 3.0
    result = verdicts(side, bad)
    assert not result["ok"]
    assert [v["source"] for v in result["verdicts"] if not v["passed"]] == [
        "metered, 1x persons, 10x history"
    ]


def _failed(result: dict[str, Any]) -> list[str]:
    assert not result["ok"]
    return [v["figure"] for v in result["verdicts"] if not v["passed"]]
