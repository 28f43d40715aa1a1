"""The dry run's estimate without a table: write units from item sizes, the time at the cap, the
legacy key's share of one partition; and the anomaly keys' reasons within the state budget."""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import Layout
from saga_index.layout_change.backfill.estimate import (
    PARTITION_WCU_PER_SECOND,
    BackfillEstimate,
    LegacyKeyEffect,
    RowSample,
    restamp_units,
    write_units,
)
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.store.dynamo.sizing import item_size
from saga_index_cli.backfill.estimate import estimate_lines, format_duration

FORWARD = Move.between_legacy_and(BackfillDirection.FORWARD, 16)
ROLLBACK = Move.between_legacy_and(BackfillDirection.ROLLBACK, 16)
RESHARD = Move(BackfillDirection.FORWARD, Layout.sharded(16), Layout.sharded(32))


def saga_row(person: str, gsi4pk: str, padding: int) -> dict[str, Any]:
    """A saga row in the wire shape, `padding` bytes of payload on top of its keys."""
    return {
        "PK": {"S": "RSAGA#s1"},
        "SK": {"S": "META"},
        "entityType": {"S": keys.ENTITY_TYPE},
        "personId": {"S": person},
        "GSI4PK": {"S": gsi4pk},
        "GSI4SK": {"S": f"{person}#2026-01-01T00:00:00.000Z"},
        "payload": {"S": "x" * padding},
    }


@pytest.mark.parametrize(
    ("size", "units"), [(0, 1), (1, 1), (1024, 1), (1025, 2), (2048, 2), (2049, 3)]
)
def test_a_write_costs_one_unit_per_started_kilobyte(size: int, units: int) -> None:
    assert write_units(size) == units


def test_a_negative_size_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="-1"):
        write_units(-1)


def test_forward_deletes_the_entry_from_the_legacy_key_and_puts_it_on_the_shard() -> None:
    # Given a row of just under 2 KB on the legacy key
    raw = saga_row("p-1", keys.LEGACY_GSI4PK, 0)
    raw["payload"] = {"S": "x" * (2000 - item_size(raw))}
    assert item_size(raw) == 2000
    # When its re-stamp is priced
    units = restamp_units(raw, FORWARD)
    # Then the legacy key pays the delete of a 2 KB entry; the shard's entry is 3 bytes longer
    # ("RenewalSaga#N"), still 2 KB; the table write is the larger item's, twice in the fence's
    # transaction, and the fence slot's check adds 2
    assert (units.source_index, units.target_index, units.table) == (2, 2, 4)
    assert units.legacy_key == units.source_index == 2
    assert units.fence_slot == 2
    assert units.total == 10


def test_rollback_puts_the_entry_onto_the_legacy_key_sized_as_it_will_be_there() -> None:
    # Given a row on a shard whose size crosses 1 KB only with its longer sharded key
    shard_key = FORWARD.target_key("p-1")
    raw = saga_row("p-1", shard_key, 0)
    raw["payload"] = {"S": "x" * (1025 - item_size(raw))}
    assert item_size(raw) == 1025
    units = restamp_units(raw, ROLLBACK)
    # Then the legacy key pays the put of the entry as it will be there (under 1 KB again)
    assert (units.source_index, units.target_index, units.legacy_key) == (2, 1, 1)
    assert units.table == 4


def test_a_reshard_does_not_touch_the_legacy_key() -> None:
    person = next(
        f"p-{n}"
        for n in range(1000)
        if RESHARD.target_key(f"p-{n}") != RESHARD.source.key_for(f"p-{n}")
    )
    raw = saga_row(person, RESHARD.source.key_for(person), 500)
    assert restamp_units(raw, RESHARD).legacy_key == 0
    assert LegacyKeyEffect.of(RESHARD) is LegacyKeyEffect.NONE


