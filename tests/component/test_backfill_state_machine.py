"""The SYNTHESISED backfill state machine, executed by moto's Step Functions interpreter.

The definition is taken from the template the CDK app writes (tokens resolved to a stand-in
account), every Lambda task is routed to the real handler named by the template's `Handler`,
in-process, with the environment the template gives that function. Nothing about the state
machine is re-described here: a change to infra/backfill.py is what runs.

The migration state is the control record planted in the table: the plan step takes the run's
lease (holder: the execution's ARN), the workers heartbeat it, the verify step releases it with
the completion that `phase set` checks.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any
from urllib.parse import unquote

# Before the handler modules are imported: Powertools reads these at import.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RenewalSagaIndex")

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.response import StreamingBody
from moto import mock_aws

from infra.backfill import (
    CHILD_FIXED_EVENTS,
    EXECUTION_TIMEOUT,
    HISTORY_EVENT_LIMIT,
    HISTORY_EVENTS_PER_WORKER_INVOCATION,
    PARENT_HISTORY_EVENTS,
    WORKER_SAFETY_MARGIN_SECONDS,
    WORKER_TIMEOUT,
)
from saga_index.index import keys
from saga_index.layout_change.backfill.keeper import token_for_execution
from saga_index.layout_change.backfill.wire import SegmentResult
from saga_index.layout_change.lease.controls import set_throttle
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.state import BackfillDirection, ControlState
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.transitions.rules import backfill_verified
from saga_index_cli.backfill import output as backfill_output
from saga_index_cli.backfill.advice import LEASE_LOST_ADVICE
from saga_index_cli.backfill.execution_progress import CHILD_READS_PER_POLL, ExecutionFollower
from saga_index_cli.context import CliContext
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    VALID,
    assert_every_valid_saga_on_its_shard,
    data_rows,
    plant,
    sagas,
    seed,
)
from tests.support.lambda_harness import FakeLambdaContext, as_function

ACCOUNT = "123456789012"
REGION = "us-east-1"
MOTO_CONFIG: Any = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
# The worker's template sets a 60 s safety margin; its fake context leaves a few seconds of
# budget per invocation so each one stops after a few rows and the Choice loop really loops.
WORKER_BUDGET_MS = 63_000


def resolve(value: Any, refs: dict[str, str]) -> Any:
    """Resolve the intrinsic functions CDK uses in the definition and environments."""
    if isinstance(value, list):
        return [resolve(v, refs) for v in value]
    if not isinstance(value, dict):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(p, refs)) for p in parts)
    if "Ref" in value:
        return refs[value["Ref"]]
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        return refs[f"{logical_id}.{attribute}"]
    return {k: resolve(v, refs) for k, v in value.items()}


def function_name_of(arn: str) -> str:
    return arn.split(":function:")[-1].split(":")[0]


@dataclass
class StateMachineWorld:
    dynamo: Backend
    sfn: Any
    arn: str
    definition: dict[str, Any]
    handlers: dict[str, str]  # function name -> "handlers.x.handler"
    environment: dict[str, str]
    invocations: dict[str, int] = field(default_factory=dict)
    before_invoke: dict[str, Callable[[], None]] = field(default_factory=dict)

    def invoke(self, function_name: str, payload: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """Run the handler as the Lambda runtime would: an exception becomes an error payload."""
        handler_path = self.handlers[function_name]
        self.invocations[handler_path] = self.invocations.get(handler_path, 0) + 1
        hook = self.before_invoke.get(handler_path)
        if hook is not None:
            hook()
        module_name, attribute = handler_path.rsplit(".", 1)
        handler = getattr(import_module(module_name), attribute)
        worker = handler_path == "handlers.backfill_worker.handler"
        context = FakeLambdaContext(
            function_name,
            remaining_ms=WORKER_BUDGET_MS if worker else 300_000,
            step_ms=1000 if worker else 0,
        )
        try:
            return handler(payload, context), False
        except Exception as err:  # noqa: BLE001 - the Lambda runtime reports any exception
            return {"errorType": type(err).__name__, "errorMessage": str(err)}, True

    def record(self) -> ControlState:
        return ControlStore(self.dynamo.new_client(), self.dynamo.table_name).read()

    def wait_for_lease(self, timeout: float = 20.0) -> ControlState:
        """The record once a run holds the lease (the plan step takes it while the test polls:
        tests/conftest.py makes each moto request atomic, as DynamoDB's are)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.record()
            if state.lease is not None:
                return state
            time.sleep(0.05)
        raise AssertionError(f"no lease taken within {timeout} s")

    def start(self, execution_input: dict[str, Any]) -> dict[str, Any]:
        """Run one execution to its end under the planted record; describe_execution."""
        execution = self.sfn.start_execution(
            stateMachineArn=self.arn,
            name=f"test-{uuid.uuid4().hex[:12]}",
            input=json.dumps(execution_input),
        )
        return self.wait(execution["executionArn"])

    def wait(self, execution_arn: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            described: dict[str, Any] = self.sfn.describe_execution(executionArn=execution_arn)
            if described["status"] != "RUNNING":
                return described
            time.sleep(0.05)
        raise AssertionError(f"{execution_arn} still RUNNING after {timeout} s")


@pytest.fixture
def world(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[StateMachineWorld]:
    template = synthesized_template
    resources = template["Resources"]
    with mock_aws(config=MOTO_CONFIG), as_function(monkeypatch, service=None):
        dynamo = make_backend("sfn", template, endpoint_url=None)
        refs = {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
        }
        handlers: dict[str, str] = {}
        for logical_id, resource in resources.items():
            if resource["Type"] == "AWS::DynamoDB::Table":
                refs[logical_id] = dynamo.table_name
            if resource["Type"] == "AWS::Lambda::Function":
                refs[f"{logical_id}.Arn"] = (
                    f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}"
                )
                handlers[logical_id] = resource["Properties"]["Handler"]
        backfill_functions = [
            logical_id for logical_id, h in handlers.items() if h.startswith("handlers.backfill_")
        ]
        assert len(backfill_functions) == 3, handlers
        # The three functions' environments, from the template; the settings they share must
        # agree (only the Powertools service name, read at import, differs by function).
        environment: dict[str, str] = {}
        for logical_id in backfill_functions:
            variables = resolve(
                resources[logical_id]["Properties"]["Environment"]["Variables"], refs
            )
            variables.pop("POWERTOOLS_SERVICE_NAME")
            for name, value in variables.items():
                assert environment.get(name, value) == value, f"{name} differs between functions"
                environment[name] = value
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        [(machine_id, machine)] = [
            (logical_id, r)
            for logical_id, r in resources.items()
            if r["Type"] == "AWS::StepFunctions::StateMachine"
        ]
        definition = resolve(machine["Properties"]["DefinitionString"], refs)
        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(
            name=machine_id,
            definition=definition,
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/backfill-state-machine",
        )["stateMachineArn"]

        state = StateMachineWorld(
            dynamo=dynamo,
            sfn=sfn,
            arn=arn,
            definition=json.loads(definition),
            handlers={f"{k}": v for k, v in handlers.items()},
            environment=environment,
        )

        # Lambda runs one invocation per execution environment at a time; in this process every
        # handler shares the runtime's module-level Powertools objects (metrics, logger), which
        # are not made for two invocations at once. moto runs the Distributed Map's segments on
        # threads, so invocations take turns here, as separate environments never need to.
        one_at_a_time = threading.Lock()

        def invoke_in_process(params: dict[str, Any], **_: Any) -> Any:
            function = function_name_of(unquote(params["url_path"].split("/")[3]))
            payload = json.loads(params.get("body") or b"{}")
            with one_at_a_time:
                result, failed = state.invoke(function, payload)
            body = json.dumps(result).encode()
            parsed: dict[str, Any] = {
                "StatusCode": 200,
                "ExecutedVersion": "$LATEST",
                "Payload": StreamingBody(io.BytesIO(body), len(body)),
            }
            if failed:
                parsed["FunctionError"] = "Unhandled"
            return AWSResponse(None, 200, {}, None), parsed

        # moto's interpreter calls Lambda through boto3's default session.
        boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        assert session is not None
        session.events.register("before-call.lambda.Invoke", invoke_in_process)
        try:
            yield state
        finally:
            session.events.unregister("before-call.lambda.Invoke", invoke_in_process)
            boto3.DEFAULT_SESSION = None


def forward(dry_run: bool = False, segments: int = 3) -> dict[str, Any]:
    return {
        "direction": "forward",
        "totalSegments": segments,
        "maxWritesPerSecond": 1000,
        "dryRun": dry_run,
    }


def test_given_migrating_writers_when_the_forward_run_executes_then_rows_move_and_counts_add_up(
    world: StateMachineWorld,
) -> None:
    # Given legacy sagas, anomalies and other entities, and the record in `migrating`
    seed(world.dynamo)
    before = data_rows(world.dynamo)
    plant(world.dynamo, "migrating")
    # When the synthesised state machine runs forward over three segments
    execution = world.start(forward())
    # Then it succeeds with the aggregated counts and a passed verification
    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    assert summary["restamped"] == len(VALID)
    assert summary["skipped"] == 0
    assert summary["anomalies"] == len(ANOMALIES)
    assert sorted(k["PK"] for k in summary["anomalyKeys"]) == sorted(
        f"RSAGA#{s}" for s in ANOMALIES
    )
    # every row is scanned, the control record's too (STATE, HISTORY#1, the lease's EVENT) and
    # the run's three fence slots
    assert summary["scanned"] == len(before) + 3 + 3
    assert summary["complete"] is True
    assert summary["verification"]["ok"] is True
    assert summary["verification"]["remainingAnomalies"] == len(ANOMALIES)
    assert_every_valid_saga_on_its_shard(world.dynamo)
    # and each segment was worked by several invocations, looped on their cursors
    assert world.invocations["handlers.backfill_worker.handler"] > 3 * 2
    assert world.invocations["handlers.backfill_plan.handler"] == 1
    assert world.invocations["handlers.backfill_verify.handler"] == 1
    # and the plan took the lease for the execution, the verify step released it with the
    # completion `phase set sharded` checks
    state = world.record()
    assert state.lease is None
    recorded = state.last_backfill
    assert recorded is not None
    assert recorded.holder == execution["executionArn"]
    assert recorded.lease_token == token_for_execution(execution["executionArn"])
    assert (recorded.restamped, recorded.complete, recorded.verified) == (len(VALID), True, True)
    assert backfill_verified(state, BackfillDirection.FORWARD).passed
    events = {
        e["event"]: e for e in ControlStore(world.dynamo.client, world.dynamo.table_name).events()
    }
    assert events["lease-acquired"]["leaseHolder"] == execution["executionArn"]


def test_given_a_forward_run_when_the_rollback_executes_then_the_table_is_byte_identical(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    before = data_rows(world.dynamo)
    plant(world.dynamo, "migrating")
    assert world.start(forward())["status"] == "SUCCEEDED"
    assert data_rows(world.dynamo) != before

    plant(world.dynamo, "rolling-back", version=2)
    rollback = {**forward(segments=2), "direction": "rollback"}
    execution = world.start(rollback)

    assert execution["status"] == "SUCCEEDED", execution
    assert json.loads(execution["output"])["restamped"] == len(VALID)
    assert data_rows(world.dynamo) == before
    assert backfill_verified(world.record(), BackfillDirection.ROLLBACK).passed
    assert {s["GSI4PK"] for s in sagas(world.dynamo).values()} == {keys.LEGACY_GSI4PK}


def test_given_a_dry_run_when_it_executes_then_nothing_is_written(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    before = world.dynamo.scan_all()

    execution = world.start(forward(dry_run=True))

    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    assert (summary["dryRun"], summary["restamped"], summary["wouldRestamp"]) == (
        True,
        0,
        len(VALID),
    )
    assert world.dynamo.scan_all() == before  # no lease either


def test_given_the_record_still_legacy_when_a_forward_run_starts_then_it_is_refused(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    plant(world.dynamo, "legacy")
    before = world.dynamo.scan_all()

    execution = world.start(forward())

    assert execution["status"] == "FAILED"
    assert execution["error"] == "LeaseDirectionError"
    assert "needs the record in phase migrating or sharded" in execution["cause"]
    assert world.dynamo.scan_all() == before
    assert "handlers.backfill_worker.handler" not in world.invocations


def test_given_another_runs_live_lease_when_an_execution_starts_then_the_plan_refuses(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo, VALID[:3])
    plant(world.dynamo, "migrating")
    store = ControlStore(world.dynamo.new_client(), world.dynamo.table_name)
    acquire_lease(store, holder="alice@laptop/4242", token="hers", direction="forward")
    before = world.dynamo.scan_all()

    execution = world.start(forward())

    assert execution["status"] == "FAILED"
    assert execution["error"] == "LeaseHeldError"
    assert "alice@laptop/4242" in execution["cause"]
    assert world.dynamo.scan_all() == before
    assert "handlers.backfill_worker.handler" not in world.invocations


def test_given_a_bad_input_when_it_starts_then_the_execution_fails_naming_every_problem(
    world: StateMachineWorld,
) -> None:
    plant(world.dynamo, "migrating")
    execution = world.start(
        {"direction": "sideways", "totalSegments": 0, "maxWritesPerSecond": -5, "dryRun": "yes"}
    )

    assert execution["status"] == "FAILED"
    assert execution["error"] == "ValidationError"
    for field_name in ("direction", "totalSegments", "maxWritesPerSecond", "dryRun"):
        assert field_name in execution["cause"]


def test_given_a_row_left_on_the_legacy_key_when_verified_then_the_execution_fails_naming_it(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo, VALID[:6])
    plant(world.dynamo, "migrating")

    def a_legacy_writer_stamps_a_new_row() -> None:
        world.dynamo.put_saga("late", "p-late")  # legacy key, usable personId

    world.before_invoke["handlers.backfill_verify.handler"] = a_legacy_writer_stamps_a_new_row
    execution = world.start(forward(segments=2))

    assert execution["status"] == "FAILED"
    assert execution["error"] == "BackfillVerificationFailed"
    assert "RSAGA#late" in execution["cause"]
    assert "run the backfill again" in execution["cause"]
    # the lease is released with a completion that `phase set sharded` refuses
    state = world.record()
    assert state.lease is None
    assert state.last_backfill is not None
    assert (state.last_backfill.complete, state.last_backfill.verified) == (True, False)
    assert not backfill_verified(state, BackfillDirection.FORWARD).passed


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    """The CLI's stdout lines; the in-process "Lambda" handlers log JSON to the same stdout, so
    their lines (logs, EMF) are told apart by shape."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    cli_lines = [line for line in lines if "_aws" not in line and "level" not in line]
    return int(exited.value.code or 0), cli_lines, err


def run_deployed(
    capsys: pytest.CaptureFixture[str], world: StateMachineWorld
) -> tuple[int, list[Any], str]:
    """`saga-index backfill` through the state machine: 2 segments at 1,000 writes/s, --json,
    followed to its end."""
    return run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--state-machine-arn",
        world.arn,
        "--segments",
        "2",
        "--max-writes-per-second",
        "1000",
        "--json",
        "--poll-interval",
        "0.05",
    )


def test_given_the_arn_when_the_cli_follows_the_execution_then_it_prints_the_summary_and_exits_3(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(world.dynamo)
    plant(world.dynamo, "migrating")

    code, lines, err = run_deployed(capsys, world)

    assert code == 3, err  # complete, but the anomalies remain
    [summary] = lines
    assert summary["status"] == "SUCCEEDED"
    assert summary["completionRecorded"] is True
    assert summary["holder"] == summary["executionArn"]
    assert (summary["restamped"], summary["anomalies"]) == (len(VALID), len(ANOMALIES))
    assert {"direction", "dryRun", "scanned", "skipped", "wouldRestamp", "anomalyKeys"} <= set(
        summary
    )
    assert_every_valid_saga_on_its_shard(world.dynamo)


def test_given_a_throttle_during_a_deployed_run_then_its_report_names_the_caps_it_ran_at(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a run asked for at 1,000 writes/s, and an operator who throttles it to 200/s once
    # its first worker invocation has run
    seed(world.dynamo)
    plant(world.dynamo, "migrating")

    def throttle_after_the_first_invocation() -> None:
        if world.invocations["handlers.backfill_worker.handler"] == 2:
            set_throttle(
                ControlStore(world.dynamo.new_client(), world.dynamo.table_name),
                200,
                changed_by="operator",
            )

    world.before_invoke["handlers.backfill_worker.handler"] = throttle_after_the_first_invocation
    # When the CLI runs it through the state machine
    code, [report], err = run_deployed(capsys, world)
    # Then the report names the cap the run started at (the 1,000/s asked: no re-stamp checks
    # the control partition), the throttle it then ran at, and what was asked for, as a local
    # run's report does
    assert code == 3, err
    assert report["status"] == "SUCCEEDED"
    assert report["maxWritesPerSecond"] == 1000.0
    assert report["appliedMaxWritesPerSecond"] == [1000.0, 200.0]
    assert report["requestedMaxWritesPerSecond"] == 1000.0
    # and the state machine's own output carries the caps too (for whoever reads it)
    [execution] = world.sfn.list_executions(stateMachineArn=world.arn)["executions"]
    output = json.loads(
        world.sfn.describe_execution(executionArn=execution["executionArn"])["output"]
    )
    assert output["appliedMaxWritesPerSecond"] == [1000.0, 200.0]


def test_given_the_arn_when_the_execution_fails_then_the_cli_exits_1_with_the_cause(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(world.dynamo, VALID[:3])
    plant(world.dynamo, "migrating")
    world.before_invoke["handlers.backfill_verify.handler"] = lambda: world.dynamo.put_saga(
        "late", "p-late"
    )

    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--state-machine-arn",
        world.arn,
        "--json",
        "--poll-interval",
        "0.05",
    )

    assert code == 1
    [summary] = lines
    assert summary["status"] == "FAILED"
    assert summary["error"] == "BackfillVerificationFailed"
    assert summary["completionRecorded"] is True  # recorded as not verified
    assert "run the backfill again" in err


def test_given_the_record_disagrees_then_the_cli_refuses_before_starting_an_execution(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(world.dynamo, "migrating")
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--direction",
        "rollback",
        "--state-machine-arn",
        world.arn,
    )
    assert code == 2
    assert lines == []
    assert "needs the record in phase rolling-back" in err
    assert world.sfn.list_executions(stateMachineArn=world.arn)["executions"] == []


# ---- the history ceiling ----------------------------------------------------------------------


def history(world: StateMachineWorld, execution_arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": 1000}
    while True:
        page = world.sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def entered_states(events: list[dict[str, Any]]) -> set[str]:
    return {
        details["name"]
        for e in events
        for key, details in e.items()
        if key == "stateEnteredEventDetails"
    }


def select_item(selector: dict[str, Any], state: dict[str, Any], item: Any) -> dict[str, Any]:
    """What the Map's ItemSelector makes of one item (the paths this definition uses)."""
    selected: dict[str, Any] = {}
    for key, value in selector.items():
        if not key.endswith(".$"):
            selected[key] = value
        elif value == "$$.Map.Item.Value":
            selected[key[:-2]] = item
        else:
            found: Any = state
            for part in value.removeprefix("$.").split("."):
                found = found[part]
            selected[key[:-2]] = found
    return selected


def test_given_a_long_segment_when_it_runs_then_the_parent_history_holds_no_worker_events(
    world: StateMachineWorld,
) -> None:
    # Given one segment that takes many worker invocations
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    execution = world.start(forward(segments=1))
    assert execution["status"] == "SUCCEEDED", execution
    invocations = world.invocations["handlers.backfill_worker.handler"]
    assert invocations > 6
    # Then the parent's history has the plan, one Map Run and the verification: the segment's
    # loop runs in a child execution with its own history, so the parent's count does not grow
    # with the invocations (an inline Map added 9 per invocation to it)
    events = history(world, execution["executionArn"])
    assert not entered_states(events) & {"RestampSegment", "SegmentDone?", "ContinueFromCursor"}
    assert [e["type"] for e in events if e["type"].startswith("MapRun")] == [
        "MapRunStarted",
        "MapRunSucceeded",
    ]
    assert len(events) <= PARENT_HISTORY_EVENTS


def test_each_worker_invocation_adds_9_events_to_its_segments_child_execution(
    world: StateMachineWorld,
) -> None:
    # Given the Map's item processor run as what it is in AWS: an execution of its own, started
    # with the input the ItemSelector builds from the plan step's output
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    segments = world.definition["States"]["Segments"]
    assert segments["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
    child = {k: v for k, v in segments["ItemProcessor"].items() if k != "ProcessorConfig"}
    child_arn = world.sfn.create_state_machine(
        name="SegmentChild",
        definition=json.dumps(child),
        roleArn=f"arn:aws:iam::{ACCOUNT}:role/backfill-state-machine",
    )["stateMachineArn"]
    [plan_function] = [
        name for name, h in world.handlers.items() if h == "handlers.backfill_plan.handler"
    ]
    holder = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:parent:history-test"
    plan, failed = world.invoke(plan_function, {"request": forward(segments=1), "holder": holder})
    assert not failed, plan
    item = select_item(segments["ItemSelector"], plan, plan["segments"][0])

    # When the segment's loop runs to its end
    started = world.sfn.start_execution(stateMachineArn=child_arn, input=json.dumps(item))
    finished = world.wait(started["executionArn"])

    # Then it re-stamped the segment, and its history grew by 9 events per worker invocation
    assert finished["status"] == "SUCCEEDED", finished
    assert json.loads(finished["output"])["restamped"] == len(VALID)
    invocations = world.invocations["handlers.backfill_worker.handler"]
    assert invocations > 6
    events = history(world, started["executionArn"])
    assert len(events) == CHILD_FIXED_EVENTS + HISTORY_EVENTS_PER_WORKER_INVOCATION * invocations
    # and so the 24 h execution timeout ends a child long before its history limit: an
    # invocation that does not finish its segment runs until the safety margin is left
    shortest_invocation = WORKER_TIMEOUT.to_seconds() - WORKER_SAFETY_MARGIN_SECONDS
    most_invocations = EXECUTION_TIMEOUT.to_seconds() // shortest_invocation
    worst_child = CHILD_FIXED_EVENTS + HISTORY_EVENTS_PER_WORKER_INVOCATION * most_invocations
    assert (most_invocations, worst_child) == (1_440, 12_962)  # the runbook's figures
    assert worst_child < HISTORY_EVENT_LIMIT


# ---- following the execution: progress from the Map Run and its child executions -----------


def test_given_the_arn_when_segments_finish_then_the_cli_shows_them_before_the_execution_ends(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the CLI's progress recorded, and a verify step that waits (in the execution, still
    # RUNNING) until the CLI has shown both segments finished
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    shown: list[int] = []
    both_shown = threading.Event()
    real_show = backfill_output.RunProgress.show

    def show(
        progress: Any, *, completed: int, scanned: int, restamped: int, extra: str = ""
    ) -> None:
        shown.append(completed)
        if completed == 2:
            both_shown.set()
        real_show(progress, completed=completed, scanned=scanned, restamped=restamped, extra=extra)

    monkeypatch.setattr(backfill_output.RunProgress, "show", show)
    seen_while_running: list[bool] = []
    world.before_invoke["handlers.backfill_verify.handler"] = lambda: seen_while_running.append(
        both_shown.wait(timeout=20)
    )

    # When the CLI follows a two-segment run
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--state-machine-arn",
        world.arn,
        "--segments",
        "2",
        "--json",
        "--poll-interval",
        "0.05",
    )

    # Then the finished segments were shown while the execution still ran (the Map Run's item
    # counts: the segments' events are in their child executions, not in the parent's history)
    assert seen_while_running == [True], shown
    assert code == 3, err
    assert lines[0]["restamped"] == len(VALID)


PARENT_ARN = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:Backfill:run-1"
MAP_RUN_ARN = f"arn:aws:states:{REGION}:{ACCOUNT}:mapRun:Backfill/Segments:run-1"


def worker_succeeded(event_id: int, segment: int, restamped: int, done: bool) -> dict[str, Any]:
    """The TaskSucceeded event of one RestampSegment invocation (the Invoke response)."""
    result = SegmentResult(
        segment=segment,
        scanned=restamped + 1,
        restamped=restamped,
        cursor=None if done else {"PK": {"S": f"RSAGA#{restamped}"}, "SK": {"S": "META"}},
        done=done,
    )
    output = {"StatusCode": 200, "Payload": result.to_json()}
    return {
        "id": event_id,
        "type": "TaskSucceeded",
        "taskSucceededEventDetails": {"output": json.dumps(output)},
    }


@dataclass
class FakeChild:
    segment: int
    status: str = "RUNNING"
    events: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    error: str | None = None
    cause: str | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:states:{REGION}:{ACCOUNT}:execution:Backfill/Segments:child-{self.segment}"

    def invocation(self, restamped: int, done: bool = False) -> None:
        """One worker invocation: 9 events, the TaskSucceeded among them."""
        first = len(self.events) + 1
        self.events.extend({"id": first + i, "type": "StateTransition"} for i in range(9))
        self.events[first + 2] = worker_succeeded(first + 3, self.segment, restamped, done)
        if done:
            self.status = "SUCCEEDED"

    def fail(self, error: str, cause: str) -> None:
        self.status, self.error, self.cause = "FAILED", error, cause
        self.events.append({"id": len(self.events) + 1, "type": "ExecutionFailed"})


class FakeSfn:
    """What Step Functions reports of a run whose Segments Map is distributed: the parent's
    history holds no worker event; the Map Run counts items; each child has its own history.
    `on_describe` advances the run at each describe_execution of the parent."""

    def __init__(self, children: int, on_describe: Callable[[int], None] | None = None) -> None:
        self.children = [FakeChild(segment) for segment in range(children)]
        self.status = "RUNNING"
        self.error: str | None = None
        self.cause: str | None = None
        self.on_describe = on_describe
        self.describes = 0
        self.history_reads: list[str] = []

    def start_execution(self, **_: Any) -> dict[str, Any]:
        return {"executionArn": PARENT_ARN}

    def stop_execution(self, **_: Any) -> None:
        raise AssertionError("not stopped by the test")

    def describe_execution(self, executionArn: str) -> dict[str, Any]:
        if executionArn == PARENT_ARN:
            if self.on_describe is not None:
                self.on_describe(self.describes)
            self.describes += 1
            return {"status": self.status, "error": self.error, "cause": self.cause}
        [child] = [c for c in self.children if c.arn == executionArn]
        return {
            "status": child.status,
            "error": child.error,
            "cause": child.cause,
            "input": json.dumps({"segment": child.segment, "totalSegments": len(self.children)}),
        }

    def get_execution_history(
        self,
        executionArn: str,
        reverseOrder: bool = False,
        maxResults: int = 100,
        nextToken: str | None = None,
    ) -> dict[str, Any]:
        self.history_reads.append(executionArn)
        if executionArn == PARENT_ARN:
            events = [{"id": 1, "type": "ExecutionStarted"}, {"id": 2, "type": "MapRunStarted"}]
        else:
            [child] = [c for c in self.children if c.arn == executionArn]
            events = list(child.events)
        if reverseOrder:
            events.reverse()
        start = int(nextToken or 0)
        page: dict[str, Any] = {"events": events[start : start + maxResults]}
        if start + maxResults < len(events):
            page["nextToken"] = str(start + maxResults)
        return page

    def list_map_runs(self, executionArn: str) -> dict[str, Any]:
        assert executionArn == PARENT_ARN
        return {"mapRuns": [{"executionArn": PARENT_ARN, "mapRunArn": MAP_RUN_ARN}]}

    def describe_map_run(self, mapRunArn: str) -> dict[str, Any]:
        assert mapRunArn == MAP_RUN_ARN
        statuses = [c.status for c in self.children]
        return {
            "mapRunArn": MAP_RUN_ARN,
            "itemCounts": {
                "succeeded": statuses.count("SUCCEEDED"),
                "failed": statuses.count("FAILED"),
                "aborted": statuses.count("ABORTED"),
                "running": statuses.count("RUNNING"),
                "total": len(statuses),
            },
        }

    def list_executions(self, mapRunArn: str, maxResults: int = 100) -> dict[str, Any]:
        assert mapRunArn == MAP_RUN_ARN
        return {"executions": [{"executionArn": c.arn, "status": c.status} for c in self.children]}


def test_given_distributed_segments_when_followed_then_rows_and_segments_count_before_the_end() -> (
    None
):
    # Given a run of 40 segments, one of them with a long history already
    sfn = FakeSfn(40)
    for _ in range(300):
        sfn.children[0].invocation(restamped=10)
    follower = ExecutionFollower(sfn, PARENT_ARN)

    # When it is followed while segment 0 runs on and the others finish one invocation each
    follower.poll()
    for child in sfn.children[1:]:
        child.invocation(restamped=3, done=True)
    sfn.children[0].invocation(restamped=20)
    sfn.history_reads.clear()
    follower.poll()

    # Then the Map Run counts the finished segments at once
    assert (follower.finished_segments, follower.running_segments) == (39, 1)
    # and one poll reads at most CHILD_READS_PER_POLL child histories, one page each however
    # long a child's history, those that ended first: 32 of the 39 here, the rest next time
    child_reads = [arn for arn in sfn.history_reads if arn != PARENT_ARN]
    assert len(child_reads) == len(set(child_reads)) == CHILD_READS_PER_POLL
    follower.poll()
    # and the row counts are the children's newest worker results, before the run ends
    assert len(follower.segments) == 40
    assert follower.segments[0].restamped == 20
    assert sum(r.restamped for r in follower.segments.values()) == 20 + 39 * 3
    # and a child that ended and was read is not read again
    sfn.history_reads.clear()
    follower.poll()
    assert [arn for arn in sfn.history_reads if arn != PARENT_ARN] == [sfn.children[0].arn]


def test_given_an_endpoint_without_map_runs_when_followed_then_progress_degrades_not_crashes() -> (
    None
):
    class NoMapRuns(FakeSfn):
        def list_map_runs(self, executionArn: str) -> dict[str, Any]:
            raise AttributeError("'NoneType' object has no attribute 'pool'")  # moto's, once

    follower = ExecutionFollower(NoMapRuns(2), PARENT_ARN)
    follower.poll()
    follower.poll()
    assert (follower.finished_segments, follower.segments, follower.map_run_arn) == (0, {}, None)


def test_given_a_failed_segment_when_the_cli_follows_then_it_names_the_workers_error(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a run whose segment 1 fails after segment 0 re-stamped 5 rows and segment 1 7: the
    # parent fails with Step Functions' generic Map Run error, the worker's is in the child
    plant(world.dynamo, "migrating")

    def advance(describes: int) -> None:
        if describes == 0:
            sfn.children[0].invocation(restamped=5)
            sfn.children[1].invocation(restamped=7)
        elif describes == 2:
            sfn.children[1].fail("LeaseLostError", "the lease was taken over by alice@laptop/42")
            sfn.children[0].status = "ABORTED"
            sfn.status = "FAILED"
            sfn.error = "States.ExceedToleratedFailureThreshold"
            sfn.cause = "The specified tolerated failure threshold was exceeded"

    sfn = FakeSfn(2, on_describe=advance)
    real_client = CliContext.aws_client
    monkeypatch.setattr(
        CliContext,
        "aws_client",
        lambda cli, service, **kw: (
            sfn if service == "stepfunctions" else real_client(cli, service, **kw)
        ),
    )

    # When the CLI follows it
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--state-machine-arn",
        world.arn,
        "--segments",
        "2",
        "--json",
        "--poll-interval",
        "0.01",
    )

    # Then it fails naming the failed segment's own error and cause, not only the generic one;
    # its segments re-stamped rows first: interrupted, partly done (exit 6), not "nothing written"
    assert code == 6
    [summary] = lines
    assert summary["completionRecorded"] is False
    assert summary["error"] == "States.ExceedToleratedFailureThreshold"
    assert (summary["failedSegment"], summary["segmentError"]) == (1, "LeaseLostError")
    assert summary["segmentExecutionArn"] == sfn.children[1].arn
    assert "alice@laptop/42" in summary["segmentCause"]
    assert "segment 1 FAILED" in err
    assert "LeaseLostError: the lease was taken over by alice@laptop/42" in err
    # and the advice is the lost lease's: check the record before running again
    assert err.rstrip().endswith(f"; {LEASE_LOST_ADVICE}")
    assert "it converges" not in err
    # and the partial summary adds up the children's last worker results
    assert (summary["restamped"], summary["complete"]) == (5 + 7, False)


# ---- --follow, --stop, the stack's state machine, the estimate, the advice -------


class FakeCloudFormation:
    """The deployed stack's outputs (moto's CloudFormation cannot create this stack)."""

    def __init__(self, outputs: dict[str, str]) -> None:
        self.outputs = outputs
        self.asked: list[str] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        self.asked.append(StackName)
        listed = [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]
        return {"Stacks": [{"StackName": StackName, "Outputs": listed}]}


def with_stack(monkeypatch: pytest.MonkeyPatch, world: StateMachineWorld) -> FakeCloudFormation:
    cloudformation = FakeCloudFormation({"BackfillStateMachineArn9561ED01": world.arn})
    real_client = CliContext.aws_client
    monkeypatch.setattr(
        CliContext,
        "aws_client",
        lambda cli, service, **kw: (
            cloudformation if service == "cloudformation" else real_client(cli, service, **kw)
        ),
    )
    return cloudformation


def start_async(world: StateMachineWorld, execution_input: dict[str, Any]) -> str:
    arn: str = world.sfn.start_execution(
        stateMachineArn=world.arn,
        name=f"test-{uuid.uuid4().hex[:12]}",
        input=json.dumps(execution_input),
    )["executionArn"]
    return arn


def gate(world: StateMachineWorld, handler: str) -> threading.Event:
    """Hold every invocation of `handler` until the returned event is set (at most 20 s)."""
    opened = threading.Event()
    world.before_invoke[f"handlers.{handler}.handler"] = lambda: opened.wait(timeout=20)
    return opened


def test_given_a_running_execution_when_followed_without_an_arn_then_the_cli_attaches_to_it(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an execution started elsewhere (the console, a teammate), held at its plan step
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    held = gate(world, "backfill_plan")
    execution_arn = start_async(world, forward(segments=2))
    # the plan step is released once the CLI shows progress: it attached while RUNNING
    real_show = backfill_output.RunProgress.show

    def show(progress: Any, **kw: Any) -> None:
        held.set()
        real_show(progress, **kw)

    monkeypatch.setattr(backfill_output.RunProgress, "show", show)
    cloudformation = with_stack(monkeypatch, world)

    # When the operator follows "the" running execution, the state machine found in the stack
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--follow",
        "--stack-name",
        "RenewalSagaIndex",
        "--json",
        "--poll-interval",
        "0.05",
    )

    # Then it followed that execution to its end, with a run's exit code and report
    assert cloudformation.asked == ["RenewalSagaIndex"]
    assert code == 3, err  # complete; the anomalies remain
    [summary] = lines
    assert (summary["executionArn"], summary["status"]) == (execution_arn, "SUCCEEDED")
    assert summary["completionRecorded"] is True
    assert summary["stateVersion"] == 1  # from the plan step's ticket
    assert summary["restamped"] == len(VALID)
    # and every anomaly key of the state machine's output carries its reason
    assert sorted(k["PK"] for k in summary["anomalyKeys"]) == sorted(
        f"RSAGA#{s}" for s in ANOMALIES
    )
    assert all(k["reason"] for k in summary["anomalyKeys"])


def test_given_no_running_execution_when_followed_then_exit_1_saying_so(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(world.dynamo, "migrating")
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--follow",
        "--state-machine-arn",
        world.arn,
    )
    assert code == 1
    assert lines == []
    assert f"no backfill execution is running on {world.arn}" in err


def test_given_two_running_executions_when_stopped_without_an_arn_then_exit_1_listing_them(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(world.dynamo, VALID[:2])
    plant(world.dynamo, "migrating")
    held = gate(world, "backfill_plan")
    arns = [start_async(world, forward(dry_run=True, segments=1)) for _ in range(2)]
    try:
        code, lines, err = run_cli(
            capsys,
            "--table",
            world.dynamo.table_name,
            "backfill",
            "--stop",
            "--state-machine-arn",
            world.arn,
        )
    finally:
        held.set()
        for arn in arns:
            world.wait(arn)
    assert code == 1
    assert lines == []
    assert "2 backfill executions are running" in err
    assert "pass one of them" in err
    for arn in arns:
        assert arn in err


def test_given_a_running_execution_when_stopped_then_it_is_aborted_and_its_lease_released(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an execution whose plan took the lease, its workers held back
    seed(world.dynamo, VALID[:3])
    plant(world.dynamo, "migrating")
    held = gate(world, "backfill_worker")
    execution_arn = start_async(world, forward(segments=1))
    lease = world.wait_for_lease().lease
    assert lease is not None
    assert lease.holder == execution_arn
    # (moto's interpreter keeps an execution RUNNING after StopExecution: the call is checked)
    stops: list[dict[str, Any]] = []

    def record_stop(params: dict[str, Any], **_: Any) -> None:
        stops.append(params)

    session = boto3.DEFAULT_SESSION
    assert session is not None
    session.events.register("provide-client-params.sfn.StopExecution", record_stop)

    # When the operator stops it by its ARN
    try:
        code, lines, err = run_cli(
            capsys,
            "--table",
            world.dynamo.table_name,
            "backfill",
            "--stop",
            execution_arn,
            "--json",
        )
    finally:
        session.events.unregister("provide-client-params.sfn.StopExecution", record_stop)
        held.set()

    # Then it is stopped naming the operator, and the lease is free for the next run
    assert code == 0, err
    [outcome] = lines
    assert outcome["executionArn"] == execution_arn
    assert (outcome["statusBefore"], outcome["stopped"], outcome["leaseReleased"]) == (
        "RUNNING",
        True,
        True,
    )
    [stop] = stops
    assert (stop["executionArn"], stop["error"]) == (execution_arn, "StoppedByOperator")
    assert stop["cause"].startswith(f"saga-index backfill stopped by {outcome['stoppedBy']}")
    assert world.record().lease is None
    # and once it ended, stopping it again stops nothing and releases nothing, still exit 0
    world.wait(execution_arn)
    code, lines, _ = run_cli(
        capsys, "--table", world.dynamo.table_name, "backfill", "--stop", execution_arn, "--json"
    )
    assert code == 0
    assert (lines[0]["stopped"], lines[0]["leaseReleased"]) == (False, False)


def test_given_the_stack_when_a_deployed_dry_run_ends_then_its_report_carries_the_estimate(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(world.dynamo)
    plant(world.dynamo, "migrating")
    with_stack(monkeypatch, world)
    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--deployed",
        "--dry-run",
        "--max-writes-per-second",
        "20",
        "--json",
        "--poll-interval",
        "0.05",
    )
    assert code == 3, err
    [summary] = lines
    assert summary["status"] == "SUCCEEDED"
    estimate = summary["estimate"]
    assert (estimate["rowsToMove"], estimate["legacyKey"]) == (len(VALID), "off")
    assert estimate["seconds"] == pytest.approx(len(VALID) / 20)
    assert estimate["legacyKeyWcuPerSecond"] == pytest.approx(20 * estimate["legacyKeyWcuPerRow"])


def test_given_a_plan_refused_in_step_functions_when_followed_then_the_advice_is_the_refusals(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an execution started beside another run's live lease: its plan step refuses
    seed(world.dynamo, VALID[:3])
    plant(world.dynamo, "migrating")
    store = ControlStore(world.dynamo.new_client(), world.dynamo.table_name)
    acquire_lease(store, holder="alice@laptop/4242", token="hers", direction="forward")
    execution = world.start(forward())
    assert execution["error"] == "LeaseHeldError"

    code, lines, err = run_cli(
        capsys,
        "--table",
        world.dynamo.table_name,
        "backfill",
        "--follow",
        execution["executionArn"],
        "--json",
    )

    assert code == 1
    assert lines[0]["status"] == "FAILED"
    assert "execution FAILED: the plan step refused the run (LeaseHeldError)" in err
    assert "`saga-index status` shows the holder" in err
    assert "converges" not in err
