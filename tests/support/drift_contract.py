"""The drift checks' behaviour, as one suite run against every backend (moto and dynalite).

A subclass provides the `dynamo` fixture (a fresh table built from the synthesised template).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.errors import EnumerationError
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.shard import shard
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record.routing import Routing
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.codec import serialize
from saga_index.store.dynamo.key_pace import KeyReadIncompleteError
from saga_index.store.dynamo.scan import SagaTableScanner, ScanIncompleteError, ScanOptions
from tests.support.backends import Backend
from tests.support.control_seed import delete_state, seed_state
from tests.support.faults import ThrottleInjector, queries_partition

N = 16
S16, S32 = Layout.sharded(16), Layout.sharded(32)
ROUTINGS = {
    "legacy": Routing.between(LEGACY),
    "migrating": Routing.between(LEGACY, S16),
    "sharded": Routing.between(S16),
    "rolling-back": Routing.between(S16, LEGACY),
    "resharding-16-32": Routing.between(S16, S32),
    "sharded-32": Routing.between(S32),
}


def checker(
    dynamo: Backend, phase: str = "sharded", *, client: Any = None, **kwargs: Any
) -> DriftChecker:
    return DriftChecker(
        client or dynamo.client, dynamo.table_name, phase=phase, shard_count=N, **kwargs
    )


def failing_fast(dynamo: Backend) -> Any:
    """A client that gives up after two attempts: persistent throttles fail quickly."""
    return dynamo.new_client(max_attempts=2)


def put_raw(dynamo: Backend, item: dict[str, Any]) -> None:
    dynamo.client.put_item(TableName=dynamo.table_name, Item=serialize(item))


def wrong_shard_of(person_id: str) -> int:
    return (shard(person_id, N) + 1) % N


@dataclass(frozen=True)
class Planted:
    legacy: int
    misrouted: int
    unindexed: int
    stray: int
    anomalous: int
    saga_rows: int
    rows_per_shard: dict[int, int]


def plant_drift(dynamo: Backend) -> Planted:
    """Three legacy rows, four correctly sharded rows, one misrouted row, one row with an
    unroutable personId under a shard, two unindexed rows (one without GSI4SK, one without
    GSI4PK), one stray row (a GSI4PK that is no key of any layout: shard 1024), and a non-saga
    row that must not be counted."""
    for n in range(3):
        dynamo.put_saga(f"legacy-{n}", f"p-legacy-{n}")
    sharded_people = [f"p-ok-{n}" for n in range(4)]
    for person in sharded_people:
        dynamo.put_saga(f"ok-{person}", person, gsi4pk="shard")
    dynamo.put_saga("misrouted", "p-moved", gsi4pk=keys.sharded_gsi4pk(wrong_shard_of("p-moved")))
    dynamo.put_saga("numeric-person", 42, gsi4pk=keys.sharded_gsi4pk(5))
    dynamo.put_saga("no-sort-key", "p-nosk", GSI4SK=None)
    put_raw(
        dynamo,
        {
            **keys.saga_table_key("no-partition-key"),
            "entityType": keys.ENTITY_TYPE,
            "sagaId": "no-partition-key",
            "personId": "p-nopk",
            "state": "OPENED",
            "GSI4SK": "p-nopk#2026-01-01T00:00:00.000Z",
        },
    )
    dynamo.put_saga("stray", "p-stray", gsi4pk=f"{keys.LEGACY_GSI4PK}#1024")
    put_raw(dynamo, {"PK": "PERSON#p-ok-0", "SK": "PROFILE", "entityType": "Person"})
    per_shard = Counter(shard(person, N) for person in sharded_people)
    per_shard[wrong_shard_of("p-moved")] += 1
    per_shard[5] += 1
    return Planted(
        legacy=3,
        misrouted=1,
        unindexed=2,
        stray=1,
        anomalous=1,
        saga_rows=3 + 4 + 1 + 1 + 2 + 1,
        rows_per_shard={n: per_shard.get(n, 0) for n in range(N)},
    )


class DriftContract:
    def test_planted_drift_is_counted_exactly(self, dynamo: Backend) -> None:
        # Given a table with every kind of drift planted
        planted = plant_drift(dynamo)
        # When every check runs, the base-table scan included
        report = checker(dynamo).check(scan_unindexed=True)
        # Then each count is exact
        assert report.legacy_rows == planted.legacy
        assert report.misrouted_rows == planted.misrouted
        assert report.unindexed_rows == planted.unindexed
        assert report.stray_rows == planted.stray
        assert report.anomalous_rows == planted.anomalous
        assert report.scanned_saga_rows == planted.saga_rows
        assert report.rows_per_shard == planted.rows_per_shard
        assert report.sharded_rows == sum(planted.rows_per_shard.values())
        mean = report.sharded_rows / N
        assert report.shard_skew == pytest.approx(max(planted.rows_per_shard.values()) / mean)
        # And the rows are named, so a human can repair them
        assert [r.saga_id for r in report.misrouted] == ["misrouted"]
        assert report.misrouted[0].expected_gsi4pk == keys.shard_gsi4pk_for_person("p-moved", N)
        assert sorted(r.saga_id for r in report.unindexed) == ["no-partition-key", "no-sort-key"]
        assert [r.gsi4pk for r in report.stray] == ["RenewalSaga#1024"]
        assert not report.healthy
        assert report.to_dict()["rowsPerShard"] == {
            str(n): count for n, count in planted.rows_per_shard.items()
        }

    def test_a_run_that_does_not_scan_leaves_the_scan_counts_unknown(self, dynamo: Backend) -> None:
        planted = plant_drift(dynamo)
        report = checker(dynamo).check(scan_unindexed=False)
        assert report.legacy_rows == planted.legacy
        assert report.misrouted_rows == planted.misrouted
        assert report.unindexed_rows is None
        assert report.stray_rows is None
        assert not report.scanned

    def test_a_clean_sharded_table_is_healthy_with_every_count_zero(self, dynamo: Backend) -> None:
        for n in range(5):
            dynamo.put_saga(f"s{n}", f"person-{n}", gsi4pk="shard")
        report = checker(dynamo).check(scan_unindexed=True)
        assert (report.legacy_rows, report.misrouted_rows) == (0, 0)
        assert (report.unindexed_rows, report.stray_rows) == (0, 0)
        assert report.sharded_rows == 5
        assert report.healthy
        assert report.findings() == []

    def test_an_empty_table_reports_zeros_and_zero_skew(self, dynamo: Backend) -> None:
        report = checker(dynamo).check(scan_unindexed=True)
        assert report.rows_per_shard == dict.fromkeys(range(N), 0)
        assert report.shard_skew == 0.0
        assert report.scanned_saga_rows == 0
        assert report.healthy

    def test_legacy_rows_are_drift_only_in_phase_sharded(self, dynamo: Backend) -> None:
        dynamo.put_saga("l1", "p-1")
        dynamo.put_saga("l2", "p-2")
        for phase in ("legacy", "migrating", "rolling-back"):
            assert checker(dynamo, phase).check(scan_unindexed=True).healthy, phase
        sharded = checker(dynamo, "sharded").check(scan_unindexed=True)
        assert not sharded.healthy
        assert "legacy GSI4PK" in sharded.findings()[0]

    def test_sharded_rows_are_drift_only_in_phase_legacy(self, dynamo: Backend) -> None:
        dynamo.put_saga("s1", "p-1", gsi4pk="shard")
        for phase in ("migrating", "sharded", "rolling-back"):
            assert checker(dynamo, phase).check(scan_unindexed=False).healthy, phase
        legacy = checker(dynamo, "legacy").check(scan_unindexed=False)
        assert legacy.findings() == [
            "1 row(s) carry a sharded GSI4PK in phase legacy, where readers read only the "
            "legacy partition"
        ]

    def test_every_page_of_the_legacy_count_and_the_shards_is_read(self, dynamo: Backend) -> None:
        for n in range(7):
            dynamo.put_saga(f"l{n}", f"p-{n}")
        for n in range(5):
            dynamo.put_saga(f"s{n}", "p-same", gsi4pk="shard", opened_at=f"2026-01-0{n + 1}T00:00Z")
        paged = checker(dynamo, page_size=2).check(scan_unindexed=False)
        unpaged = checker(dynamo).check(scan_unindexed=False)
        assert paged.legacy_rows == unpaged.legacy_rows == 7
        assert paged.sharded_rows == unpaged.sharded_rows == 5
        assert paged.requests > unpaged.requests

    def test_the_scan_reads_every_page_of_every_segment(self, dynamo: Backend) -> None:
        planted = plant_drift(dynamo)
        options = ScanOptions(segments=3, page_size=2, read_units_per_second=10_000)
        report = checker(dynamo, scan_options=options).check(scan_unindexed=True)
        assert report.scanned_saga_rows == planted.saga_rows
        assert report.unindexed_rows == planted.unindexed

    def test_a_shard_that_stays_throttled_fails_the_check_naming_it(self, dynamo: Backend) -> None:
        dynamo.put_saga("s1", "p-1", gsi4pk="shard")
        hot = keys.shard_gsi4pk_for_person("p-1", N)
        client = failing_fast(dynamo)
        ThrottleInjector(client, "Query", times=None, match=queries_partition(hot))
        with pytest.raises(EnumerationError) as caught:
            checker(dynamo, client=client).check(scan_unindexed=False)
        assert caught.value.partitions == [hot]

    def test_a_throttled_legacy_count_fails_the_check(self, dynamo: Backend) -> None:
        client = failing_fast(dynamo)
        ThrottleInjector(client, "Query", times=None, match=queries_partition(keys.LEGACY_GSI4PK))
        with pytest.raises(EnumerationError, match="RenewalSaga:"):
            checker(dynamo, client=client).check(scan_unindexed=False)

    def test_a_scan_segment_that_stays_throttled_fails_the_check(self, dynamo: Backend) -> None:
        plant_drift(dynamo)
        client = failing_fast(dynamo)
        ThrottleInjector(client, "Scan", times=None, match=lambda body: body.get("Segment") == 1)
        options = ScanOptions(segments=2, read_units_per_second=10_000)
        with pytest.raises(EnumerationError) as caught:
            checker(dynamo, client=client, scan_options=options).check(scan_unindexed=True)
        assert caught.value.partitions == ["segment 1 of 2"]

    def test_transient_scan_throttles_are_retried_and_the_counts_stay_exact(
        self, dynamo: Backend
    ) -> None:
        planted = plant_drift(dynamo)
        injector = ThrottleInjector(dynamo.client, "Scan", times=2)
        report = checker(dynamo).check(scan_unindexed=True)
        assert injector.injected == 2
        assert report.unindexed_rows == planted.unindexed

    def test_a_scan_past_its_deadline_fails_instead_of_reporting_a_partial_count(
        self, dynamo: Backend
    ) -> None:
        plant_drift(dynamo)
        # Given index reads well within the deadline (an hour from now), and a scanner whose
        # clock is past it before the scan's first page
        deadline = time.monotonic() + 3600
        drift = checker(dynamo)
        drift.scanner = SagaTableScanner(
            dynamo.client, dynamo.table_name, clock=lambda: deadline + 1
        )
        with pytest.raises(ScanIncompleteError, match="did not finish") as caught:
            drift.check(scan_unindexed=True, deadline=deadline)
        assert caught.value.unfinished == [f"segment {n} of 4" for n in range(4)]

    def test_an_index_read_past_its_deadline_fails_instead_of_reporting_a_partial_count(
        self, dynamo: Backend
    ) -> None:
        plant_drift(dynamo)
        # Given a clock that has reached the deadline before the first index read
        drift = checker(dynamo, clock=lambda: 100.0)
        with pytest.raises(KeyReadIncompleteError, match="did not finish"):
            drift.check(scan_unindexed=False, deadline=100.0)

    # ---- what is wrong now, judged against the state's routing -------------------------

    @pytest.mark.parametrize(
        ("state", "expected"),
        [
            # (unexpected legacy, unexpected sharded, misrouted, stray): the row on shard 30,
            # a key no reader of a 16-shard state reads, is unexpected sharded (every run
            # probes the keys above N), never stray
            ("legacy", (0, 3, 0, 0)),
            ("migrating", (0, 1, 1, 0)),
            ("sharded", (1, 1, 1, 0)),
            ("rolling-back", (0, 1, 1, 0)),
            ("resharding-16-32", (1, 0, 1, 0)),
            ("sharded-32", (1, 0, 2, 0)),
        ],
    )
    def test_the_wrong_now_counts_follow_the_state(
        self, dynamo: Backend, state: str, expected: tuple[int, int, int, int]
    ) -> None:
        # Given p-1's rows on legacy, on its 16-shard key (14), on its 32-shard key (30) and on
        # a key that is p-1's in no layout (3)
        dynamo.put_saga("l", "p-1")
        dynamo.put_saga("s16", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 16))
        dynamo.put_saga("s32", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 32))
        dynamo.put_saga("bad", "p-1", gsi4pk=keys.sharded_gsi4pk(3))
        # When the checks run against the state
        report = DriftChecker(dynamo.client, dynamo.table_name, routing=ROUTINGS[state]).check(
            scan_unindexed=True
        )
        # Then each wrong-now count is the state's, and the raw counts do not change
        got = (
            report.unexpected_legacy_rows,
            report.unexpected_sharded_rows,
            report.misrouted_rows,
            report.stray_rows,
        )
        assert got == expected
        assert report.legacy_rows == 1
        assert report.healthy is False
        if report.misrouted_rows:
            bad = next(r for r in report.misrouted if r.saga_id == "bad")
            assert bad.expected_gsi4pk == ROUTINGS[state].write_key("p-1")

    def test_a_clean_split_in_progress_is_healthy(self, dynamo: Backend) -> None:
        for n in range(8):
            person = f"person-{n}"
            count = 16 if n % 2 else 32
            dynamo.put_saga(f"s{n}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, count))
        report = DriftChecker(
            dynamo.client, dynamo.table_name, routing=ROUTINGS["resharding-16-32"]
        ).check(scan_unindexed=True)
        assert report.healthy, report.findings()
        assert report.shard_count == 32
        assert report.sharded_rows == 8
        assert report.to_dict()["phase"] == "resharding"

    def test_a_missing_record_is_judged_over_its_history_and_reported(
        self, dynamo: Backend
    ) -> None:
        # Given the STATE item of sharded(16) deleted, its history (migrating -> sharded) left
        seed_state(dynamo.client, dynamo.table_name, Layout.sharded(16))
        delete_state(dynamo.client, dynamo.table_name)
        dynamo.put_saga("l", "p-1")
        state = ControlStore(dynamo.client, dynamo.table_name).read()
        report = DriftChecker(dynamo.client, dynamo.table_name, state=state).check(
            scan_unindexed=False
        )
        # Then the legacy row is not wrong now (readers still read legacy), the record is
        assert report.control_record_missing
        assert report.unexpected_legacy_rows == 0
        assert report.findings() == [
            "the control record's STATE item is missing (history ends at version 1): readers "
            "read every layout that history names; restore the record from its history"
        ]

    def test_a_row_on_any_shard_key_is_unexpected_while_the_record_says_legacy(
        self, dynamo: Backend
    ) -> None:
        # Given a control partition lost after sharded(32): rows on #3 (within the 16 keys the
        # every-run reads cover) and on #24 (beyond them), and none on the legacy key
        dynamo.put_saga("low", "p-low", gsi4pk=keys.sharded_gsi4pk(3))
        dynamo.put_saga("high", "p-high", gsi4pk=keys.sharded_gsi4pk(24))
        state = ControlStore(dynamo.client, dynamo.table_name).read()
        assert state.version == 0  # never migrated, as every reader now believes
        drift = DriftChecker(dynamo.client, dynamo.table_name, state=state)
        # When the every-run checks run (no scan), then both count, so the alarm sees them
        every_run = drift.check(scan_unindexed=False)
        assert every_run.unexpected_sharded_rows == 2
        assert sorted(r.gsi4pk for r in every_run.unexpected_sharded) == [
            "RenewalSaga#24",
            "RenewalSaga#3",
        ]
        assert not every_run.healthy
        # And the scan does not count the row beyond N again, nor as a stray
        scanned = drift.check(scan_unindexed=True)
        assert (scanned.unexpected_sharded_rows, scanned.stray_rows) == (2, 0)

    def test_a_row_at_or_above_4n_is_the_scans_stray_row(self, dynamo: Backend) -> None:
        # Given a row on #100 while the record says legacy (N = 16): beyond the keys the every
        # run probes (N .. 4N-1, the next two splits), as a writer with its own N = 128 leaves
        dynamo.put_saga("far", "p-far", gsi4pk=keys.sharded_gsi4pk(100))
        drift = DriftChecker(
            dynamo.client,
            dynamo.table_name,
            state=ControlStore(dynamo.client, dynamo.table_name).read(),
        )
        # When the every-run checks run, then they do not reach it (48 probes, not 1,008)
        assert drift.check(scan_unindexed=False).unexpected_sharded_rows == 0
        # And the scan counts it as stray, whose alarm pages on one scan
        scanned = drift.check(scan_unindexed=True)
        assert scanned.stray_rows == 1
        assert [r.gsi4pk for r in scanned.stray] == ["RenewalSaga#100"]
        assert not scanned.healthy

    @pytest.mark.parametrize("person", [None, 42, "", "p-1"])
    def test_a_row_on_the_legacy_key_in_sharded_is_drift_whatever_its_person(
        self, dynamo: Backend, person: Any
    ) -> None:
        # Given a row left on the legacy key in sharded(16), its personId unusable or not:
        # no reader of sharded reads that key, so no enumeration or sweep sees the saga
        dynamo.put_saga("left", person)
        report = checker(dynamo, "sharded").check(scan_unindexed=False)
        # Then it is wrong now, not merely anomalous
        assert report.unexpected_legacy_rows == 1
        assert report.anomalous_rows == 0
        assert [r.saga_id for r in report.unexpected_legacy] == ["left"]
        assert not report.healthy
