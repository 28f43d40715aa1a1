"""`saga-index status` against moto: the record, the backfill's lease/throttle/pause/last run, the
row counts, the drift summary and the deployed alarms, as JSON and on one screen."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.layout_change.lease.controls import pause_backfill, set_throttle
from saga_index.layout_change.lease.grant import acquire_lease, heartbeat_lease, release_lease
from saga_index.layout_change.record.items import state_key
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.codec import serialize
from saga_index_cli.context import CliContext, CliHooks
from saga_index_cli.main import main
from saga_index_cli.status.report import alarm_states
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, moto_fixtures, set_phase
from tests.support.control_seed import seed_state

dynamo, clock, store = moto_fixtures("status-cli")


def run(
    capsys: pytest.CaptureFixture[str], dynamo: Backend, clock: Clock, *argv: str
) -> tuple[int, str, str]:
    hooks = CliHooks(identity=lambda _: "tester@host", clock=clock)
    with pytest.raises(SystemExit) as exited:
        main(["--table", dynamo.table_name, "status", *argv], hooks=hooks)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def status_json(
    capsys: pytest.CaptureFixture[str], dynamo: Backend, clock: Clock, *argv: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, dynamo, clock, "--json", *argv)
    (line,) = out.splitlines()
    return code, json.loads(line)


def test_a_never_migrated_table(
    dynamo: Backend, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("s1", "p-1")
    dynamo.put_saga("s2", "p-2")
    code, doc = status_json(capsys, dynamo, clock)
    assert code == 0
    assert (doc["phase"], doc["version"], doc["condition"]) == ("legacy", 0, "never-migrated")
    assert (doc["effectiveAt"], doc["effective"]) == (None, True)
    assert doc["backfill"] == {
        "lease": None,
        "maxWritesPerSecond": None,
        "paused": False,
        "lastRun": None,
        "nextMove": None,
    }
    rows = doc["rows"]
    assert (rows["counted"], rows["legacy"], rows["sharded"], rows["shardCount"]) == (
        True,
        2,
        0,
        16,
    )
    assert (doc["drift"], doc["alarms"]) == (None, None)


def test_migrating_with_a_running_throttled_paused_backfill(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("old", "p-1")
    dynamo.put_saga("new", "p-2", gsi4pk="shard")
    set_phase(store, "migrating", changed_by="ops", reason="start", clock=clock)

    code, doc = status_json(capsys, dynamo, clock)
    assert (doc["phase"], doc["version"], doc["effective"]) == ("migrating", 1, False)
    assert doc["secondsUntilEffective"] == 75.0

    clock.advance(80)
    acquire_lease(store, holder="ops@laptop", token="t-1", direction="forward", clock=clock)
    # the run's heartbeat reports the pace its pacer chose, and why
    pace = "25/s of 50/s (IndexWriteKeyRangeThroughputExceeded)"
    heartbeat_lease(store, token="t-1", clock=clock, pace=pace)
    set_throttle(store, 50, changed_by="ops", clock=clock)
    pause_backfill(store, changed_by="ops", clock=clock)
    code, doc = status_json(capsys, dynamo, clock)
    assert code == 0
    assert doc["effective"] is True
    backfill = doc["backfill"]
    assert backfill["lease"] == {
        "holder": "ops@laptop",
        "direction": "forward",
        "kind": "layout",
        "acquiredAt": "2026-03-01T09:01:20.000Z",
        "heartbeatAt": "2026-03-01T09:01:20.000Z",
        "expiresAt": "2026-03-01T09:03:20.000Z",
        "live": True,
        "stateVersion": 1,
        "pace": pace,
    }
    assert (backfill["maxWritesPerSecond"], backfill["paused"]) == (50, True)
    assert backfill["nextMove"]["to"] == "sharded"
    assert backfill["nextMove"]["backfillCheck"]["passed"] is False
    assert (doc["rows"]["legacy"], doc["rows"]["sharded"]) == (1, 1)

    clock.advance(200)  # the holder stopped heartbeating
    code, doc = status_json(capsys, dynamo, clock)
    assert doc["backfill"]["lease"]["live"] is False


def test_the_last_run_and_whether_it_satisfies_the_next_move(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    from saga_index.layout_change.record.state import BackfillCompletion, BackfillDirection

    set_phase(store, "migrating", changed_by="ops", reason="start", clock=clock)
    clock.advance(80)
    grant = acquire_lease(store, holder="run", token="t", direction="forward", clock=clock)
    started = clock.now
    clock.advance(10)
    release_lease(
        store,
        token="t",
        completion=BackfillCompletion(
            direction=BackfillDirection.FORWARD,
            source=grant.source,
            target=grant.target,
            state_version=1,
            started_at=started,
            completed_at=clock.now,
            scanned=5,
            restamped=4,
            anomalies=1,
            complete=True,
            verified=True,
            holder="run",
            lease_token="t",
        ),
        clock=clock,
    )
    code, doc = status_json(capsys, dynamo, clock)
    assert code == 0
    run_doc = doc["backfill"]["lastRun"]
    assert run_doc["source"] == {"layout": "legacy", "shardCount": None}
    assert run_doc["target"] == {"layout": "sharded", "shardCount": 16}
    assert (run_doc["scanned"], run_doc["restamped"], run_doc["anomalies"]) == (5, 4, 1)
    assert (run_doc["complete"], run_doc["verified"], run_doc["stateVersion"]) == (True, True, 1)
    assert doc["backfill"]["lease"] is None
    assert doc["backfill"]["nextMove"]["backfillCheck"]["passed"] is True

    _, out, _ = run(capsys, dynamo, clock)
    assert "last run: forward legacy -> sharded(16) under version 1" in out
    assert "for `phase set sharded`: backfill-verified passes" in out


def test_drift_is_opt_in_and_judged_against_the_record(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    set_phase(store, "migrating", changed_by="ops", reason="go", clock=clock)
    clock.advance(75 + 15)  # a completing move waits for the settled switch, forced too
    set_phase(store, "sharded", changed_by="ops", reason="f", force=True, clock=clock)
    dynamo.put_saga("left-behind", "p-1")
    code, doc = status_json(capsys, dynamo, clock, "--drift", "--no-counts")
    assert code == 0  # status shows; `saga-index drift` is the one that exits 1
    assert doc["rows"] is None
    drift = doc["drift"]
    assert (drift["checked"], drift["healthy"], drift["unexpectedLegacyRows"]) == (True, False, 1)
    assert "legacy GSI4PK" in drift["findings"][0]


def test_alarms_list_the_stacks_alarms_in_alarm_first(
    dynamo: Backend, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    for name in (
        "RenewalSagaIndex-LegacyRowsAlarmA1-XYZ",
        "RenewalSagaIndex-MisroutedRowsAlarmB2-XYZ",
        "SomeOtherStack-Alarm-XYZ",
    ):
        cloudwatch.put_metric_alarm(
            AlarmName=name,
            MetricName="LegacyRows",
            Namespace="RenewalSagaIndex",
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=1,
            Threshold=0,
            ComparisonOperator="GreaterThanThreshold",
        )
    cloudwatch.set_alarm_state(
        AlarmName="RenewalSagaIndex-MisroutedRowsAlarmB2-XYZ",
        StateValue="ALARM",
        StateReason="misrouted rows",
    )
    code, doc = status_json(capsys, dynamo, clock, "--alarms", "--no-counts")
    alarms = doc["alarms"]
    assert (code, alarms["checked"], alarms["prefix"], alarms["inAlarm"]) == (
        0,
        True,
        "RenewalSagaIndex-",
        1,
    )
    assert [(a["name"], a["state"]) for a in alarms["alarms"]] == [
        ("RenewalSagaIndex-MisroutedRowsAlarmB2-XYZ", "ALARM"),
        ("RenewalSagaIndex-LegacyRowsAlarmA1-XYZ", "OK"),  # moto starts alarms OK
    ]
    code, out, _ = run(capsys, dynamo, clock, "--alarms", "--no-counts")
    assert "in ALARM: 1" in out


def test_alarms_are_skipped_not_failed_against_a_local_table() -> None:
    context = CliContext(
        table="t",
        endpoint_url="http://localhost:4567",
        region="us-east-1",
        phase_override=None,
        shards_override=None,
        max_attempts=1,
    )
    doc = alarm_states(context, "RenewalSagaIndex-", None)
    assert doc["checked"] is False
    assert "skipped" in doc["error"]
    assert "--cloudwatch-endpoint-url" in doc["error"]


def test_alarms_are_read_from_cloudwatchs_own_endpoint_never_dynamodbs() -> None:
    # Given DynamoDB on one local endpoint and CloudWatch on another that refuses connections
    context = CliContext(
        table="t",
        endpoint_url="http://localhost:4567",
        region="us-east-1",
        phase_override=None,
        shards_override=None,
        max_attempts=1,
    )
    # When the alarms are read
    doc = alarm_states(context, "RenewalSagaIndex-", "http://127.0.0.1:9")
    # Then the request went to CloudWatch's endpoint (and its failure is reported, not raised)
    assert doc["checked"] is False
    assert "EndpointConnectionError" in doc["error"]
    assert "127.0.0.1:9" in doc["error"]
    assert "4567" not in doc["error"]


def test_a_missing_record_is_shown_from_history_with_exit_1(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    set_phase(store, "migrating", changed_by="ops", reason="go", clock=clock)
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(state_key()))
    code, out, err = run(capsys, dynamo, clock, "--json")
    assert code == 1
    doc = json.loads(out)
    assert (doc["condition"], doc["phase"], doc["backfill"]["nextMove"]) == (
        "missing",
        "migrating",
        None,
    )
    assert "phase restore" in err


def test_the_screen_shows_the_record_the_backfill_and_the_rows(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("old", "p-1")
    set_phase(store, "migrating", changed_by="ops", reason="cutover", clock=clock)
    code, out, _ = run(capsys, dynamo, clock)
    assert code == 0
    for expected in (
        f"table {dynamo.table_name}",
        "migrating (version 1, present)",
        "legacy -> sharded(16)",
        "2026-03-01T09:01:15.000Z (NOT YET: 75 s to go, countdown 0:01:15)",
        "writers stamp legacy; readers read legacy, then sharded(16)",  # until effectiveAt
        "lease: none (no run in progress)",
        "throttle: the run's own setting; paused: no",
        "legacy key: 1; shard keys: 0 row(s) on 0 of the 16 shard keys counted",
        "countdown 0:01:15",
        "wait 0:01:15 for effectiveAt, then `saga-index backfill`",
        "allowed moves",
    ):
        assert expected in out, expected


def test_a_merge_in_flight_shows_both_shard_counts_and_counts_the_keys_it_drops(
    dynamo: Backend, store: ControlStore, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given sharded(32) moving to sharded(16), one row still on an upper key
    seed_state(dynamo.client, dynamo.table_name, Layout.sharded(32))
    dynamo.put_saga("up", "p-1", gsi4pk=keys.shard_gsi4pk_for_person("p-1", 32))  # key 30
    set_phase(store, "resharding", changed_by="ops", reason="merge", shard_count=16, clock=clock)
    # Then status names the phase and both N, and counts the row on the key the merge drops
    code, doc = status_json(capsys, dynamo, clock)
    assert code == 0
    assert (doc["phase"], doc["shardCount"]) == ("resharding", 32)
    assert doc["movingTo"] == {"layout": "sharded", "shardCount": 16}
    assert (doc["rows"]["shardCount"], doc["rows"]["sharded"], doc["rows"]["perShard"]["30"]) == (
        32,
        1,
        1,
    )
    assert doc["backfill"]["nextMove"]["to"] == "sharded"
    assert doc["backfill"]["nextMove"]["backfillCheck"]["passed"] is False
    code, out, _ = run(capsys, dynamo, clock)
    assert code == 0
    assert "resharding (version 2, present)" in out
    assert "sharded(32) -> sharded(16)" in out
    # The rows are counted on the keys they sit on, and drawn one bar per key that holds any
    assert "shard keys: 1 row(s) on 1 of the 32 shard keys counted" in out
    assert doc["rows"]["shardKeysWithRows"] == 1
    [bar_line] = [line for line in out.splitlines() if line.strip().startswith("shard 30")]
    assert "█" in bar_line