def test_an_anomaly_cannot_be_priced_for_a_sharded_target() -> None:
    raw = saga_row("p-1", keys.LEGACY_GSI4PK, 0)
    del raw["personId"]
    with pytest.raises(InvalidInputError, match="personId is unusable"):
        restamp_units(raw, FORWARD)


def test_the_estimate_of_1800_rows_of_2_kb_at_50_writes_per_second() -> None:
    # Given a sample of 4 rows: 3 of 2 KB, 1 of 3 KB on the legacy key
    sample = RowSample()
    for size in (2000, 2000, 2000, 3000):
        raw = saga_row("p-1", keys.LEGACY_GSI4PK, 0)
        raw["payload"] = {"S": "x" * (size - item_size(raw))}
        sample = sample.add(raw, FORWARD)
    # When 1,800 rows would move at 50 writes/s
    estimate = BackfillEstimate.of(
        rows_to_move=1800, max_writes_per_second=50.0, move=FORWARD, sample=sample
    )
    # Then: 36 s; 2.25 legacy-key WCU per row (mean of 2, 2, 2, 3) -> 112.5 WCU/s at the cap,
    # 11.25 % of one partition's 1,000 WCU/s, 4,050 WCU in all
    doc = estimate.to_json()
    assert doc["seconds"] == 36.0
    assert doc["legacyKey"] == "off"
    assert doc["legacyKeyWcuPerRow"] == 2.25
    assert doc["legacyKeyWcuPerSecond"] == 112.5
    assert doc["legacyKeyShareOfPartitionLimit"] == pytest.approx(0.1125)
    assert doc["legacyKeyWcu"] == 4050.0
    assert doc["partitionWcuPerSecondLimit"] == PARTITION_WCU_PER_SECOND
    # each row: table 2.25 twice (the fence's transaction) + the fence slot's check 2 + source
    # entry 2.25 + target entry 2.25 (sizes +3 bytes stay below)
    assert doc["wcuPerRow"] == 11.0
    assert doc["totalWcu"] == 1800 * 11.0
    assert (doc["rowsToMove"], doc["maxWritesPerSecond"], doc["sampledRows"]) == (1800, 50.0, 4)
    assert doc["averageItemBytes"] == 2250.0
    text = "\n".join(estimate_lines(estimate))
    assert "time             36.0 s" in text
    assert "OFF the legacy key" in text
    assert "112.5 WCU/s at the cap = 11.2% of one partition's 1,000 WCU/s" in text


def test_nothing_to_move_costs_nothing_and_no_sample_leaves_the_capacity_unknown() -> None:
    nothing = BackfillEstimate.of(
        rows_to_move=0, max_writes_per_second=50.0, move=ROLLBACK, sample=RowSample()
    )
    assert (nothing.seconds, nothing.legacy_key_wcu_per_second, nothing.legacy_key_wcu) == (
        0.0,
        0.0,
        0.0,
    )
    assert nothing.legacy_key is LegacyKeyEffect.ONTO
    unsized = BackfillEstimate.of(
        rows_to_move=10, max_writes_per_second=50.0, move=FORWARD, sample=RowSample()
    )
    assert unsized.to_json()["legacyKeyWcuPerSecond"] is None
    assert any("not estimated" in line for line in estimate_lines(unsized))


@pytest.mark.parametrize(
    ("rows", "cap", "problem"), [(-1, 50.0, "rows to move"), (1, 0.0, "write cap")]
)
def test_an_estimate_of_impossible_figures_is_refused(rows: int, cap: float, problem: str) -> None:
    with pytest.raises(InvalidInputError, match=problem):
        BackfillEstimate.of(
            rows_to_move=rows, max_writes_per_second=cap, move=FORWARD, sample=RowSample()
        )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0.0 s"),
        (42.04, "42.0 s"),
        (60, "1 min 00 s"),
        (725, "12 min 05 s"),
        (11232, "3 h 07 min 12 s"),
    ],
)
def test_durations_read_as_an_operator_would_say_them(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown
