"""The drift checker's index reads, paced per key: on a fake index that charges every page by
DynamoDB's rules (the index entries' sizes summed, rounded up once to 4 KB, halved for a GSI's
eventually consistent read; a page stops at 1 MB) and a fake clock, no key is read at more than
its units in any second, the counts stay exact, and a key that cannot be read still fails the run
by name."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devkit.capacity.units import read_units
from saga_index.index import keys
from saga_index.index.errors import EnumerationError
from saga_index.index.shard import shard
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record.phase import Phase
from saga_index.store.dynamo import KeyReadIncompleteError, KeyReadPace, item_size, serialize

N = 16
MB = 1024 * 1024
ENTRY_BYTES = 3272  # a saga's index entry (docs/layouts.md, bytes/saga)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class MeteredIndex:
    """A GSI as a Query sees it: rows by key in sort-key order, pages of at most Limit rows and
    1 MB, each charged what DynamoDB charges; records (time, key, units) of every request."""

    def __init__(self, clock: FakeClock, rows: Mapping[str, list[dict[str, Any]]]) -> None:
        self.clock = clock
        self.rows = {k: sorted(v, key=lambda r: r["GSI4SK"]) for k, v in rows.items()}
        self.charges: list[tuple[float, str, float]] = []
        self.unreadable: set[str] = set()

    def query(self, **request: Any) -> dict[str, Any]:
        gsi4pk = request["ExpressionAttributeValues"][":pk"]["S"]
        if gsi4pk in self.unreadable:
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "partition unavailable"}},
                "Query",
            )
        rows = self.rows.get(gsi4pk, [])
        start = 0
        if "ExclusiveStartKey" in request:
            start = int(request["ExclusiveStartKey"]["n"]["N"])
        limit = request.get("Limit", len(rows) or 1)
        page: list[dict[str, Any]] = []
        read = 0
        for row in rows[start : start + limit]:
            size = _stored(row).size
            if read + size > MB:
                break
            page.append(row)
            read += size
        units = read_units(read, consistent=False)
        self.charges.append((self.clock(), gsi4pk, units))
        response: dict[str, Any] = {
            "Count": len(page),
            "ConsumedCapacity": {"TableName": "t", "CapacityUnits": units},
        }
        if request.get("Select") != "COUNT":
            response["Items"] = [_stored(row).projected for row in page]
        if start + len(page) < len(rows):
            response["LastEvaluatedKey"] = {"n": {"N": str(start + len(page))}}
        return response

    def busiest_second(self, gsi4pk: str) -> float:
        sent = [(at, units) for at, key, units in self.charges if key == gsi4pk]
        return max(sum(u for at, u in sent if start <= at < start + 1.0) for start, _ in sent)

    def units_on(self, gsi4pk: str) -> float:
        return sum(units for _, key, units in self.charges if key == gsi4pk)


class _Stored:
    """A row as the index stores it: its size, and the item a Query returns (projected)."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self.size = item_size(serialize(row))
        self.projected = serialize({k: v for k, v in row.items() if k != "payload"})


# Every row's stored form, once: the rows of one size are built once for the module
# (sharded_rows), and serialising 19,200 rows for every page of every test was most of its time.
_STORED: dict[int, tuple[Mapping[str, Any], _Stored]] = {}


def _stored(row: Mapping[str, Any]) -> _Stored:
    # Keyed by identity, the row kept alive beside its entry: no other row can take its id.
    known = _STORED.get(id(row))
    if known is None:
        known = _STORED[id(row)] = (row, _Stored(row))
    return known[1]


