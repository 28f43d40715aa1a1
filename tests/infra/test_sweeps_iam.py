"""Least privilege of the four sweep functions, asserted on the synthesised template in both
modes: Query on the index only, PutEvents on the sweeps' bus, UpdateItem for the retry sweep
only, reading the control record (GetItem/Query of its partition only), and nothing else beyond
what every function of the stack carries."""

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
BASIC_EXECUTION = "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
# Active tracing: X-Ray has no resource-level permissions.
TRACING = {("xray:PutTelemetryRecords", "*"), ("xray:PutTraceSegments", "*")}
IMPORTED_TABLE_ARN = (
    "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/propflow-prod"
)


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


def expected_grants(job: str, table: str, bus: str) -> set[tuple[str, str]]:
    sweep = next(s for s in SWEEPS if s.job_name == job)
    expected = TRACING | {("dynamodb:Query", f"{table}/index/{INDEX}")}
    if sweep.emits_events:
        expected.add(("events:PutEvents", bus))
    if sweep.claims_retries:
        expected.add(("dynamodb:UpdateItem", table))
    return expected


@pytest.mark.parametrize(
    ("synth", "imported"), [("owned_synth", False), ("import_mode_synth", True)]
)
def test_given_each_sweep_then_its_role_grants_exactly_its_sweeps_needs(
    synth: str, imported: bool, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    table, bus = table_arn(template, imported), bus_arn(template)
    roles = resources(template, "AWS::IAM::Role")

    for job, function in sweep_functions(template).items():
        role_id = render(function["Role"]).removeprefix("${").removesuffix(".Arn}")
        role = roles[role_id]["Properties"]
        assert [render(arn) for arn in role.get("ManagedPolicyArns", [])] == [BASIC_EXECUTION], job
        assert "Policies" not in role, job
        statements, control = split_control(role_statements(template, role_id))
        assert grants(statements) == expected_grants(job, table, bus), job
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
        actions = {action for action, _ in grants(statements) | control}
        if actions & {"dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem"}:
            writers.add(job)
        assert not any(a.endswith("*") for a in actions), (job, actions)
        assert "dynamodb:Scan" not in actions, job
    assert writers == {"retry-failed-prepare"}
