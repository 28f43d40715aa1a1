"""The demo's dataset, traffic plan, synthetic pricing and report (no server)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from devkit.capacity.ledger import LoadLedger
from devkit.capacity.pricing import Charge
from devkit.capacity.table_schema import IndexSchema, TableSchema
from devkit.demo.report import improvement, layout_json, render
from devkit.seed import SeedSpec, build_dataset
from devkit.traffic.events import CohortOpen, ListPageLoad, Sweep, Transition
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from devkit.traffic.synthetic import SyntheticTable
from saga_index.index import keys, names
from saga_index.index.errors import InvalidInputError
from saga_index.index.model import OPEN_STATES
from saga_index.layout_change.record.phase import Phase
from saga_index.store.dynamo.sizing import item_size

SCHEMA = TableSchema(
    name="t",
    hash_key="PK",
    range_key="SK",
    indexes=(IndexSchema(names.INDEX_NAME, "GSI4PK", "GSI4SK"),),
)


@pytest.fixture(scope="module")
def dataset() -> Any:
    return build_dataset()


def test_default_dataset_has_the_production_shape(dataset: Any) -> None:
    sagas = dataset.sagas
    assert len(dataset.open_sagas) == 179
    assert sum(1 for s in sagas if not s.is_open) == 1500 + 2  # terminal + the anomalies
    assert len(dataset.anomalies) == 2
    assert len({s.person_id for s in sagas if s.person_id}) == 1200
    sizes = [item_size(item) for item in dataset.saga_items()]
    assert min(sizes) >= 1024
    assert max(sizes) <= 2048
    # One open renewal per person at most.
    open_people = Counter(s.person_id for s in dataset.open_sagas)
    assert max(open_people.values()) == 1


def test_dataset_is_deterministic_in_its_seed(dataset: Any) -> None:
    again = build_dataset()
    assert list(again.saga_items()) == list(dataset.saga_items())
    other = build_dataset(SeedSpec(seed=86))
    assert [s.saga_id for s in other.sagas] != [s.saga_id for s in dataset.sagas]


def test_anomalies_sit_on_the_legacy_key_without_person_and_their_lease_names_one(
    dataset: Any,
) -> None:
    leases = {
        item["PK"]["S"]: item
        for item in dataset.other_items()
        if item["entityType"]["S"] == "Lease"
    }
    for record in dataset.anomalies:
        (item,) = [i for i in dataset.saga_items(16) if i["sagaId"]["S"] == record.saga_id]
        assert "personId" not in item
        assert item["GSI4PK"]["S"] == keys.LEGACY_GSI4PK  # no shard can be computed for it
        assert keys.person_anomaly({"GSI4SK": item["GSI4SK"]["S"]}) is not None
        lease = leases[f"LEASE#{record.lease_id}"]
        assert lease["personId"]["S"] == dataset.lease_person(record)


def test_other_entity_rows_carry_no_index_attributes(dataset: Any) -> None:
    kinds = Counter()
    for item in dataset.other_items():
        kinds[item["entityType"]["S"]] += 1
        assert "GSI4PK" not in item
        assert "GSI4SK" not in item
    assert set(kinds) == {"PropertyManager", "Person", "Lease", "ConversationMessage"}


def test_sharded_layout_routes_every_routable_row_to_its_shard(dataset: Any) -> None:
    for record, item in zip(dataset.sagas, dataset.saga_items(16), strict=True):
        if record.person_id is not None:
            assert item["GSI4PK"]["S"] == keys.shard_gsi4pk_for_person(record.person_id, 16)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (SeedSpec(open_sagas=10, persons=5), "cannot exceed persons"),
        (SeedSpec(min_item_bytes=500), "item sizes"),
        (SeedSpec(terminal_sagas=-1), "terminal_sagas"),
    ],
)
def test_an_impossible_dataset_is_refused_naming_the_problem(spec: SeedSpec, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        build_dataset(spec)


def test_the_plan_follows_the_mix(dataset: Any) -> None:
    mix = TrafficMix(duration_s=120, cohort_size=7)
    plan = build_plan(mix, dataset)
    events = [(tick.second, e) for tick in plan.ticks for e in tick.events]
    sweeps = [(s, e) for s, e in events if isinstance(e, Sweep)]
    # Four sweeps, every 60 s, all at the same second (unstaggered crons).
    assert sorted(s for s, _ in sweeps) == [0] * 4 + [60] * 4
    cohorts = [e for _, e in events if isinstance(e, CohortOpen)]
    assert [len(c.sagas) for c in cohorts] == [7, 7]
    loads = Counter(e.manager for _, e in events if isinstance(e, ListPageLoad))
    for count in loads.values():
        assert 120 / 5 - 1 <= count <= 120 / 3 + 1  # one poll every 3-5 s
    transitions = [e for _, e in events if isinstance(e, Transition)]
    assert 120 * 2 * 0.7 <= len(transitions) <= 120 * 2 * 1.3
    assert all(t.to_state in OPEN_STATES for t in transitions)
    assert build_plan(mix, dataset) == plan


def test_an_invalid_mix_is_refused_naming_the_problem(dataset: Any) -> None:
    with pytest.raises(InvalidInputError, match="poll_interval_s"):
        build_plan(TrafficMix(poll_interval_s=(5.0, 3.0)), dataset)


@pytest.mark.parametrize(
    ("phase", "requests"),
    [(Phase.LEGACY, 1), (Phase.MIGRATING, 2), (Phase.SHARDED, 1), (Phase.ROLLING_BACK, 2)],
)
def test_synthetic_by_person_reads_cost_what_the_repository_sends(
    dataset: Any, phase: Phase, requests: int
) -> None:
    table = SyntheticTable(dataset, SCHEMA, phase=phase, shard_count=16)
    person = dataset.open_sagas[0].person_id
    assert table.by_person(person, 0) == requests


def test_synthetic_replay_puts_all_legacy_load_on_one_key_and_spreads_the_sharded(
    dataset: Any,
) -> None:
    plan = build_plan(TrafficMix(duration_s=20), dataset)
    legacy = SyntheticTable(dataset, SCHEMA, phase=Phase.LEGACY, shard_count=16)
    sharded = SyntheticTable(
        dataset, SCHEMA, phase=Phase.SHARDED, shard_count=16, layout_shard_count=16
    )
    before = legacy.run(plan, "legacy").summary(names.INDEX_NAME)
    after = sharded.run(plan, "sharded").summary(names.INDEX_NAME)
    assert [p.partition_key for p in before.partitions] == [keys.LEGACY_GSI4PK]
    assert before.hottest_key_share == 1.0
    assert len(after.partitions) == 16
    assert after.hottest_key_share < 0.15
    assert after.headroom is not None
    assert before.headroom is not None
    assert after.headroom > 8 * before.headroom


def test_report_renders_the_contract_numbers_as_a_table() -> None:
    ledger = LoadLedger()
    ledger.add(0, [Charge(names.INDEX_NAME, keys.LEGACY_GSI4PK, rcu=1500, wcu=100)])
    legacy = layout_json(ledger.summary(names.INDEX_NAME), replay={"enumerations": 0})
    ledger = LoadLedger()
    for shard in range(4):
        ledger.add(0, [Charge(names.INDEX_NAME, keys.sharded_gsi4pk(shard), rcu=375, wcu=25)])
    sharded = layout_json(ledger.summary(names.INDEX_NAME), replay={"enumerations": 0})
    gain = improvement(legacy, sharded)
    assert gain["headroomMultiple"] == 4.0
    report = {
        "legacy": legacy,
        "sharded": sharded,
        "improvement": gain,
        "config": {"shardCount": 4, "traffic": {"durationS": 1}},
        "backfill": {"restamped": 3, "skipped": 0, "anomalies": 1, "repaired": 1},
        "parity": {"ok": True, "summary": "3 rows"},
        "drift": {"healthy": True, "legacyRows": 0, "misroutedRows": 0, "unindexedRows": 0},
    }
    text = render(report)
    assert "| hottest key's share of index load | 100.0 %" in text
    assert "25.0 %" in text
    assert "1,500.0" in text
    assert "headroom of the hottest partition by 4.0" in text


def test_report_renders_the_refused_early_cutover_and_the_phase_history() -> None:
    ledger = LoadLedger()
    ledger.add(0, [Charge(names.INDEX_NAME, keys.LEGACY_GSI4PK, rcu=10, wcu=1)])
    layout = layout_json(ledger.summary(names.INDEX_NAME), replay={"enumerations": 0})
    history = [
        {
            "version": 1,
            "from": "legacy",
            "to": "migrating",
            "changedBy": "ops@host",
            "changedAt": "2026-01-01T00:00:00.000Z",
            "reason": "start",
            "checksPassed": [],
            "checksForced": [],
        },
        {
            "version": 2,
            "from": "migrating",
            "to": "sharded",
            "changedBy": "ops@host",
            "changedAt": "2026-01-01T00:01:00.000Z",
            "reason": "done",
            "checksPassed": ["backfill-verified", "parity"],
            "checksForced": [],
        },
        {
            "version": 3,
            "from": "sharded",
            "to": "sharded",
            "changedBy": "ops@host",
            "changedAt": "2026-01-01T00:02:00.000Z",
            "reason": "add the open index",
            "checksPassed": [],
            "checksForced": [],
            "moved": "open-index",
            "change": "openIndex off -> adding(16)",
        },
    ]
    report = {
        "legacy": layout,
        "sharded": layout,
        "improvement": improvement(layout, layout),
        "config": {"shardCount": 4, "traffic": {"durationS": 1}},
        "backfill": {"restamped": 3, "skipped": 0, "anomalies": 0},
        "parity": {"ok": True},
        "refusedSharded": {
            "refused": True,
            "exitCode": 3,
            "failed": [
                {"name": "backfill-verified", "passed": False, "detail": "none recorded"},
                {"name": "no-legacy-rows", "passed": False, "detail": "3 rows"},
            ],
        },
        "phaseHistory": history,
    }

    text = render(report)

    assert "refused (exit 3; failed: backfill-verified, no-legacy-rows)" in text
    assert "- v1 legacy -> migrating at 2026-01-01T00:00:00.000Z by ops@host: start" in text
    # An open index move is shown as one, not as the phase it keeps (sharded -> sharded).
    assert "- v3 openIndex off -> adding(16) at 2026-01-01T00:02:00.000Z by ops@host" in text
    assert "(checks passed: backfill-verified, parity)" in text


def test_report_renders_the_reshard_beside_the_first_sharding() -> None:
    def layout(shards: int, rcu: float) -> dict[str, Any]:
        ledger = LoadLedger()
        for shard in range(shards):
            charge = Charge(names.INDEX_NAME, keys.sharded_gsi4pk(shard), rcu=rcu, wcu=1)
            ledger.add(0, [charge])
        return layout_json(ledger.summary(names.INDEX_NAME), replay={"enumerations": 0})

    sharded, resharded = layout(4, 300), layout(8, 150)
    report = {
        "legacy": layout(1, 1200),
        "sharded": sharded,
        "resharded": resharded,
        "improvement": improvement(layout(1, 1200), sharded),
        "reshardImprovement": improvement(sharded, resharded),
        "config": {"shardCount": 4, "reshardTo": 8, "traffic": {"durationS": 1}},
        "backfill": {"restamped": 3, "skipped": 0, "anomalies": 0},
        "parity": {"ok": True},
        "reshard": {
            "fromShards": 4,
            "toShards": 8,
            "refusedShardCount": {"shards": 16, "exitCode": 2},
            "backfill": {
                "moved": 5,
                "sourceRows": 10,
                "movedShare": 0.5,
                "seconds": 1.0,
                "rowsPerSecond": 5.0,
                "maxWritesPerSecond": 100.0,
            },
            "parity": {"ok": True, "summary": "10 saga rows"},
            "drift": {"healthy": True, "misroutedRows": 0, "shardSkew": 1.0, "rowsPerShard": [1]},
        },
    }

    text = render(report)

    assert "| sharded (N=4) | sharded (N=8) |" in text
    assert "| sharded N=8 | RenewalSaga#7 |" in text
    assert "5 of 10 saga rows moved (50.0 %)" in text
    assert "`--shards 16` refused (exit 2)" in text
    assert "multiplied the headroom of the hottest partition by 2.00" in text
