"""The open-saga index's backfill in the SYNTHESISED backfill state machine (moto's Step
Functions interpreter, the real handlers in-process: tests/component/test_backfill_state_machine.py
builds that world): a forward run stamps the open rows that predate `adding` under the
execution's lease and releases it recording no layout completion, its rollback removes every
stamp (the table byte-identical to before), a dry run writes nothing, and `saga-index
open-index backfill --state-machine-arn` reports as the local run does."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from saga_index.index import names
from saga_index.layout_change.lease import acquire_lease, release_lease
from saga_index.layout_change.record import BackfillKind, ControlStore
from tests.component import test_backfill_state_machine as state_machine
from tests.component.test_backfill_state_machine import StateMachineWorld, run_cli
from tests.component.test_open_index_backfill import move
from tests.support.backfill_contract import data_rows
from tests.support.control_fixtures import Clock
from tests.support.open_index import add_open_index

# The synthesised state machine with the handlers in-process, as the layout runs' tests use it.
world = state_machine.world
OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
OPEN_SAGAS = [f"open{n}" for n in range(3)]
PRODUCT_ATTRIBUTES: dict[str, Any] = {
    "rentCents": Decimal("125075"),
    "offer": {"term": "12 months", "channels": ["email", "sms"], "accepted": False},
    "attempts": {1, 2},
}


def open_run(direction: str = "forward", *, dry_run: bool = False) -> dict[str, Any]:
    return {
        "direction": direction,
        "kind": "open-index",
        "totalSegments": 2,
        "maxWritesPerSecond": 1000,
        "dryRun": dry_run,
        "verifyReadUnitsPerSecond": 10_000,
    }


def adding(world: StateMachineWorld) -> ControlStore:
    """Open sagas no writer stamped, closed ones, a row of another entity; the open index
    added to the table and the record moved to `adding`, settled."""
    add_open_index(world.dynamo.client, world.dynamo.table_name)
    for n, saga_id in enumerate(OPEN_SAGAS):
        # Attributes of the product's own beside the index's: a move must keep every one.
        world.dynamo.put_saga(saga_id, f"p-{n}", **PRODUCT_ATTRIBUTES)
    world.dynamo.put_saga("closed", "p-9", state="SIGNED")
    world.dynamo.client.put_item(
        TableName=world.dynamo.table_name,
        Item={"PK": {"S": "PERSON#p-1"}, "SK": {"S": "PROFILE"}, "entityType": {"S": "Person"}},
    )
    store = ControlStore(world.dynamo.new_client(), world.dynamo.table_name)
    move(store, Clock(), "adding")
    return store


def stamped(world: StateMachineWorld) -> list[str]:
    return sorted(
        r["PK"]["S"].removeprefix("RSAGA#") for r in data_rows(world.dynamo) if OPEN_KEY in r
    )


def test_given_adding_when_the_open_index_run_executes_and_rolls_back_then_the_table_is_as_before(
    world: StateMachineWorld,
) -> None:
    store = adding(world)
    before = data_rows(world.dynamo)
    # When the state machine runs the open-index run forward
    execution = world.start(open_run())
    # Then every open saga is stamped and the verification passed
    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    # every saga row read (the closed one too), the open ones stamped
    assert summary["open"]["sagaRows"] == len(OPEN_SAGAS) + 1
    assert summary["restamped"] == len(OPEN_SAGAS)
    assert summary["verification"]["ok"] is True, summary["verification"]
    assert stamped(world) == OPEN_SAGAS
    # Nothing is lost: each row keeps every attribute it had, the run added OpenSagaPK alone
    without_key = [{k: v for k, v in r.items() if k != OPEN_KEY} for r in data_rows(world.dynamo)]
    assert without_key == before
    # under the execution's lease, of kind open-index, released with no layout completion
    state = store.read()
    assert (state.lease, state.last_backfill) == (None, None)
    acquired = [e for e in store.events() if e["event"] == "lease-acquired"]
    assert [(e["leaseHolder"], e["leaseKind"]) for e in acquired] == [
        (execution["executionArn"], BackfillKind.OPEN_INDEX.value)
    ]
    assert world.invocations["handlers.backfill_verify.handler"] == 1

    # When the open index is rolled back and the state machine removes every stamp
    move(store, Clock(), "removing")
    rollback = world.start(open_run("rollback"))
    # Then the saga rows are byte-identical to before the forward run
    assert rollback["status"] == "SUCCEEDED", rollback
    assert json.loads(rollback["output"])["open"]["removed"] == len(OPEN_SAGAS)
    assert data_rows(world.dynamo) == before
    assert store.read().lease is None


def test_given_adding_when_an_open_index_dry_run_executes_then_nothing_is_written(
    world: StateMachineWorld,
) -> None:
    adding(world)
    before = world.dynamo.scan_all()

    execution = world.start(open_run(dry_run=True))

    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    assert (summary["dryRun"], summary["restamped"], summary["wouldRestamp"]) == (
        True,
        0,
        len(OPEN_SAGAS),
    )
    assert len(summary["open"]["examples"]) == len(OPEN_SAGAS)
    assert world.dynamo.scan_all() == before  # no lease, no fence slot either


# The local run's report keys (saga_index_cli/open_index/backfill.py, open_report).
LOCAL_REPORT = {
    "direction", "dryRun", "scanned", "scannedItems", "stamped", "removed", "changed",
    "anomalies", "examples", "openShardCount", "stateVersion", "holder", "segments",
    "maxWritesPerSecond", "appliedMaxWritesPerSecond", "throttles", "complete", "verified",
    "verification", "leaseLost", "failures", "interrupted", "exitCode",
}  # fmt: skip


def test_given_the_arn_when_the_cli_runs_the_open_index_deployed_then_it_reports_as_locally(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    store = adding(world)
    table = world.dynamo.table_name
    # --stack-name without --deployed means nothing: exit 2, before any call.
    code, lines, err = run_cli(
        capsys, "--table", table, "open-index", "backfill", "--stack-name", "s"
    )
    assert (code, lines) == (2, [])
    assert "--deployed" in err
    deployed = ("open-index", "backfill", "--state-machine-arn", world.arn, "--json")
    code, lines, err = run_cli(capsys, "--table", table, *deployed, "--segments", "501")
    assert (code, lines) == (2, [])
    assert "at most 500" in err
    # Another run's live lease: not yet (exit 5), asked before the execution starts.
    acquire_lease(
        store,
        holder="alice@laptop/4242",
        token="hers",
        direction="forward",
        kind=BackfillKind.OPEN_INDEX,
    )
    code, [refused], _ = run_cli(capsys, "--table", table, *deployed)
    assert (code, refused["retryLater"]) == (5, True)
    assert "alice@laptop/4242" in refused["message"]
    release_lease(store, token="hers")
    assert world.sfn.list_executions(stateMachineArn=world.arn)["executions"] == []

    code, [report], err = run_cli(
        capsys, "--table", table, *deployed, "--segments", "2", "--rate", "1000",
        "--poll-interval", "0.05",
    )  # fmt: skip

    assert code == 0, err
    assert set(report) == LOCAL_REPORT | {"executionArn", "status"}
    assert (report["status"], report["direction"], report["stamped"]) == (
        "SUCCEEDED",
        "stamp",
        len(OPEN_SAGAS),
    )
    assert (report["complete"], report["verified"], report["leaseLost"]) == (True, True, None)
    assert report["holder"] == report["executionArn"]
    assert report["openShardCount"] == 16
    assert stamped(world) == OPEN_SAGAS
    # The scan rate asked for is the verification's, carried in the execution's input.
    [execution] = world.sfn.list_executions(stateMachineArn=world.arn)["executions"]
    started = world.sfn.describe_execution(executionArn=execution["executionArn"])
    assert json.loads(started["input"])["verifyReadUnitsPerSecond"] == 1000.0


def test_given_an_open_index_execution_when_followed_then_its_report_is_the_open_index_runs(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    adding(world)
    table = world.dynamo.table_name
    execution_arn = state_machine.start_async(world, open_run(dry_run=True))
    # The layout command names the command that follows it (exit 2).
    code, _, err = run_cli(capsys, "--table", table, "backfill", "--follow", execution_arn)
    assert code == 2
    assert f"open-index backfill --follow {execution_arn}" in err
    # --follow starts no run: a run's option with it is exit 2.
    follow = ("open-index", "backfill", "--follow", execution_arn)
    code, _, err = run_cli(capsys, "--table", table, *follow, "--dry-run")
    assert code == 2
    assert "drop --dry-run" in err

    code, [report], err = run_cli(
        capsys, "--table", table, *follow, "--json", "--poll-interval", "0.05"
    )

    assert code == 0, err
    assert set(report) == LOCAL_REPORT | {"executionArn", "status"}
    assert (report["executionArn"], report["status"], report["dryRun"]) == (
        execution_arn,
        "SUCCEEDED",
        True,
    )
    assert (report["stamped"], report["holder"]) == (len(OPEN_SAGAS), None)
    assert stamped(world) == []
