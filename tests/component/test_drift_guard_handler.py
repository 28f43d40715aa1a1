"""The drift-guard Lambda on moto: the EMF it prints is parsed back, zeros included. The state it
judges against is the control record's (planted in the table), never the environment's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from pydantic import ValidationError

from handlers import runtime
from handlers.drift_guard import handler
from saga_index.index import Person, keys, names
from saga_index.index.errors import EnumerationError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.open_index import OpenIndexState
from saga_index.layout_change.record.provider import ControlProvider
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import ControlTiming
from tests.support.backends import Backend, make_backend
from tests.support.control_seed import delete_state, seed_open_index, seed_state
from tests.support.drift_contract import N, plant_drift
from tests.support.faults import ThrottleInjector, queries_partition
from tests.support.lambda_harness import (
    Datapoint,
    FakeLambdaContext,
    as_function,
    emf_datapoints,
)
from tests.support.open_index import add_open_index

# The failure paths end with nothing to flush, which Powertools warns about: expected there.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

NAMESPACE = "RenewalSagaIndex"
SERVICE = "drift-guard"
EVERY_RUN = (
    "LegacyRows",
    "ShardedRows",
    "UnexpectedLegacyRows",
    "UnexpectedShardedRows",
    "MisroutedRows",
    "AnomalousRows",
    "ShardSkew",
    "ControlRecordMissing",
    "DriftReadIncomplete",
    "DriftReadPercent",
)
SCAN_ONLY = (
    "UnindexedRows",
    "StrayRows",
    "ScannedSagaRows",
    "OpenIndexMissingRows",
    "OpenIndexStrayRows",
    "OpenIndexUnstampedRows",
)
# With K = 12 and the 5-minute schedule, the top of the hour scans and 10:05 does not.
SCAN_TIME = "2026-07-10T10:00:00Z"
NO_SCAN_TIME = "2026-07-10T10:05:00Z"


@pytest.fixture
def dynamo(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("guard", synthesized_template, endpoint_url=None)
        seed_state(backend.client, backend.table_name, Layout.sharded(N))
        for name, value in {
            "SAGA_TABLE_NAME": backend.table_name,
            "SAGA_INDEX_NAME": names.INDEX_NAME,
            "SAGA_INDEX_MAX_ATTEMPTS": "2",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
            "DRIFT_SCAN_EVERY": "12",
            "DRIFT_GUARD_PERIOD_MINUTES": "5",
        }.items():
            monkeypatch.setenv(name, value)
        with as_function(monkeypatch, SERVICE):
            yield backend


def invoke(scheduled_time: str, **event: Any) -> dict[str, Any]:
    payload = {
        "job": "drift-guard",
        "scheduledTime": scheduled_time,
        "executionId": "exec-1",
        "attempt": 1,
        **event,
    }
    context = FakeLambdaContext(function_name=SERVICE, remaining_ms=240_000)
    result: dict[str, Any] = handler(payload, context)
    return result


def by_name(points: list[Datapoint]) -> dict[str, Datapoint]:
    return {p.name: p for p in points if p.name != "RowsPerShard"}


def test_a_scanning_run_publishes_every_metric_with_the_exact_planted_counts(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a table with planted drift
    planted = plant_drift(dynamo)
    # When the guard runs at a scheduled time that scans
    result = invoke(SCAN_TIME)
    points = emf_datapoints(capsys.readouterr().out)
    # Then every metric is there, in the namespace, with the table and index dimensions
    metrics = by_name(points)
    assert set(metrics) == set(EVERY_RUN) | set(SCAN_ONLY)
    expected_dimensions = {
        "service": SERVICE,
        "TableName": dynamo.table_name,
        "IndexName": names.INDEX_NAME,
    }
    for point in metrics.values():
        assert point.namespace == NAMESPACE
        assert point.dimensions == expected_dimensions
    assert metrics["LegacyRows"].value == planted.legacy
    assert metrics["UnexpectedLegacyRows"].value == planted.legacy
    assert metrics["UnexpectedShardedRows"].value == 0
    assert metrics["ControlRecordMissing"].value == 0
    assert metrics["MisroutedRows"].value == planted.misrouted
    assert metrics["UnindexedRows"].value == planted.unindexed
    assert metrics["StrayRows"].value == planted.stray
    assert metrics["AnomalousRows"].value == planted.anomalous
    assert metrics["ScannedSagaRows"].value == planted.saga_rows
    assert metrics["ShardedRows"].value == sum(planted.rows_per_shard.values())
    assert metrics["LegacyRows"].unit == "Count"
    # And one RowsPerShard datapoint per shard, each with its Shard dimension
    per_shard = {int(p.dimensions["Shard"]): p.value for p in points if p.name == "RowsPerShard"}
    assert per_shard == planted.rows_per_shard
    for point in points:
        if point.name == "RowsPerShard":
            assert point.dimensions == {**expected_dimensions, "Shard": point.dimensions["Shard"]}
    # And the invocation returns the report
    assert result["healthy"] is False
    assert result["legacyRows"] == planted.legacy
    assert result["unindexedRows"] == planted.unindexed


def test_a_clean_table_publishes_zeros_not_nothing(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    result = invoke(SCAN_TIME)
    points = emf_datapoints(capsys.readouterr().out)
    metrics = by_name(points)
    assert {name: metrics[name].value for name in (*EVERY_RUN, *SCAN_ONLY)} == {
        **dict.fromkeys((*EVERY_RUN, *SCAN_ONLY), 0),
        "DriftReadPercent": 100,  # the read is complete: a verdict, of zeros
    }
    assert sorted(int(p.dimensions["Shard"]) for p in points if p.name == "RowsPerShard") == list(
        range(N)
    )
    assert all(p.value == 0 for p in points if p.name == "RowsPerShard")
    assert result["healthy"] is True


def test_a_run_that_does_not_scan_publishes_every_run_metric_and_no_scan_metric(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = plant_drift(dynamo)
    result = invoke(NO_SCAN_TIME)
    metrics = by_name(emf_datapoints(capsys.readouterr().out))
    assert set(metrics) == set(EVERY_RUN)
    assert metrics["LegacyRows"].value == planted.legacy
    assert result["scanned"] is False
    assert result["unindexedRows"] is None


def test_the_report_is_logged_as_structured_json(
    dynamo: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    plant_drift(dynamo)
    invoke(SCAN_TIME)
    (record,) = [r for r in caplog.records if r.getMessage().startswith("drift report")]
    assert record.levelname == "WARNING"
    assert record.getMessage() == "drift report: DRIFT"
    report = record.__dict__["report"]
    assert report["legacyRows"] == 3
    assert report["unindexedRows"] == 2
    assert report["findings"]
    json.dumps(report)  # JSON-serialisable as logged


def test_an_enumeration_failure_fails_the_invocation_and_publishes_no_drift_metric(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a shard that stays throttled through every retry
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    client = dynamo.new_client(max_attempts=2)
    hot = keys.shard_gsi4pk_for_person("p-1", N)
    ThrottleInjector(client, "Query", times=None, match=queries_partition(hot))
    runtime.clients.use(dynamodb=client)
    # When the guard runs, then the invocation fails naming the shard
    with pytest.raises(EnumerationError, match=hot):
        invoke(SCAN_TIME)
    # And no partial count was published as if it were the truth
    assert [p for p in emf_datapoints(capsys.readouterr().out) if p.name in EVERY_RUN] == []


# ---- the open-saga index, while the sweeps read it ---------------------------------------------


def open_index_in_use(dynamo: Backend, monkeypatch: pytest.MonkeyPatch) -> str:
    """The record's open index `open`, the re-check not waiting; one open saga stamped, one
    a writer left unstamped, one closed saga left stamped. The unstamped one's open key."""
    monkeypatch.setenv("DRIFT_OPEN_INDEX_RECHECK_SECONDS", "0")
    add_open_index(dynamo.client, dynamo.table_name)
    seed_open_index(dynamo.client, dynamo.table_name, Layout.sharded(N), N)
    open_key = names.OPEN_INDEX_PARTITION_KEY
    for saga_id, person, state, stamped in (
        ("ok", "p-1", "OPENED", True),
        ("unstamped", "p-2", "OPENED", False),
        ("closed", "p-3", "SIGNED", True),
    ):
        stamp = {open_key: Person.of(person).open_index_pk(N)} if stamped else {}
        dynamo.put_saga(saga_id, person, gsi4pk="shard", state=state, **stamp)
    return Person.of("p-2").open_index_pk(N)


