"""bench.layouts end to end at a tiny size: six layouts seeded and metered on dynalite, the model
checked against them, the grid, the JSON shape the issue names and the chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import layouts
from bench.layouts_keys import LAYOUTS
from devkit.seed import SeedSpec
from devkit.traffic.mix import TrafficMix

pytestmark = pytest.mark.conformance

TINY = SeedSpec(open_sagas=24, terminal_sagas=0, persons=120, property_managers=2)
QUIET = TrafficMix(transitions_per_s=0.5, cohort_size=4, inbound_messages_per_s=0.5)


def test_run_meters_every_layout_and_the_model_agrees(
    dynalite_endpoint: str, tmp_path: Path
) -> None:
    result = layouts.run(
        scales=(1, 10),
        history_factors=(1, 10),
        duration=60,
        metered_history=10,
        metered_duration=10,
        base_spec=TINY,
        base_mix=QUIET,
        endpoint_url=dynalite_endpoint,
        by_person_sample=20,
        transition_sample=5,
        chart_path=tmp_path / "layouts.png",
        target_scale=10,
        target_history=10,
        shard_ladder=(16, 32),
    )
    check = result["check"]
    disagreements = {
        name: {f: v for f, v in entry["figures"].items() if not v["agree"]}
        for name, entry in check["layouts"].items()
        if not entry["ok"]
    }
    assert check["ok"], disagreements
    assert set(check["layouts"]) == {layout.name for layout in LAYOUTS}
    rows = result["layouts"]
    assert len(rows) == len(LAYOUTS) * 2 * 2
    required = {
        "name",
        "scale",
        "historyFactor",
        "hottestShare",
        "headroom",
        "enumerationRcu",
        "byPersonRcu",
        "transitionWcu",
    }
    assert all(required <= set(row) for row in rows)
    assert "config" in result
    json.dumps(result)  # JSON-ready as the runner saves it
    assert (tmp_path / "layouts.png").stat().st_size > 0
    # The metered run sees what the issue is about: legacy's enumeration reads the history,
    # the state-split one reads only the open sagas.
    metered = {name: entry["metered"] for name, entry in check["layouts"].items()}
    assert metered["state-split"]["enumerationRcu"] < metered["legacy"]["enumerationRcu"] / 3
    assert metered["legacy"]["hottestShare"] == 1.0
    # The new figures, on the server: the enumeration of the sparse index reads what its open
    # rows cost within the key rounding, closing a saga writes one more index entry than the
    # ADR layout (the open index entry's delete), a by-person read is one Query.
    sparse, adr = metered["sparse-open-index"], metered["adr-n16"]
    assert sparse["openRowsRcu"] == adr["openRowsRcu"] > 0
    assert sparse["enumerationOverOpenRows"] < adr["enumerationOverOpenRows"]
    assert sparse["terminalIndexWrites"] == adr["terminalIndexWrites"] + 1 == 2
    assert sparse["requestsPerByPerson"] == 1
    targets = result["targets"]
    assert {v["figure"] for v in targets["verdicts"]} >= {
        "all-open enumeration / what its open rows cost",
        "sweeps' headroom, sweeps staggered",
        "closing a saga: index writes more than adr-n16's",
        "by-person read: queries",
    }
    assert targets["priced"]["recommendedShardCount"] in (16, 32)


def test_the_sparse_layout_reads_and_writes_through_the_product(dynalite_endpoint: str) -> None:
    """The lab's sparse layout is the product's routing with the open index in use: its writer
    stamps OpenSagaPK on a saga it opens and deletes the open index entry in the write that
    closes it (one charge on the open index: the entry's delete), and the repository's
    enumeration reads the open index's keys."""
    from bench.layouts_keys import LAYOUTS_BY_NAME, OPEN_INDEX_NAME, OPEN_INDEX_PK
    from bench.layouts_model import lab_spec
    from bench.layouts_store import MeteredLayout, create_layout_table, seed_layout
    from devkit.schema import load_template
    from devkit.seed import build_dataset
    from saga_index.index import Person
    from saga_index.store.dynamo import make_client

    layout = LAYOUTS_BY_NAME["sparse-open-index"]
    dataset = build_dataset(lab_spec(TINY, scale=1, history_factor=1))
    client = make_client(endpoint_url=dynalite_endpoint)
    schema = create_layout_table(client, load_template(), "lab-sparse-product", layout)
    seed_layout(client, schema.name, dataset, layout, 16)
    run = MeteredLayout(dynalite_endpoint, schema.name, schema, layout, shard_count=16, segments=4)
    assert run.repository.repository.plan.open_enumeration_keys() is not None
    created = run.writer.create_saga(
        saga_id="lab-new", person_id="person_x", lease_id="L1", opened_at="2026-07-10T00:00:00.000Z"
    )
    assert created[OPEN_INDEX_PK] == Person.of("person_x").open_index_pk(16)
    run.fresh_meter()
    enumeration = run.repository.get_all_open_sagas()
    assert "lab-new" in {item["sagaId"] for item in enumeration.items}
    assert run.meter.ledger.targets() == [OPEN_INDEX_NAME]
    run.fresh_meter()
    closed = run.writer.transition(
        saga_id="lab-new",
        person_id="person_x",
        to_state="SIGNED",
        updated_at="2026-07-11T00:00:00.000Z",
    )
    assert OPEN_INDEX_PK not in closed
    open_index = run.meter.ledger.summary(OPEN_INDEX_NAME)
    assert [p.requests for p in open_index.partitions] == [1]
    assert "lab-new" not in {i["sagaId"] for i in run.repository.get_all_open_sagas().items}
