"""Pure rules of the drift guard: when to scan, what is wrong now in which state, skew, pacing."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError, InvalidKeyError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.checks.drift import DriftReport, RowRef, scan_due
from saga_index.layout_change.checks.drift._report import shard_skew
from saga_index.layout_change.checks.expectations import Expectations, Verdict
from saga_index.layout_change.record.routing import Routing
from saga_index.store.dynamo.scan import ReadRateLimiter, SagaTableScanner, ScanOptions, _read_units

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


# ---- what is wrong now, by state --------------------------------------------------------------

S16, S32 = Layout.sharded(16), Layout.sharded(32)
STATES: dict[str, Routing] = {
    "legacy": Routing.between(LEGACY),
    "migrating": Routing.between(LEGACY, S16),
    "sharded": Routing.between(S16),
    "rolling-back": Routing.between(S16, LEGACY),
    "resharding 16->32": Routing.between(S16, S32),
}


def report(state: str = "sharded", **counts: Any) -> DriftReport:
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
        routing=STATES[state],
        shard_count=N,
        rows_per_shard=rows_per_shard,
        **values,
    )


@pytest.mark.parametrize(
    "counts",
    [
        {"unexpected_legacy_rows": 2},
        {"unexpected_sharded_rows": 2},
        {"misrouted_rows": 1},
        {"unindexed_rows": 1},
        {"stray_rows": 1},
        {"control_record_missing": True, "record_version": 3},
    ],
)
def test_every_wrong_now_count_is_drift_in_every_state(counts: dict[str, Any]) -> None:
    for state in STATES:
        assert not report(state, **counts).healthy, (state, counts)


def test_raw_counts_alone_are_never_drift() -> None:
    # The raw counts feed the dashboard; what is wrong is judged by the checker into the
    # wrong-now counts, against the state's layouts.
    for state in STATES:
        assert report(state, legacy_rows=5, sharded=5, anomalous_rows=2).healthy, state


# Rows: (GSI4PK, personId). p-1 is shard 14 of 16 and 30 of 32.
P1_16 = keys.shard_gsi4pk_for_person("p-1", 16)
P1_32 = keys.shard_gsi4pk_for_person("p-1", 32)
P1_WRONG = keys.sharded_gsi4pk(3)


@pytest.mark.parametrize(
    ("state", "gsi4pk", "verdict"),
    [
        ("legacy", keys.LEGACY_GSI4PK, "ok"),
        ("legacy", P1_16, "unexpected-sharded"),
        ("migrating", keys.LEGACY_GSI4PK, "ok"),
        ("migrating", P1_16, "ok"),
        ("migrating", P1_WRONG, "misrouted"),
        ("sharded", keys.LEGACY_GSI4PK, "unexpected-legacy"),
        ("sharded", P1_16, "ok"),
        ("sharded", P1_WRONG, "misrouted"),
        ("rolling-back", keys.LEGACY_GSI4PK, "ok"),
        ("rolling-back", P1_16, "ok"),
        ("rolling-back", P1_WRONG, "misrouted"),
        # A split: the source key is "not yet moved", the target key is where it goes.
        ("resharding 16->32", P1_16, "ok"),
        ("resharding 16->32", P1_32, "ok"),
        ("resharding 16->32", P1_WRONG, "misrouted"),
        ("resharding 16->32", keys.LEGACY_GSI4PK, "unexpected-legacy"),
    ],
)
def test_where_a_row_may_sit_in_each_state(state: str, gsi4pk: str, verdict: str) -> None:
    row = {"PK": "RSAGA#s", "SK": "META", "personId": "p-1", "GSI4PK": gsi4pk}
    row["GSI4SK"] = "p-1#2026-01-01T00:00:00.000Z"
    assert Expectations(STATES[state]).judge(row) == verdict


def test_an_unroutable_row_is_anomalous_on_a_key_the_state_reads_and_drift_elsewhere() -> None:
    anonymous = {"PK": "RSAGA#s", "SK": "META", "GSI4SK": "#2026-01-01T00:00:00.000Z"}
    sharded = Expectations(STATES["sharded"])
    legacy = Expectations(STATES["legacy"])
    assert sharded.judge({**anonymous, "GSI4PK": P1_16}) is Verdict.ANOMALOUS
    assert legacy.judge({**anonymous, "GSI4PK": P1_16}) is Verdict.UNEXPECTED_SHARDED
    # On the legacy key in sharded no reader reads it, so no sweep sees the saga: drift,
    # although the backfill cannot move it (repair-anomaly does).
    assert sharded.judge({**anonymous, "GSI4PK": keys.LEGACY_GSI4PK}) is (Verdict.UNEXPECTED_LEGACY)


def test_a_key_that_is_neither_legacy_nor_a_shard_key_is_left_to_the_scan() -> None:
    with pytest.raises(InvalidKeyError):
        Expectations(STATES["sharded"]).judge({"GSI4PK": "RenewalSaga#x"})


def test_the_guard_watches_the_largest_shard_count_a_state_names() -> None:
    assert Expectations(STATES["legacy"]).shard_count == 16
    assert Expectations(STATES["migrating"]).shard_count == 16
    assert Expectations(STATES["resharding 16->32"]).shard_count == 32
    assert Expectations(Routing.between(Layout.sharded(64), S32)).shard_count == 64


def test_a_missing_record_is_named_first_with_its_history_version() -> None:
    findings = report("sharded", control_record_missing=True, record_version=4).findings()
    assert findings[0].startswith("the control record's STATE item is missing")
    assert "version 4" in findings[0]


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
        unexpected_legacy_rows=1,
        misrouted_rows=1,
        misrouted=(RowRef("RSAGA#m", "META", "m", "p", "RenewalSaga#1", "RenewalSaga#2"),),
    ).to_dict()
    assert {
        "legacyRows",
        "unexpectedLegacyRows",
        "unexpectedShardedRows",
        "controlRecordMissing",
        "misroutedRows",
        "unindexedRows",
        "rowsPerShard",
    } <= set(document)
    assert (document["phase"], document["source"], document["target"]) == (
        "sharded",
        "sharded(16)",
        "sharded(16)",
    )
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