def test_a_scanning_run_publishes_the_open_index_counts_and_logs_each_repair(
    dynamo: Backend,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    open_index_in_use(dynamo, monkeypatch)

    result = invoke(SCAN_TIME)

    metrics = by_name(emf_datapoints(capsys.readouterr().out))
    assert metrics["OpenIndexMissingRows"].value == 1
    assert metrics["OpenIndexStrayRows"].value == 1
    assert (result["openIndexMissingRows"], result["openIndexStrayRows"]) == (1, 1)
    assert result["healthy"] is False
    (record,) = [r for r in caplog.records if r.getMessage() == "drift report: DRIFT"]
    report = record.__dict__["report"]
    assert [row["pk"] for row in report["openIndexMissing"]] == ["RSAGA#unstamped"]
    assert [row["pk"] for row in report["openIndexStray"]] == ["RSAGA#closed"]
    assert report["openIndexMissing"][0]["repairCommand"].startswith(
        f"saga-index --table {dynamo.table_name} repair-anomaly --pk 'RSAGA#unstamped'"
    )


def test_an_open_index_read_that_fails_publishes_no_scan_count(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one of the open index's keys throttled through every retry
    hot = open_index_in_use(dynamo, monkeypatch)
    client = dynamo.new_client(max_attempts=2)
    ThrottleInjector(client, "Query", times=None, match=queries_partition(hot))
    runtime.clients.use(dynamodb=client)
    # When a scanning run reaches it, then the invocation fails
    with pytest.raises(ClientError):
        invoke(SCAN_TIME)
    # And no open-index count (nor any scan count) is published: a read that did not finish
    # is never a zero
    points = emf_datapoints(capsys.readouterr().out)
    assert [p.name for p in points if p.name in SCAN_ONLY] == []


@pytest.mark.parametrize(
    "event",
    [
        {"job": "stuck-saga-sweep"},
        {"scheduledTime": "not a time"},
        {"scheduledTime": "2026-07-10T10:00:00"},  # no time zone
    ],
)
def test_an_event_that_is_not_the_drift_guard_schedule_is_rejected(
    dynamo: Backend, event: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        invoke(event.pop("scheduledTime", SCAN_TIME), **event)


def test_a_bad_scan_setting_is_rejected_naming_it(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRIFT_SCAN_EVERY", "0")
    with pytest.raises(ValidationError, match="DRIFT_SCAN_EVERY"):
        invoke(SCAN_TIME)


@pytest.mark.parametrize("units", ["128", "3001", "fast"])
def test_a_pace_that_cannot_hold_is_rejected_naming_it(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch, units: str
) -> None:
    # At most one 1 MB page (128 units) would leave no pace at all; above 3,000 is more than
    # a partition serves.
    monkeypatch.setenv("DRIFT_INDEX_READ_UNITS_PER_KEY", units)
    with pytest.raises(ValidationError, match="DRIFT_INDEX_READ_UNITS_PER_KEY"):
        invoke(SCAN_TIME)


# ---- the state comes from the control record ---------------------------------------------------


def test_a_table_that_never_migrated_is_judged_legacy(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no control record at all (no STATE, no history): never migrated, legacy
    dynamo.client.delete_item(
        TableName=dynamo.table_name,
        Key={"PK": {"S": "RSAGA_INDEX#CONTROL"}, "SK": {"S": "HISTORY#0000000001"}},
    )
    delete_state(dynamo.client, dynamo.table_name)
    dynamo.put_saga("l1", "p-1")
    dynamo.put_saga("s1", "p-2", gsi4pk="shard")
    result = invoke(NO_SCAN_TIME)
    metrics = by_name(emf_datapoints(capsys.readouterr().out))
    # Then legacy rows are expected and the sharded row is what is wrong now
    assert result["phase"] == "legacy"
    assert metrics["UnexpectedLegacyRows"].value == 0
    assert metrics["UnexpectedShardedRows"].value == 1
    assert metrics["ControlRecordMissing"].value == 0


def test_a_deleted_state_item_publishes_control_record_missing_and_still_judges(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the record was sharded(16) (history version 1: migrating -> sharded), then its STATE
    # item was deleted; a legacy row and a correctly sharded row remain
    delete_state(dynamo.client, dynamo.table_name)
    dynamo.put_saga("l1", "p-1")
    dynamo.put_saga("s1", "p-2", gsi4pk="shard")
    result = invoke(NO_SCAN_TIME)
    metrics = by_name(emf_datapoints(capsys.readouterr().out))
    # Then the guard pages on the record, and judges over both layouts the history names (it
    # reads legacy then the shards, as readers do), so neither row is wrong now
    assert metrics["ControlRecordMissing"].value == 1
    assert result["controlRecordMissing"] is True
    assert result["healthy"] is False
    assert any("STATE item is missing" in f for f in result["findings"])
    assert metrics["UnexpectedLegacyRows"].value == 0
    assert metrics["UnexpectedShardedRows"].value == 0
    assert metrics["MisroutedRows"].value == 0


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_guard_follows_a_record_change_within_t(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a warm execution environment whose provider has read sharded(16), with T = 30 s
    ticks = Ticks()
    timing = ControlTiming(cache_seconds=30)
    store = ControlStore(dynamo.client, dynamo.table_name)
    provider = ControlProvider(store, timing=timing, clock=ticks)
    runtime.control.use(provider)
    dynamo.put_saga("l1", "p-1")
    assert invoke(NO_SCAN_TIME)["unexpectedLegacyRows"] == 1
    # When an operator aborts to rolling-back (legacy rows are then the target)
    seed_state(
        dynamo.client,
        dynamo.table_name,
        Layout.sharded(N),
        LEGACY,
        version=2,
        previous=(Layout.sharded(N), None),
    )
    # Then within T the guard may still judge the old state, and after T it judges the new one
    ticks.now += 29
    assert invoke(NO_SCAN_TIME)["phase"] == "sharded"
    ticks.now += 1
    after = invoke(NO_SCAN_TIME)
    assert after["phase"] == "rolling-back"
    assert after["unexpectedLegacyRows"] == 0
    capsys.readouterr()


def _warm_guard_with_an_open_index(dynamo: Backend, monkeypatch: pytest.MonkeyPatch) -> Ticks:
    """A warm execution environment whose provider caches the record for 30 s on the returned
    clock, the open-saga index on the table, the open index re-checked at once."""
    monkeypatch.setenv("DRIFT_OPEN_INDEX_RECHECK_SECONDS", "0")
    ticks = Ticks()
    store = ControlStore(dynamo.client, dynamo.table_name)
    runtime.control.use(ControlProvider(store, timing=ControlTiming(cache_seconds=30), clock=ticks))
    add_open_index(dynamo.client, dynamo.table_name)
    return ticks


def test_the_guard_compares_the_open_index_from_t_after_it_opens(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a warm execution environment whose provider read sharded(16), open index off, and an
    # open saga no writer stamped (out of an open index, were the sweeps reading one)
    ticks = _warm_guard_with_an_open_index(dynamo, monkeypatch)
    dynamo.put_saga("unstamped", "p-2", gsi4pk="shard")
    assert invoke(SCAN_TIME)["openIndexMissingRows"] == 0  # off: nobody reads it
    # When an operator opens the open index
    seed_open_index(dynamo.client, dynamo.table_name, Layout.sharded(N), N, version=2)
    # Then within T the guard may still judge the state before, and from T on it compares
    ticks.now += 29
    assert invoke(SCAN_TIME)["openIndexMissingRows"] == 0
    ticks.now += 1
    assert invoke(SCAN_TIME)["openIndexMissingRows"] == 1
    capsys.readouterr()


def test_the_guard_compares_the_open_index_in_adding_from_t_after_it_says_so(
    dynamo: Backend,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a warm execution environment whose provider read sharded(16), open index off; an
    # open saga from before `adding` (no OpenSagaPK) and a closed one a writer left stamped
    ticks = _warm_guard_with_an_open_index(dynamo, monkeypatch)
    dynamo.put_saga("unstamped", "p-2", gsi4pk="shard")
    stamp = {names.OPEN_INDEX_PARTITION_KEY: Person.of("p-3").open_index_pk(N)}
    dynamo.put_saga("kept", "p-3", gsi4pk="shard", state="SIGNED", **stamp)
    assert invoke(SCAN_TIME)["openIndexStrayRows"] == 0  # off: not compared
    # When an operator sets the open index `adding` (the record's switch long settled)
    seed_open_index(
        dynamo.client, dynamo.table_name, Layout.sharded(N), N, state=OpenIndexState.ADDING
    )
    # Then within T the guard may still judge the state before
    ticks.now += 29
    assert invoke(SCAN_TIME)["openIndexStrayRows"] == 0
    capsys.readouterr()
    # And from T on it compares: the closed saga pages (OpenIndexStrayRows, as in `open`), the
    # open saga not stamped yet is counted apart (OpenIndexUnstampedRows) and is not missing
    ticks.now += 1
    result = invoke(SCAN_TIME)
    metrics = by_name(emf_datapoints(capsys.readouterr().out))
    assert metrics["OpenIndexStrayRows"].value == 1
    assert result["healthy"] is False
    assert metrics["OpenIndexMissingRows"].value == 0
    assert metrics["OpenIndexUnstampedRows"].value == 1
    counts = ("openIndexUnstampedRows", "openIndexMissingRows", "openIndexStrayRows")
    assert tuple(result[key] for key in counts) == (1, 0, 1)
    (record,) = [r for r in caplog.records if r.getMessage() == "drift report: DRIFT"]
    report = record.__dict__["report"]
    assert report["openIndex"] == f"adding({N})"
    assert [row["pk"] for row in report["openIndexStray"]] == ["RSAGA#kept"]
    assert [row["pk"] for row in report["openIndexUnstamped"]] == ["RSAGA#unstamped"]
    # And once the closed saga is repaired, the run is healthy with the unstamped still counted
    dynamo.put_saga("kept", "p-3", gsi4pk="shard", state="SIGNED")
    healed = invoke(SCAN_TIME)
    assert healed["healthy"] is True
    assert (healed["openIndexUnstampedRows"], healed["openIndexStrayRows"]) == (1, 0)
    capsys.readouterr()
