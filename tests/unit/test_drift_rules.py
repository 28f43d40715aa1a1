"""Pure rules of the drift guard: when to scan, what is drift in which phase, skew, pacing."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from saga_index.drift import DriftReport, RowRef, scan_due, shard_skew
from saga_index.dynamo.scan import ReadRateLimiter, SagaTableScanner, ScanOptions, _read_units
from saga_index.errors import InvalidInputError
from saga_index.model import Phase

N = 16


# ---- scan_due -------------------------------------------------------------------------------


def at(hhmm: str, day: int = 10) -> datetime:
    hours, minutes = hhmm.split(":")
    return datetime(2026, 7, day, int(hours), int(minutes), tzinfo=UTC)


def test_with_k_12_the_top_of_every_hour_scans_and_the_other_runs_do_not() -> None:
    assert scan_due(at("10:00"), every=12)
    assert not scan_due(at("10:05"), every=12)
    assert not scan_due(at("10:55"), every=12)
    assert scan_due(at("11:00"), every=12)


def test_scans_are_exactly_k_periods_apart_across_midnight() -> None:
    # Given every 5-minute run of two whole days
    start = datetime(2026, 7, 10, tzinfo=UTC)
    runs = [start + timedelta(minutes=5 * n) for n in range(2 * 288)]
    for every in (1, 7, 12, 144):
        scanned = [run for run in runs if scan_due(run, every=every)]
        gaps = {b - a for a, b in itertools.pairwise(scanned)}
        # Then the gap between two scans is always K periods, midnight included
        assert gaps == {timedelta(minutes=5 * every)}, every


def test_the_decision_depends_only_on_the_scheduled_time() -> None:
    # Scheduler retries carry the same scheduled time; a late start within the slot decides alike.
    assert scan_due(at("10:00"), every=12) == scan_due(at("10:00"), every=12)
    assert scan_due(at("10:00") + timedelta(seconds=59), every=12)
    eastern = timezone(timedelta(hours=-4))
    assert scan_due(datetime(2026, 7, 10, 6, 0, tzinfo=eastern), every=12)  # 10:00Z


@pytest.mark.parametrize("every", [0, 145, -1, True, 2.0])
def test_k_outside_1_to_144_is_rejected(every: Any) -> None:
    with pytest.raises(InvalidInputError, match="scan-every K"):
        scan_due(at("10:00"), every=every)


def test_a_scheduled_time_without_a_time_zone_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="time zone"):
        scan_due(datetime(2026, 7, 10, 10, 0), every=12)


# ---- what is drift, by phase ------------------------------------------------------------------


def report(phase: str, **counts: Any) -> DriftReport:
    rows_per_shard = dict.fromkeys(range(N), 0)
    rows_per_shard[3] = counts.pop("sharded", 0)
    values: dict[str, Any] = {
        "legacy_rows": 0,
        "misrouted_rows": 0,
        "anomalous_rows": 0,
        "unindexed_rows": 0,
        "stray_rows": 0,
        **counts,
    }
    return DriftReport(
        table_name="t",
        index_name="i",
        phase=Phase(phase),
        shard_count=N,
        rows_per_shard=rows_per_shard,
        **values,
    )


@pytest.mark.parametrize(
    ("counts", "drift_in"),
    [
        ({"legacy_rows": 2}, {"sharded"}),
        ({"sharded": 2}, {"legacy"}),
        ({"misrouted_rows": 1, "sharded": 1}, {"legacy", "migrating", "sharded", "rolling-back"}),
        ({"unindexed_rows": 1}, {"legacy", "migrating", "sharded", "rolling-back"}),
        ({"stray_rows": 1}, {"legacy", "migrating", "sharded", "rolling-back"}),
        ({"anomalous_rows": 3, "sharded": 3, "legacy_rows": 1}, {"legacy", "sharded"}),
        ({}, set()),
    ],
)
def test_what_counts_as_drift_depends_on_the_phase(
    counts: dict[str, int], drift_in: set[str]
) -> None:
    for phase in Phase:
        healthy = report(phase.value, **counts).healthy
        assert healthy is (phase.value not in drift_in), (phase, counts)


def test_anomalous_rows_alone_are_reported_but_not_drift() -> None:
    only_anomalies = report("migrating", anomalous_rows=2, sharded=2)
    assert only_anomalies.healthy
    assert only_anomalies.to_dict()["anomalousRows"] == 2


def test_a_run_without_the_scan_reports_unknown_not_zero() -> None:
    unscanned = report("sharded", unindexed_rows=None, stray_rows=None)
    document = unscanned.to_dict()
    assert document["unindexedRows"] is None
    assert document["scanned"] is False
    assert unscanned.healthy


def test_json_report_carries_the_contract_keys() -> None:
    document = report(
        "sharded",
        legacy_rows=1,
        misrouted_rows=1,
        misrouted=(RowRef("RSAGA#m", "META", "m", "p", "RenewalSaga#1", "RenewalSaga#2"),),
    ).to_dict()
    assert {"legacyRows", "misroutedRows", "unindexedRows", "rowsPerShard"} <= set(document)
    assert document["rowsPerShard"] == {str(n): 0 for n in range(N)}
    assert document["misrouted"] == [
        {
            "PK": "RSAGA#m",
            "SK": "META",
            "sagaId": "m",
            "personId": "p",
            "gsi4pk": "RenewalSaga#1",
            "expectedGsi4pk": "RenewalSaga#2",
        }
    ]


# ---- skew ------------------------------------------------------------------------------------


def test_skew_is_max_over_mean_and_zero_when_nothing_is_sharded() -> None:
    assert shard_skew(dict.fromkeys(range(4), 0), 4) == 0.0
    assert shard_skew(dict.fromkeys(range(4), 5), 4) == 1.0
    assert shard_skew({0: 6, 1: 2, 2: 0, 3: 0}, 4) == 3.0


# ---- pacing the scan ---------------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_limiter_makes_the_next_read_wait_for_what_the_last_one_cost() -> None:
    time = FakeTime()
    limiter = ReadRateLimiter(50, clock=time.clock, sleep=time.sleep)
    limiter.wait()
    assert time.slept == []
    limiter.spend(100)
    limiter.wait()
    assert time.slept == [2.0]
    assert limiter.units_spent == 100


class PagedScanClient:
    """Five pages of one saga row each, every page costing 10 read units."""

    def __init__(self) -> None:
        self.calls = 0

    def scan(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        page: dict[str, Any] = {
            "Items": [{"PK": {"S": f"RSAGA#s{self.calls}"}, "SK": {"S": "META"}}],
            "ScannedCount": 1,
            "ConsumedCapacity": {"CapacityUnits": 10.0},
        }
        if self.calls < 5:
            page["LastEvaluatedKey"] = {"PK": {"S": f"RSAGA#s{self.calls}"}, "SK": {"S": "META"}}
        return page


def test_the_scan_averages_no_more_than_its_read_budget() -> None:
    time = FakeTime()
    client = PagedScanClient()
    scanner = SagaTableScanner(
        client,
        "t",
        options=ScanOptions(segments=1, read_units_per_second=10),
        clock=time.clock,
        sleep=time.sleep,
    )
    result = scanner.scan()
    assert len(result.items) == 5
    assert result.read_units == 50
    # 50 units at 10 units/s: the first page goes at once, each next one waits for the last
    assert time.slept == [1.0, 1.0, 1.0, 1.0]


def test_read_units_come_from_dynamodb_when_it_reports_them() -> None:
    assert _read_units({"ConsumedCapacity": {"CapacityUnits": 12.5}}, consistent=False) == 12.5


def test_read_units_are_estimated_when_the_server_does_not_report_them() -> None:
    # 7 filtered-out rows at 1 KB each, nothing returned: 7 KB = two 4 KB units, halved
    assert _read_units({"Items": [], "ScannedCount": 7}, consistent=False) == 1.0
    assert _read_units({"Items": [], "ScannedCount": 7}, consistent=True) == 2.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"segments": 0}, "segments"),
        ({"segments": 65}, "segments"),
        ({"page_size": 0}, "page size"),
        ({"read_units_per_second": 0}, "scan rate"),
        ({"read_units_per_second": float("inf")}, "scan rate"),
    ],
)
def test_scan_options_outside_their_bounds_are_rejected(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ScanOptions(**kwargs)
