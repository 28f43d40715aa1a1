"""The SYNTHESISED backfill state machine, executed by moto's Step Functions interpreter.

The definition is taken from the template the CDK app writes (tokens resolved to a stand-in
account), every Lambda task is routed to the real handler named by the template's `Handler`,
in-process, with the environment the template gives that function. Nothing about the state
machine is re-described here: a change to infra/backfill.py is what runs.
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any
from urllib.parse import unquote

# Before the handler modules are imported: Powertools reads these at import.
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "RenewalSagaIndex")

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.response import StreamingBody
from moto import mock_aws

from saga_index import keys
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    VALID,
    assert_every_valid_saga_on_its_shard,
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

    def start(self, execution_input: dict[str, Any], phase: str) -> dict[str, Any]:
        """Run one execution to its end in the given deployed phase; describe_execution."""
        os.environ["SAGA_INDEX_PHASE"] = phase
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
        monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
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
            handlers={f"{k}": v for k, v in handlers.items()},
            environment=environment,
        )

        def invoke_in_process(params: dict[str, Any], **_: Any) -> Any:
            function = function_name_of(unquote(params["url_path"].split("/")[3]))
            payload = json.loads(params.get("body") or b"{}")
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
    # Given legacy sagas, anomalies and other entities, and the writers in `migrating`
    seed(world.dynamo)
    before = world.dynamo.scan_all()
    # When the synthesised state machine runs forward over three segments
    execution = world.start(forward(), phase="migrating")
    # Then it succeeds with the aggregated counts and a passed verification
    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    assert summary["restamped"] == len(VALID)
    assert summary["skipped"] == 0
    assert summary["anomalies"] == len(ANOMALIES)
    assert sorted(k["PK"] for k in summary["anomalyKeys"]) == sorted(
        f"RSAGA#{s}" for s in ANOMALIES
    )
    assert summary["scanned"] == len(before)
    assert summary["complete"] is True
    assert summary["verification"]["ok"] is True
    assert summary["verification"]["remainingAnomalies"] == len(ANOMALIES)
    assert_every_valid_saga_on_its_shard(world.dynamo)
    # and each segment was worked by several invocations, looped on their cursors
    assert world.invocations["handlers.backfill_worker.handler"] > 3 * 2
    assert world.invocations["handlers.backfill_plan.handler"] == 1
    assert world.invocations["handlers.backfill_verify.handler"] == 1


def test_given_a_forward_run_when_the_rollback_executes_then_the_table_is_byte_identical(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    before = world.dynamo.scan_all()
    assert world.start(forward(), phase="migrating")["status"] == "SUCCEEDED"
    assert world.dynamo.scan_all() != before

    rollback = {**forward(segments=2), "direction": "rollback"}
    execution = world.start(rollback, phase="rolling-back")

    assert execution["status"] == "SUCCEEDED", execution
    assert json.loads(execution["output"])["restamped"] == len(VALID)
    assert world.dynamo.scan_all() == before
    assert {s["GSI4PK"] for s in sagas(world.dynamo).values()} == {keys.LEGACY_GSI4PK}


def test_given_a_dry_run_when_it_executes_then_nothing_is_written(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    before = world.dynamo.scan_all()

    execution = world.start(forward(dry_run=True), phase="migrating")

    assert execution["status"] == "SUCCEEDED", execution
    summary = json.loads(execution["output"])
    assert (summary["dryRun"], summary["restamped"], summary["wouldRestamp"]) == (
        True,
        0,
        len(VALID),
    )
    assert world.dynamo.scan_all() == before


def test_given_writers_still_on_the_legacy_phase_when_a_forward_run_starts_then_it_is_refused(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo)
    before = world.dynamo.scan_all()

    execution = world.start(forward(), phase="legacy")

    assert execution["status"] == "FAILED"
    assert execution["error"] == "InvalidInputError"
    assert "phase migrating or sharded" in execution["cause"]
    assert world.dynamo.scan_all() == before
    assert "handlers.backfill_worker.handler" not in world.invocations


def test_given_a_bad_input_when_it_starts_then_the_execution_fails_naming_every_problem(
    world: StateMachineWorld,
) -> None:
    execution = world.start(
        {"direction": "sideways", "totalSegments": 0, "maxWritesPerSecond": -5, "dryRun": "yes"},
        phase="migrating",
    )

    assert execution["status"] == "FAILED"
    assert execution["error"] == "ValidationError"
    for field_name in ("direction", "totalSegments", "maxWritesPerSecond", "dryRun"):
        assert field_name in execution["cause"]


def test_given_a_row_left_on_the_legacy_key_when_verified_then_the_execution_fails_naming_it(
    world: StateMachineWorld,
) -> None:
    seed(world.dynamo, VALID[:6])

    def a_legacy_writer_stamps_a_new_row() -> None:
        world.dynamo.put_saga("late", "p-late")  # legacy key, usable personId

    world.before_invoke["handlers.backfill_verify.handler"] = a_legacy_writer_stamps_a_new_row
    execution = world.start(forward(segments=2), phase="migrating")

    assert execution["status"] == "FAILED"
    assert execution["error"] == "BackfillVerificationFailed"
    assert "RSAGA#late" in execution["cause"]
    assert "run the backfill again" in execution["cause"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    """The CLI's stdout lines; the in-process "Lambda" handlers log JSON to the same stdout, so
    their lines (logs, EMF) are told apart by shape."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    cli_lines = [line for line in lines if "_aws" not in line and "level" not in line]
    return int(exited.value.code or 0), cli_lines, err


def test_given_the_arn_when_the_cli_follows_the_execution_then_it_prints_the_summary_and_exits_3(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(world.dynamo)
    os.environ["SAGA_INDEX_PHASE"] = "migrating"

    code, lines, err = run_cli(
        capsys,
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

    assert code == 3, err  # complete, but the anomalies remain
    [summary] = lines
    assert summary["status"] == "SUCCEEDED"
    assert (summary["restamped"], summary["anomalies"]) == (len(VALID), len(ANOMALIES))
    assert {"direction", "dryRun", "scanned", "skipped", "wouldRestamp", "anomalyKeys"} <= set(
        summary
    )
    assert_every_valid_saga_on_its_shard(world.dynamo)


def test_given_the_arn_when_the_execution_fails_then_the_cli_exits_1_with_the_cause(
    world: StateMachineWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(world.dynamo, VALID[:3])
    os.environ["SAGA_INDEX_PHASE"] = "legacy"

    code, lines, err = run_cli(
        capsys, "backfill", "--state-machine-arn", world.arn, "--json", "--poll-interval", "0.05"
    )

    assert code == 1
    [summary] = lines
    assert summary["status"] == "FAILED"
    assert summary["error"] == "InvalidInputError"
    assert "run the backfill again" in err
