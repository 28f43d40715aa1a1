"""The layout lab's pricing functions on a small synthetic dataset: properties, no server."""

from __future__ import annotations

from typing import Any

import pytest

from bench.layouts_keys import LAYOUTS, LAYOUTS_BY_NAME
from bench.layouts_model import (
    Config,
    aggregates_of,
    lab_mix,
    lab_spec,
    open_only_dataset,
    plan_arrays,
    price_layout,
    shards_of,
    synthetic_aggregates,
)
from devkit.seed import SeedSpec, build_dataset
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan

SMALL = SeedSpec(open_sagas=40, terminal_sagas=0, persons=200, property_managers=2)
MIX = TrafficMix(duration_s=60, transitions_per_s=1.0, cohort_size=5, inbound_messages_per_s=1.0)


def _priced(history: int, *, scale: int = 1, rows: bool = False) -> dict[str, dict[str, Any]]:
    """Every layout priced; `rows`: from a materialised dataset, else from aggregates over the
    same open sagas whatever the history (so only the history differs)."""
    if rows:
        dataset = build_dataset(lab_spec(SMALL, scale=1, history_factor=history))
        agg = aggregates_of(dataset)
    else:
        dataset = open_only_dataset(SMALL, scale)
        agg = synthetic_aggregates(
            dataset,
            history_factor=history,
            other_bytes_per_scale=(0, 0),
            scale=scale,
            shards=shards_of(dataset.persons),
        )
    out = {}
    for layout in LAYOUTS:
        plan = build_plan(lab_mix(MIX, staggered=layout.staggered), dataset)
        out[layout.name] = price_layout(layout, agg, plan_arrays(plan, agg.person_index), Config())
    return out


@pytest.fixture(scope="module")
def by_history() -> dict[int, dict[str, dict[str, Any]]]:
    return {h: _priced(h) for h in (1, 10)}


def test_legacy_puts_all_index_load_on_one_key(by_history: dict[int, Any]) -> None:
    assert _priced(10, rows=True)["legacy"]["hottestShare"] == 1.0
    legacy = by_history[10]["legacy"]
    assert legacy["hottestShare"] == 1.0
    assert legacy["indexKeys"] == 1
    assert by_history[10]["adr-n16"]["hottestShare"] < 0.5


def test_open_only_enumerations_do_not_grow_with_history(by_history: dict[int, Any]) -> None:
    for name in ("state-split", "sparse-open-index"):
        assert by_history[10][name]["enumerationRcu"] == by_history[1][name]["enumerationRcu"]
    for name in ("legacy", "adr-n16", "person-key-scan"):
        assert by_history[10][name]["enumerationRcu"] > 3 * by_history[1][name]["enumerationRcu"]


def test_by_person_reads_one_key_except_state_split(by_history: dict[int, Any]) -> None:
    figures = by_history[10]
    for name in ("legacy", "adr-n16", "sparse-open-index", "person-key-scan"):
        assert figures[name]["requestsPerByPerson"] == 1
    assert figures["state-split"]["requestsPerByPerson"] == 2
    assert figures["state-split"]["byPersonRcu"] > figures["adr-n16"]["byPersonRcu"]
    # Keyed by personId: every index key is one person's.
    assert figures["person-key-scan"]["hottestKey"].rsplit("/", 1)[-1].startswith("person_")


def test_write_costs_of_the_extra_index_and_of_the_restamp(by_history: dict[int, Any]) -> None:
    figures = by_history[10]
    base = figures["adr-n16"]
    assert figures["sparse-open-index"]["transitionWcu"] > base["transitionWcu"]
    # The terminal transition moves a state-split row to the closed family: delete + put.
    assert figures["state-split"]["terminalTransitionWcu"] > base["terminalTransitionWcu"]
    assert figures["state-split"]["transitionWcu"] == base["transitionWcu"]
    assert figures["sparse-open-index"]["storageBytesPerSaga"] > base["storageBytesPerSaga"]


def test_staggering_lowers_the_peak_not_the_totals(by_history: dict[int, Any]) -> None:
    together, staggered = by_history[10]["adr-n16"], by_history[10]["adr-n16-staggered"]
    assert staggered["totalRcu"] == together["totalRcu"]
    assert staggered["peakRcuPerKey"] < together["peakRcuPerKey"]
    assert staggered["headroom"] >= together["headroom"]


def test_the_scan_reads_the_whole_table_and_is_paced(by_history: dict[int, Any]) -> None:
    scan = by_history[10]["person-key-scan"]
    assert scan["enumerationRcu"] >= by_history[10]["legacy"]["enumerationRcu"]
    assert scan["pacedEnumerationSeconds"] >= 1
    assert scan["scanPeakRcuPerSegment"] > 0


def test_aggregates_without_rows_agree_with_the_materialised_dataset() -> None:
    dataset = open_only_dataset(SMALL, 1)
    agg = synthetic_aggregates(
        dataset,
        history_factor=10,
        other_bytes_per_scale=(0, 0),
        scale=1,
        shards=shards_of(dataset.persons),
    )
    materialised = aggregates_of(build_dataset(lab_spec(SMALL, scale=1, history_factor=10)))
    assert int(agg.terminal_rows.sum()) == int(materialised.terminal_rows.sum())
    mean = agg.terminal_bytes.sum() / agg.terminal_rows.sum()
    assert SMALL.min_item_bytes < mean < SMALL.max_item_bytes


def test_scaled_grid_keeps_the_properties() -> None:
    figures = _priced(10, scale=10)
    assert figures["legacy"]["hottestShare"] == 1.0
    assert figures["state-split"]["enumerationRcu"] < figures["adr-n16"]["enumerationRcu"] / 5
    assert LAYOUTS_BY_NAME["adr-n16-staggered"].staggered


def test_open_rows_cost_and_index_writes(by_history: dict[int, Any]) -> None:
    figures = by_history[10]
    # Every layout stores rows of the same sizes: the open rows cost the same everywhere.
    assert len({f["openRowsRcu"] for f in figures.values()}) == 1
    sparse, adr = figures["sparse-open-index"], figures["adr-n16"]
    assert sparse["enumerationOverOpenRows"] < 1.5 < adr["enumerationOverOpenRows"]
    assert sparse["enumerationOverOpenRows"] == pytest.approx(
        sparse["enumerationRcu"] / sparse["openRowsRcu"], abs=1e-4
    )
    # Closing a saga: the open index entry's delete is the one extra index write.
    assert sparse["terminalIndexWrites"] == adr["terminalIndexWrites"] + 1
    assert figures["state-split"]["terminalIndexWrites"] == 2
