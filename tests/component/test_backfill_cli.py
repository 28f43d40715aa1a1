"""`saga-index backfill` run locally against moto: output contract, exit codes, the control
record (direction, lease, completion) and `backfill throttle|pause|resume`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.layout_change.transitions.rules import backfill_verified
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run, store
from tests.support.backfill_contract import (
    ANOMALIES,
    CHANGED_AT,
    VALID,
    Clock,
    N,
    assert_every_valid_saga_on_its_shard,
    data_rows,
    plant,
    seed,
)

CONTRACT_KEYS = {
    "direction",
    "dryRun",
    "scanned",
    "restamped",
    "skipped",
    "anomalies",
    "wouldRestamp",
    "anomalyKeys",
}


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-backfill", synthesized_template, endpoint_url=None)


def test_given_a_clean_table_when_backfilled_with_json_then_one_object_and_exit_0(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    dynamo.client.delete_item(
        TableName=dynamo.table_name, Key={"PK": {"S": "LEASE#l-1"}, "SK": {"S": "META"}}
    )
    for saga_id in ANOMALIES:
        dynamo.client.delete_item(
            TableName=dynamo.table_name, Key={"PK": {"S": f"RSAGA#{saga_id}"}, "SK": {"S": "META"}}
        )

    code, out, err = run(
        capsys, dynamo, "backfill", "--json", "--segments", "3", "--max-writes-per-second", "1000"
    )

    assert code == 0, err
    [line] = out.splitlines()
    summary = json.loads(line)
    assert set(summary) >= CONTRACT_KEYS
    assert summary["direction"] == "forward"
    assert summary["dryRun"] is False
    assert (summary["restamped"], summary["skipped"], summary["anomalies"]) == (len(VALID), 0, 0)
    assert summary["anomalyKeys"] == []
    assert summary["source"] == {"kind": "legacy", "shardCount": None}
    assert summary["target"] == {"kind": "sharded", "shardCount": N}
    assert summary["completionRecorded"] is True
    assert summary["holder"].endswith(f"/{os.getpid()}")
    assert_every_valid_saga_on_its_shard(dynamo)
    # the completion is in the record: what `phase set sharded` checks
    state = store(dynamo).read()
    assert state.lease is None
    assert backfill_verified(state, BackfillDirection.FORWARD).passed


def test_given_anomalies_when_backfilled_then_exit_3_and_they_are_listed(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")

    code, out, _ = run(capsys, dynamo, "backfill", "--max-writes-per-second", "1000")

    assert code == 3
    assert f"re-stamped       {len(VALID)}" in out
    for saga_id in ANOMALIES:
        assert f"PK=RSAGA#{saga_id} SK=META" in out
    assert "verification     ok" in out


def test_given_a_dry_run_then_nothing_is_written_and_the_counts_say_what_would_move(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    before = dynamo.scan_all()

    code, out, _ = run(capsys, dynamo, "backfill", "--dry-run", "--json")

    assert code == 3  # the anomalies would remain
    summary = json.loads(out)
    assert (summary["dryRun"], summary["wouldRestamp"], summary["restamped"]) == (
        True,
        len(VALID),
        0,
    )
    assert summary["completionRecorded"] is False
    assert dynamo.scan_all() == before  # no lease taken, nothing recorded


def test_given_forward_then_rollback_in_their_phases_then_the_table_is_back_where_it_started(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    before = data_rows(dynamo)
    fast = ["--max-writes-per-second", "1000"]
    assert run(capsys, dynamo, "backfill", *fast)[0] == 3
    plant(dynamo, "rolling-back", version=2)
    code, _, err = run(capsys, dynamo, "backfill", "--direction", "rollback", *fast)
    assert code == 0, err  # the anomalies never left the legacy key: nothing of the rollback's
    assert data_rows(dynamo) == before
    assert backfill_verified(store(dynamo).read(), BackfillDirection.ROLLBACK).passed


@pytest.mark.parametrize(
    ("argv", "phase", "problem"),
    [
        (["backfill", "--segments", "0"], "migrating", "--segments"),
        (["backfill", "--segments", "1001"], "migrating", "--segments"),
        (["backfill", "--max-writes-per-second", "0"], "migrating", "--max-writes-per-second"),
        (["backfill", "--max-writes-per-second", "5000"], "migrating", "--max-writes-per-second"),
        (["backfill", "--direction", "sideways"], "migrating", "--direction"),
        (["backfill", "--state-machine-arn", "arn:nope"], "migrating", "not a state machine ARN"),
        # the direction must agree with the record, dry run or not
        (["backfill"], "legacy", "needs the record in phase migrating or sharded"),
        (["backfill", "--dry-run"], "legacy", "needs the record in phase migrating or sharded"),
        (["backfill", "--direction", "rollback"], "migrating", "needs the record in phase rolling"),
        (["backfill"], "rolling-back", "needs the record in phase migrating or sharded"),
        # the global overrides are refused when they disagree with the record
        (
            ["--phase", "migrating", "backfill", "--direction", "rollback"],
            "rolling-back",
            "--phase",
        ),
        (["--phase", "sharded", "backfill"], "migrating", "--phase sharded disagrees"),
        (["--shards", "32", "backfill"], "migrating", "--shards 32 disagrees"),
        (["--shards", "32", "backfill", "--dry-run"], "migrating", "--shards 32 disagrees"),
    ],
)
def test_given_bad_usage_or_a_direction_or_override_the_record_disagrees_with_then_exit_2(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    phase: str,
    problem: str,
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, phase)
    before = dynamo.scan_all()
    code, out, err = run(capsys, dynamo, *argv)
    assert code == 2, err
    assert out == ""
    assert problem in err
    assert dynamo.scan_all() == before  # nothing moved, no lease taken


def test_given_overrides_that_agree_with_the_record_then_the_run_goes_ahead(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, "migrating")
    code, _, err = run(capsys, dynamo, "--phase", "migrating", "--shards", str(N), "backfill")
    assert code == 3, err  # done; the planted anomalies remain


def test_given_no_table_then_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, None, "backfill")
    assert code == 2
    assert "no table given" in err


def test_given_a_table_that_does_not_exist_then_exit_1_naming_the_record(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--table", "no-such-table", "--max-attempts", "1", "backfill", "--json"])
    out, err = capsys.readouterr()
    assert exited.value.code == 1
    assert out == ""  # nothing ran, nothing claims completion
    # Issue 12: the missing table is named (the record read is where it was met).
    assert "table 'no-such-table' does not exist" in err


def test_given_a_state_younger_than_its_effective_at_then_exit_5_saying_when_to_retry(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, "migrating")
    before = dynamo.scan_all()
    early = Clock(CHANGED_AT + timedelta(seconds=30))
    code, out, err = run(capsys, dynamo, "backfill", "--json", clock=early)
    assert code == 5
    assert json.loads(out)["retryLater"] is True  # the refusal as data, with its retryAt
    assert "Wait 45 s and start again" in err
    assert "not yet (retry at 20" in err
    assert dynamo.scan_all() == before


def test_given_another_runs_live_lease_then_exit_5_naming_it_and_its_expiry(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, "migrating")
    clock = Clock()
    grant = acquire_lease(
        store(dynamo), holder="bob@ci/77", token="bobs-run", direction="forward", clock=clock
    )
    code, out, err = run(capsys, dynamo, "backfill", clock=clock)
    assert code == 5
    assert json.loads(out)["retryLater"] is True  # the refusal as data, with its retryAt
    assert "'bob@ci/77'" in err
    assert grant.lease.expires_at.strftime("%Y-%m-%dT%H:%M:%S") in err
    # once that lease expired (the injected clock, no sleep), the run goes ahead
    clock.now = grant.lease.expires_at
    assert run(capsys, dynamo, "backfill", clock=clock)[0] == 3  # done; the anomalies remain


def test_given_an_output_file_then_the_report_is_written_there_whatever_the_exit_code(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    report = tmp_path / "forward.json"
    code, out, _ = run(capsys, dynamo, "backfill", "--report-file", str(report))
    assert code == 3  # the anomalies remain
    assert f"report written to {report}" in out
    written = json.loads(report.read_text())
    assert written["restamped"] == len(VALID)
    assert written["completionRecorded"] is True
    assert len(written["anomalyKeys"]) == len(ANOMALIES)


def test_throttle_pause_and_resume_change_the_record(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    code, out, err = run(
        capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "25", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["backfillMaxWritesPerSecond"], doc["backfillPaused"], doc["lease"]) == (
        25.0,
        False,
        None,
    )
    code, out, err = run(capsys, dynamo, "backfill", "pause", "--reason", "peak traffic")
    assert code == 0, err
    assert "PAUSED" in out
    assert "no run holds the lease now" in out
    assert store(dynamo).read().backfill_paused
    code, out, _ = run(capsys, dynamo, "backfill", "resume")
    assert code == 0
    state = store(dynamo).read()
    assert (state.backfill_paused, state.backfill_max_writes_per_second) == (False, 25.0)
    events = store(dynamo).events()
    assert sorted(e["event"] for e in events) == ["pause", "resume", "throttle"]
    assert {e["changedBy"] for e in events} == {"operator@test"}
    assert [e.get("reason") for e in events if e["event"] == "pause"] == ["peak traffic"]


@pytest.mark.parametrize(
    ("argv", "planted", "code", "problem"),
    [
        (["backfill", "pause"], None, 2, "there is no control record yet"),
        (["backfill", "throttle", "--max-writes-per-second", "0"], "migrating", 2, "0.1<=x"),
        (["backfill", "throttle", "--max-writes-per-second", "1001"], "migrating", 2, "1000"),
        (["backfill", "throttle"], "migrating", 2, "--max-writes-per-second"),
        (["--shards", "32", "backfill", "pause"], "migrating", 2, "--shards 32 disagrees"),
    ],
)
def test_control_changes_that_cannot_apply_are_refused(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    planted: str | None,
    code: int,
    problem: str,
) -> None:
    if planted is not None:
        plant(dynamo, planted)
    exit_code, out, err = run(capsys, dynamo, *argv)
    assert exit_code == code
    assert out == ""
    assert problem in err
    assert store(dynamo).events() == []


def test_given_a_row_left_behind_when_verified_then_exit_1(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:4])
    plant(dynamo, "migrating")
    # A writer still on the legacy phase re-stamps a moved row back, after the last write
    sneaky = dynamo.new_client()
    calls: list[int] = []

    def re_stamp_to_legacy(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 4:
            sneaky.update_item(
                TableName=dynamo.table_name,
                Key={"PK": {"S": "RSAGA#s00"}, "SK": {"S": "META"}},
                UpdateExpression="SET GSI4PK = :legacy",
                ExpressionAttributeValues={":legacy": {"S": keys.LEGACY_GSI4PK}},
            )

    import boto3

    session = boto3.DEFAULT_SESSION or boto3.Session()
    boto3.DEFAULT_SESSION = session
    # On moto each re-stamp is a fenced TransactWriteItems: after the 4th (the last one)
    event = "after-call.dynamodb.TransactWriteItems"
    session.events.register(event, re_stamp_to_legacy)
    try:
        code, out, err = run(capsys, dynamo, "backfill", "--json", "--segments", "1")
    finally:
        session.events.unregister(event, re_stamp_to_legacy)
    assert code == 1, err
    summary = json.loads(out)
    assert summary["verification"]["ok"] is False
    assert summary["verification"]["unexpectedKeys"] == [{"PK": "RSAGA#s00", "SK": "META"}]
    # and the record says so: `phase set sharded` would be refused
    recorded = store(dynamo).read().last_backfill
    assert recorded is not None
    assert (recorded.complete, recorded.verified) == (True, False)


# ---- the dry run's estimate, anomaly reasons, advice, the Step Functions options ---


def test_given_a_dry_run_then_its_report_estimates_time_and_legacy_key_capacity(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given legacy sagas of about 1.5 KB each (put_saga's rows plus a payload)
    seed(dynamo)
    plant(dynamo, "migrating")
    report = tmp_path / "dry.json"

    # When the dry run goes at a cap of 10 writes/s
    code, out, err = run(
        capsys,
        dynamo,
        "backfill",
        "--dry-run",
        "--max-writes-per-second",
        "10",
        "--json",
        "--report-file",
        str(report),
    )

    # Then the estimate names the rows to move, the time at the cap and the legacy key's share
    assert code == 3, err
    estimate = json.loads(out)["estimate"]
    assert estimate["rowsToMove"] == len(VALID)
    assert estimate["seconds"] == pytest.approx(len(VALID) / 10)
    assert estimate["legacyKey"] == "off"
    assert estimate["sampledRows"] == len(VALID)  # fewer than the sample's 100 rows
    per_row = estimate["legacyKeyWcuPerRow"]
    assert per_row >= 1
    assert estimate["legacyKeyWcuPerSecond"] == pytest.approx(10 * per_row)
    assert estimate["legacyKeyShareOfPartitionLimit"] == pytest.approx(10 * per_row / 1000)
    assert json.loads(report.read_text())["estimate"] == estimate
    # and the text summary says the same
    code, out, _ = run(capsys, dynamo, "backfill", "--dry-run", "--max-writes-per-second", "10")
    assert f"rows to move     {len(VALID)}" in out
    assert "forward: moves rows OFF the legacy key" in out
    assert "WCU/s at the cap" in out


def test_given_anomalies_when_backfilled_forward_then_every_key_carries_its_reason(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    code, out, _ = run(capsys, dynamo, "backfill", "--json", "--max-writes-per-second", "1000")
    assert code == 3
    keys_listed = json.loads(out)["anomalyKeys"]
    assert sorted(k["PK"] for k in keys_listed) == sorted(f"RSAGA#{s}" for s in ANOMALIES)
    assert all(
        set(k) == {"PK", "SK", "reason", "repairCommand"} and k["reason"] for k in keys_listed
    )


def test_given_another_runs_lease_then_the_refusal_says_how_to_see_and_stop_the_holder(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, "migrating")
    clock = Clock()
    acquire_lease(store(dynamo), holder="bob@ci/77", token="bobs", direction="forward", clock=clock)
    code, _, err = run(capsys, dynamo, "backfill", clock=clock)
    assert code == 5
    assert "nothing was written. `saga-index status` shows the holder" in err
    assert "converges" not in err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--follow", "--stop"], "--follow and --stop cannot be combined"),
        (["--follow", "--segments", "8"], "--follow acts on an execution that already exists"),
        (["--stop", "--dry-run"], "drop --dry-run"),
        (["--follow", "--deployed"], "drop --deployed"),
        (["--stop", "--report-file", "x.json"], "--report-file writes a run's report"),
        (["--follow", "arn:aws:states:eu-west-1:1:execution:x:y"], "is not an execution ARN"),
        (["--stack-name", "Other"], "--stack-name only apply to a run in Step Functions"),
        (["--deployed", "--stack-name", "9bad"], "is not a CloudFormation stack name"),
        (
            [
                "--follow",
                "arn:aws:states:eu-west-1:123456789012:execution:Other:run-1",
                "--state-machine-arn",
                "arn:aws:states:eu-west-1:123456789012:stateMachine:Backfill",
            ],
            "is not one of --state-machine-arn",
        ),
    ],
)
def test_step_functions_options_that_cannot_mean_one_thing_are_refused(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], argv: list[str], problem: str
) -> None:
    plant(dynamo, "migrating")
    before = dynamo.scan_all()
    code, out, err = run(capsys, dynamo, "backfill", *argv)
    assert code == 2, err
    assert out == ""
    assert problem in err
    assert dynamo.scan_all() == before
