"""Least privilege of the four sweep functions, asserted on the synthesised template in both
modes: Query on the two indexes only (GSI4 and the open-saga index), PutEvents on the sweeps'
bus, UpdateItem of saga rows for the retry sweep only, reading the control record
(GetItem/Query of its partition only), sending to its own failed-invocations queue, and
nothing else beyond what every function of the stack carries (its own log group, X-Ray)."""

from __future__ import annotations

from typing import Any

import pytest

from infra.sweeps import SWEEPS
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import (
    CONTROL_READ,
    grants,
    render,
    resources,
    role_statements,
    split_control,
)

pytestmark = pytest.mark.infra

INDEX = "renewal-saga-person-index"
OPEN_INDEX = "renewal-saga-open-index"
# UpdateItem only of saga rows (their partition key starts with "RSAGA#").
SAGA_ROWS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RSAGA#*"]}}
# Active tracing: X-Ray has no resource-level permissions.
TRACING = {("xray:PutTelemetryRecords", "*"), ("xray:PutTraceSegments", "*")}
IMPORTED_TABLE_ARN = (
    "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/propflow-prod"
)


def sweep_function_ids(template: dict[str, Any]) -> dict[str, str]:
    handlers = {f"handlers.sweeps.{sweep.handler}": sweep.job_name for sweep in SWEEPS}
    return {
        handlers[r["Properties"]["Handler"]]: logical_id
        for logical_id, r in resources(template, "AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] in handlers
    }


def sweep_functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Function properties by job name, found by their handler."""
    handlers = {f"handlers.sweeps.{sweep.handler}": sweep.job_name for sweep in SWEEPS}
    found = {}
    for resource in resources(template, "AWS::Lambda::Function").values():
        handler = resource["Properties"]["Handler"]
        if handler in handlers:
            found[handlers[handler]] = resource["Properties"]
    assert set(found) == {sweep.job_name for sweep in SWEEPS}
    return found


def table_arn(template: dict[str, Any], imported: bool) -> str:
    if imported:
        assert resources(template, "AWS::DynamoDB::Table") == {}
        return IMPORTED_TABLE_ARN
    (table_id,) = resources(template, "AWS::DynamoDB::Table")
    return "${" + table_id + ".Arn}"


def bus_arn(template: dict[str, Any]) -> str:
    (bus_id,) = resources(template, "AWS::Events::EventBus")
    return "${" + bus_id + ".Arn}"


def own_log_group(template: dict[str, Any], function: dict[str, Any]) -> str:
    return "${" + function["LoggingConfig"]["LogGroup"]["Ref"] + ".Arn}"


def own_failure_queue(template: dict[str, Any], function_id: str) -> str:
    [config] = [
        r["Properties"]
        for r in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return str(render(config["DestinationConfig"]["OnFailure"]["Destination"]))


def expected_grants(
    job: str, table: str, bus: str, log_group: str, failure_queue: str
) -> set[tuple[str, str]]:
    sweep = next(s for s in SWEEPS if s.job_name == job)
    expected = TRACING | {
        ("dynamodb:Query", f"{table}/index/{INDEX}"),
        # getAllOpenSagas reads the sparse open-saga index once the move switches it there.
        ("dynamodb:Query", f"{table}/index/{OPEN_INDEX}"),
        ("logs:CreateLogStream", log_group),
        ("logs:PutLogEvents", log_group),
        ("sqs:SendMessage", failure_queue),
    }
    if sweep.emits_events:
        expected.add(("events:PutEvents", bus))
    return expected


def split_saga_rows(
    statements: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], set[tuple[str, str]]]:
    """(the rest, the (action, resource) pairs of the grants conditioned on saga rows)."""
    rest = [s for s in statements if s.get("Condition") != SAGA_ROWS]
    saga_statements = [s for s in statements if s.get("Condition") == SAGA_ROWS]
    saga = grants([{k: v for k, v in s.items() if k != "Condition"} for s in saga_statements])
    return rest, saga


@pytest.mark.parametrize(
    ("synth", "imported"), [("owned_synth", False), ("import_mode_synth", True)]
)
def test_given_each_sweep_then_its_role_grants_exactly_its_sweeps_needs(
    synth: str, imported: bool, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    table, bus = table_arn(template, imported), bus_arn(template)
    roles = resources(template, "AWS::IAM::Role")

    ids = sweep_function_ids(template)
    for job, function in sweep_functions(template).items():
        role_id = render(function["Role"]).removeprefix("${").removesuffix(".Arn}")
        role = roles[role_id]["Properties"]
        # Not AWSLambdaBasicExecutionRole: it writes every log group.
        assert "ManagedPolicyArns" not in role, job
        assert "Policies" not in role, job
        statements, control = split_control(role_statements(template, role_id))
        statements, saga_rows = split_saga_rows(statements)
        log_group = own_log_group(template, function)
        failure_queue = own_failure_queue(template, ids[job])
        assert grants(statements) == expected_grants(job, table, bus, log_group, failure_queue), job
        claims = next(s for s in SWEEPS if s.job_name == job).claims_retries
        assert saga_rows == ({("dynamodb:UpdateItem", table)} if claims else set()), job
        # The sweeps follow the control record; they never write it.
        assert control == {(action, table) for action in CONTROL_READ}, job


def test_given_the_stack_then_only_the_retry_sweep_may_update_items(
    owned_synth: Synthesised,
) -> None:
    template = owned_synth.template_json
    writers = set()
    for job, function in sweep_functions(template).items():
        role_id = render(function["Role"]).removeprefix("${").removesuffix(".Arn}")
        statements, control = split_control(role_statements(template, role_id))
        statements, saga_rows = split_saga_rows(statements)
        actions = {action for action, _ in grants(statements) | control | saga_rows}
        if actions & {"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"}:
            writers.add(job)
        assert not any(a.endswith("*") for a in actions), (job, actions)
        assert "dynamodb:Scan" not in actions, job
    assert writers == {"retry-failed-prepare"}
