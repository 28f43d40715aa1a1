"""`saga-index backfill` run locally against moto: output contract and exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index import keys
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    VALID,
    N,
    assert_every_valid_saga_on_its_shard,
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


def run(
    capsys: pytest.CaptureFixture[str], dynamo: Backend | None, *argv: str, phase: str = "migrating"
) -> tuple[int, str, str]:
    table = ["--table", dynamo.table_name] if dynamo is not None else []
    with pytest.raises(SystemExit) as exited:
        main([*table, "--shards", str(N), "--phase", phase, *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_given_a_clean_table_when_backfilled_with_json_then_one_object_and_exit_0(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
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
    assert_every_valid_saga_on_its_shard(dynamo)


def test_given_anomalies_when_backfilled_then_exit_3_and_they_are_listed(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)

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
    before = dynamo.scan_all()

    code, out, _ = run(capsys, dynamo, "backfill", "--dry-run", "--json")

    assert code == 3  # the anomalies would remain
    summary = json.loads(out)
    assert (summary["dryRun"], summary["wouldRestamp"], summary["restamped"]) == (
        True,
        len(VALID),
        0,
    )
    assert dynamo.scan_all() == before


def test_given_forward_then_rollback_in_their_phases_then_the_table_is_back_where_it_started(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    before = dynamo.scan_all()
    fast = ["--max-writes-per-second", "1000"]
    assert run(capsys, dynamo, "backfill", *fast)[0] == 3
    code, _, _ = run(
        capsys, dynamo, "backfill", "--direction", "rollback", *fast, phase="rolling-back"
    )
    assert code == 0  # the anomalies never left the legacy key: nothing of the rollback's
    assert dynamo.scan_all() == before


@pytest.mark.parametrize(
    ("argv", "phase", "problem"),
    [
        (["backfill", "--segments", "0"], "migrating", "--segments"),
        (["backfill", "--segments", "1001"], "migrating", "--segments"),
        (["backfill", "--max-writes-per-second", "0"], "migrating", "--max-writes-per-second"),
        (["backfill", "--max-writes-per-second", "5000"], "migrating", "--max-writes-per-second"),
        (["backfill", "--direction", "sideways"], "migrating", "--direction"),
        (["backfill", "--state-machine-arn", "arn:nope"], "migrating", "not a state machine ARN"),
        (["backfill"], "legacy", "needs the writers in phase migrating or sharded"),
        (["backfill", "--direction", "rollback"], "migrating", "phase rolling-back or legacy"),
    ],
)
def test_given_bad_usage_or_a_phase_that_undoes_the_run_then_exit_2_naming_it(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    phase: str,
    problem: str,
) -> None:
    seed(dynamo, VALID[:2])
    before = dynamo.scan_all()
    code, out, err = run(capsys, dynamo, *argv, phase=phase)
    assert code == 2
    assert out == ""
    assert problem in err
    assert dynamo.scan_all() == before


def test_given_no_table_then_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, None, "backfill")
    assert code == 2
    assert "no table given" in err


def test_given_a_table_that_does_not_exist_then_exit_1_and_nothing_claims_completion(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--table", "no-such-table", "--max-attempts", "1", "backfill", "--json"])
    out, err = capsys.readouterr()
    assert exited.value.code == 1
    summary = json.loads(out)
    assert summary["complete"] is False
    assert summary["failures"]
    assert "ResourceNotFoundException" in json.dumps(summary["failures"])
    assert "run the same command again" in err


def test_given_a_row_left_behind_when_verified_then_exit_1(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:4])
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
    session.events.register("after-call.dynamodb.UpdateItem", re_stamp_to_legacy)
    try:
        code, out, err = run(capsys, dynamo, "backfill", "--json", "--segments", "1")
    finally:
        session.events.unregister("after-call.dynamodb.UpdateItem", re_stamp_to_legacy)
    assert code == 1, err
    summary = json.loads(out)
    assert summary["verification"]["ok"] is False
    assert summary["verification"]["unexpectedKeys"] == [{"PK": "RSAGA#s00", "SK": "META"}]