@functools.cache
def sharded_rows(per_key: int) -> dict[str, list[dict[str, Any]]]:
    """`per_key` rows on each of the N shard keys, each on its person's key, padded to the size
    of a real index entry. Built once for the module: the tests read the rows, never change
    them."""
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pads: dict[str, int] = {}  # rows on one key differ only in equally long values
    full = 0
    person = 0
    while full < N:
        person_id = f"p-{person:06d}"
        person += 1
        gsi4pk = keys.sharded_gsi4pk(shard(person_id, N))
        if len(rows[gsi4pk]) >= per_key:
            continue
        row = {
            "PK": f"{keys.SAGA_PK_PREFIX}{person_id}",
            "SK": keys.SAGA_SK,
            "sagaId": person_id,
            "personId": person_id,
            "GSI4PK": gsi4pk,
            "GSI4SK": f"{person_id}#2026-01-01T00:00:00Z",
        }
        if gsi4pk not in pads:
            pads[gsi4pk] = ENTRY_BYTES - item_size(serialize(row)) - len("payload")
        row["payload"] = "x" * pads[gsi4pk]
        rows[gsi4pk].append(row)
        full += len(rows[gsi4pk]) == per_key
    return dict(rows)


def checker(index: MeteredIndex, clock: FakeClock, **kwargs: Any) -> DriftChecker:
    # One worker: the fake clock is one timeline, so each key's seconds are its own.
    return DriftChecker(
        index,  # type: ignore[arg-type]
        "t",
        phase=Phase.SHARDED,
        shard_count=N,
        max_workers=1,
        clock=clock,
        sleep=clock.sleep,
        **kwargs,
    )


@pytest.mark.parametrize("units_per_key", [300.0, 200.0])
def test_no_key_is_read_at_more_than_its_units_in_any_second(units_per_key: float) -> None:
    # Given 1,200 rows of 3,272 bytes on each shard key (about 480 read units per key: four
    # 1 MB pages of 128 units and one smaller)
    clock = FakeClock()
    index = MeteredIndex(clock, sharded_rows(1200))
    pace = KeyReadPace(units_per_key=units_per_key)

    report = checker(index, clock, index_pace=pace).check(scan_unindexed=False)

    assert report.healthy
    assert report.rows_per_shard == dict.fromkeys(range(N), 1200)
    for gsi4pk in keys.all_shard_gsi4pks(N):
        assert index.units_on(gsi4pk) == pytest.approx(479.5, abs=1)
        assert index.busiest_second(gsi4pk) <= units_per_key
    # The report's units are the paced reads'; the 3N Limit-1 probes above N cost 0.5 each.
    probes = 3 * N * 0.5
    assert report.index_read_units == pytest.approx(sum(u for _, _, u in index.charges) - probes)
    # Computed, not timed: each key's pages go at the pace's rate (the last page's cost is
    # paid after the read), and the keys one after the other on the one worker.
    shards = keys.all_shard_gsi4pks(N)
    assert clock.now <= sum(pace.seconds_for(index.units_on(k)) for k in shards)
    assert clock.now >= sum((index.units_on(k) - 128) / pace.rate for k in shards)


def test_at_a_partitions_whole_ceiling_the_same_read_takes_a_keys_units_in_one_second() -> None:
    # What the default pace prevents (and that the meter sees it): allowed a partition's
    # 3,000 units, the ~480 units of a key arrive within one second.
    clock = FakeClock()
    index = MeteredIndex(clock, sharded_rows(1200))
    checker(index, clock, index_pace=KeyReadPace(units_per_key=3000)).check(scan_unindexed=False)
    assert index.busiest_second(keys.sharded_gsi4pk(0)) == pytest.approx(479.5, abs=1)


def test_an_unreadable_key_still_fails_the_run_by_name() -> None:
    clock = FakeClock()
    index = MeteredIndex(clock, sharded_rows(50))
    index.unreadable.add(keys.sharded_gsi4pk(5))
    with pytest.raises(EnumerationError) as caught:
        checker(index, clock).check(scan_unindexed=False)
    assert keys.sharded_gsi4pk(5) in str(caught.value)


def test_a_key_too_large_for_the_runs_time_fails_the_run_instead_of_counting_part_of_it() -> None:
    # 1,200 rows on a key take 2.1 s at 300 units per key; the run has 1.5 s.
    clock = FakeClock()
    index = MeteredIndex(clock, sharded_rows(1200))
    with pytest.raises(KeyReadIncompleteError, match="RenewalSaga#0"):
        checker(index, clock).check(scan_unindexed=False, deadline=1.5)
    assert all(at < 1.5 for at, _, _ in index.charges)
