"""The backfill as synthesised: the state machine's shape, logging and tracing, and roles that
can do exactly what each step needs (the worker: Scan and UpdateItem on the table, nothing
more; each function: read and write the control record's items, no other item)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.backfill import LAMBDA_SERVICE_ERRORS, VERIFICATION_FAILED_ERROR, WORKER_MAX_ATTEMPTS
from infra.observability.dashboard import BACKFILL_METRICS
from infra.table import FENCE_SLOT_CONDITION
from saga_index.index.names import BACKFILL_WORKER_METRICS as WORKER_METRICS
from saga_index.index.names import (
    INDEX_NAME,
    MAX_CONCURRENT_SEGMENTS,
    OPEN_INDEX_NAME,
    SERVICE_BACKFILL_WORKER,
)
from saga_index.layout_change.backfill.pacing import SegmentThrottledError
from saga_index.layout_change.backfill.segment import DEFAULT_SAFETY_MARGIN_SECONDS
from tests.infra.template_tools import CONTROL_CONDITION, CONTROL_READ, CONTROL_WRITE

pytestmark = pytest.mark.infra

HANDLERS = {
    "plan": "handlers.backfill_plan.handler",
    "worker": "handlers.backfill_worker.handler",
    "verify": "handlers.backfill_verify.handler",
}


def resources(template: Template, kind: str) -> dict[str, Any]:
    return dict(template.find_resources(kind))


def function_id(template: Template, role: str) -> str:
    [logical_id] = [
        logical_id
        for logical_id, r in resources(template, "AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] == HANDLERS[role]
    ]
    return logical_id


def statements_of_role(template: Template, role_logical_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_logical_id} in policy["Properties"]["Roles"]:
            found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return found


def function_statements(template: Template, role: str) -> list[dict[str, Any]]:
    fn = resources(template, "AWS::Lambda::Function")[function_id(template, role)]
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    return statements_of_role(template, role_id)


def data_actions(
    statements: list[dict[str, Any]], *, control: bool = False, fence: bool = False
) -> list[tuple[str, str]]:
    """(action, resource) pairs of the dynamodb statements, resources rendered as JSON: the
    saga-data grants, or (control=True) the grants limited to the control record's items, or
    (fence=True) those limited to the backfill's fence slots."""
    pairs: list[tuple[str, str]] = []
    for statement in statements:
        condition = statement.get("Condition")
        if (condition == CONTROL_CONDITION) is not control:
            continue
        if (condition == FENCE_SLOT_CONDITION) is not fence:
            continue
        # Saga-data grants may carry their own conditions (saga rows only, attribute lists):
        # tests/infra/test_function_policies.py asserts them exactly.
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        targets = statement["Resource"]
        targets = targets if isinstance(targets, list) else [targets]
        for action in actions:
            if action.startswith("dynamodb:"):
                pairs.extend((action, json.dumps(t, sort_keys=True)) for t in targets)
    return sorted(pairs)


def table_arn(template: Template) -> str:
    [table_id] = resources(template, "AWS::DynamoDB::Table")
    return json.dumps({"Fn::GetAtt": [table_id, "Arn"]}, sort_keys=True)


def index_arn(template: Template, index_name: str = INDEX_NAME) -> str:
    [table_id] = resources(template, "AWS::DynamoDB::Table")
    arn = {"Fn::Join": ["", [{"Fn::GetAtt": [table_id, "Arn"]}, f"/index/{index_name}"]]}
    return json.dumps(arn, sort_keys=True)


def definition(template: Template) -> dict[str, Any]:
    [machine] = resources(template, "AWS::StepFunctions::StateMachine").values()
    parts = machine["Properties"]["DefinitionString"]["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    return dict(json.loads(text))


# ---- least privilege --------------------------------------------------------------------------


def test_the_worker_may_scan_the_table_and_update_items_and_nothing_more(
    owned_template: Template,
) -> None:
    arn = table_arn(owned_template)
    assert data_actions(function_statements(owned_template, "worker")) == [
        ("dynamodb:Scan", arn),
        ("dynamodb:UpdateItem", arn),
    ]


def test_the_verifier_may_query_the_indexes_read_single_rows_and_scan_the_table(
    owned_template: Template,
) -> None:
    # The Scan: an open-index run's verification (its projection: test_function_policies.py).
    assert data_actions(function_statements(owned_template, "verify")) == [
        ("dynamodb:GetItem", table_arn(owned_template)),
        ("dynamodb:Query", index_arn(owned_template, OPEN_INDEX_NAME)),
        ("dynamodb:Query", index_arn(owned_template)),
        ("dynamodb:Scan", table_arn(owned_template)),
    ]


def test_the_planner_has_no_data_access(owned_template: Template) -> None:
    assert data_actions(function_statements(owned_template, "plan")) == []


@pytest.mark.parametrize("role", sorted(HANDLERS))
def test_each_backfill_function_may_read_and_write_only_the_control_records_items(
    owned_template: Template, role: str
) -> None:
    # The lease, its heartbeat, the runtime throttle and the recorded result live in the control
    # record; the IAM condition keeps these writes off every saga row. The worker only
    # heartbeats an existing lease: UpdateItem, never PutItem (least privilege); its fenced
    # re-stamps check their fence slot, never the control partition (no ConditionCheckItem
    # here).
    arn = table_arn(owned_template)
    worker = {"dynamodb:UpdateItem"}
    writes = worker if role == "worker" else CONTROL_WRITE
    assert data_actions(function_statements(owned_template, role), control=True) == sorted(
        (action, arn) for action in CONTROL_READ | writes
    )


@pytest.mark.parametrize(
    ("role", "actions"),
    [
        ("plan", ["dynamodb:GetItem", "dynamodb:PutItem"]),
        ("worker", ["dynamodb:ConditionCheckItem", "dynamodb:GetItem"]),
        ("verify", []),
    ],
)
def test_the_fence_slots_are_armed_by_the_planner_and_only_checked_by_the_worker(
    owned_template: Template, role: str, actions: list[str]
) -> None:
    # The plan step arms the run's fence slots (read slot 0, put each slot); every re-stamp's
    # transaction condition-checks its segment's slot; nobody may update or delete one.
    arn = table_arn(owned_template)
    assert data_actions(function_statements(owned_template, role), fence=True) == [
        (action, arn) for action in actions
    ]


def test_every_backfill_statement_names_its_resources(owned_template: Template) -> None:
    for role in HANDLERS:
        for statement in function_statements(owned_template, role):
            if any(a.startswith("dynamodb:") for a in statement["Action"]):
                assert statement["Resource"] != "*"


def test_in_import_mode_the_worker_grant_points_at_the_named_table(
    import_mode_template: Template,
) -> None:
    statements = [
        s
        for s in function_statements(import_mode_template, "worker")
        if s.get("Condition") not in (CONTROL_CONDITION, FENCE_SLOT_CONDITION)
        and str(s["Action"]).startswith("dynamodb:")
    ]
    assert sorted(s["Action"] for s in statements) == ["dynamodb:Scan", "dynamodb:UpdateItem"]
    for statement in statements:
        rendered = json.dumps(statement["Resource"])
        assert ":table/propflow-prod" in rendered
        assert "/index/" not in rendered


def test_the_state_machine_may_invoke_exactly_the_three_backfill_functions(
    owned_template: Template,
) -> None:
    [machine] = resources(owned_template, "AWS::StepFunctions::StateMachine").values()
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoked = set()
    for statement in statements_of_role(owned_template, role_id):
        if statement["Action"] == "lambda:InvokeFunction":
            for target in statement["Resource"]:
                rendered = json.dumps(target)
                invoked.update(
                    fid
                    for fid in resources(owned_template, "AWS::Lambda::Function")
                    if f'"{fid}"' in rendered
                )
    assert invoked == {function_id(owned_template, role) for role in HANDLERS}


# ---- the functions -------------------------------------------------------------------------


def test_the_worker_stops_before_its_timeout_with_few_attempts_per_request(
    owned_template: Template,
) -> None:
    worker = resources(owned_template, "AWS::Lambda::Function")[
        function_id(owned_template, "worker")
    ]["Properties"]
    variables = worker["Environment"]["Variables"]
    assert variables["SAGA_INDEX_MAX_ATTEMPTS"] == str(WORKER_MAX_ATTEMPTS)
    margin = int(variables["BACKFILL_SAFETY_MARGIN_SECONDS"])
    assert margin == DEFAULT_SAFETY_MARGIN_SECONDS
    # one write's worst botocore backoff (1+2+4+... s) fits in the margin
    assert sum(2**n for n in range(WORKER_MAX_ATTEMPTS - 1)) < margin
    # about a minute of work per invocation: a stopped execution stops writing soon
    assert 2 * margin <= worker["Timeout"] <= 180
    assert worker["TracingConfig"] == {"Mode": "Active"}


def test_the_dashboard_reads_the_metrics_the_worker_publishes(owned_template: Template) -> None:
    worker = resources(owned_template, "AWS::Lambda::Function")[
        function_id(owned_template, "worker")
    ]["Properties"]
    assert worker["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == SERVICE_BACKFILL_WORKER
    assert set(BACKFILL_METRICS) <= set(WORKER_METRICS)


# ---- the state machine ---------------------------------------------------------------------


def test_the_state_machine_logs_everything_to_a_retained_log_group_and_traces(
    owned_template: Template,
) -> None:
    owned_template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineType": "STANDARD",
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": {
                "Level": "ALL",
                "IncludeExecutionData": True,
                "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": Match.any_value()}}],
            },
        },
    )
    [machine] = resources(owned_template, "AWS::StepFunctions::StateMachine").values()
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]
    log_group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    log_group = resources(owned_template, "AWS::Logs::LogGroup")[log_group_id]
    assert log_group["DeletionPolicy"] == "Retain"
    assert log_group["Properties"]["RetentionInDays"] == 90


def test_the_definition_plans_then_maps_segments_then_verifies(
    owned_template: Template,
) -> None:
    states = definition(owned_template)["States"]
    assert definition(owned_template)["StartAt"] == "PlanSegments"
    assert states["PlanSegments"]["Next"] == "Segments"
    segments = states["Segments"]
    assert segments["Type"] == "Map"
    assert segments["MaxConcurrency"] == MAX_CONCURRENT_SEGMENTS
    assert segments["ItemsPath"] == "$.segments"
    assert segments["ItemSelector"]["segment.$"] == "$$.Map.Item.Value"
    assert segments["Next"] == "VerifyBackfill"
    # each segment's loop is a Standard child execution with its own history (an inline Map
    # kept every invocation in the parent's 25,000 events); the items come from the plan's
    # state, the results go back to it, and one failed segment fails the run
    assert segments["ItemProcessor"]["ProcessorConfig"] == {
        "Mode": "DISTRIBUTED",
        "ExecutionType": "STANDARD",
    }
    assert not {
        "ItemReader",
        "ResultWriter",
        "ItemBatcher",
        "ToleratedFailurePercentage",
        "ToleratedFailureCount",
    } & set(segments)
    assert states["VerifyBackfill"]["Next"] == "Verified?"
    verdict = states["Verified?"]
    assert verdict["Choices"] == [
        {"Variable": "$.verification.ok", "BooleanEquals": True, "Next": "BackfillComplete"}
    ]
    assert states[verdict["Default"]] == {
        "Type": "Fail",
        "Error": VERIFICATION_FAILED_ERROR,
        "CausePath": "$.verification.message",
    }


def test_each_segment_loops_the_worker_until_it_says_the_segment_is_done(
    owned_template: Template,
) -> None:
    # Not on a null cursor: a paused worker may return before its segment's first row.
    processor = definition(owned_template)["States"]["Segments"]["ItemProcessor"]
    states = processor["States"]
    assert processor["StartAt"] == "RestampSegment"
    assert states["RestampSegment"]["Next"] == "SegmentDone?"
    assert states["SegmentDone?"]["Choices"] == [
        {"Variable": "$.invocation.output.done", "BooleanEquals": True, "Next": "SegmentFinished"}
    ]
    assert states["SegmentDone?"]["Default"] == "ContinueFromCursor"
    again = states["ContinueFromCursor"]
    assert again["Next"] == "RestampSegment"
    assert again["Parameters"]["cursor.$"] == "$.invocation.output.cursor"
    assert again["Parameters"]["totals.$"] == "$.invocation.output"
    # the run's ticket (the record's move and the lease token) reaches every invocation
    assert again["Parameters"]["run.$"] == "$.run"
    segments = definition(owned_template)["States"]["Segments"]
    assert segments["ItemSelector"]["run.$"] == "$.run"
    assert states["SegmentFinished"]["End"] is True


def test_lambda_service_errors_and_throttles_are_retried_with_backoff_and_jitter(
    owned_template: Template,
) -> None:
    states = definition(owned_template)["States"]
    worker = states["Segments"]["ItemProcessor"]["States"]["RestampSegment"]
    for task in (states["PlanSegments"], worker, states["VerifyBackfill"]):
        [service] = [r for r in task["Retry"] if r["ErrorEquals"] == LAMBDA_SERVICE_ERRORS]
        assert service["BackoffRate"] == 2
        assert service["JitterStrategy"] == "FULL"
        assert service["MaxAttempts"] >= 3
    throttled_error = SegmentThrottledError.__name__
    [throttled] = [r for r in worker["Retry"] if r["ErrorEquals"] == [throttled_error]]
    assert throttled["IntervalSeconds"] >= 30
    assert throttled["BackoffRate"] == 2
    assert throttled["JitterStrategy"] == "FULL"
    # input errors are never retried: they fail the execution with their cause
    retried = {
        e
        for task in (states["PlanSegments"], worker)
        for r in task["Retry"]
        for e in r["ErrorEquals"]
    }
    assert not retried & {"ValidationError", "InvalidInputError", "States.ALL"}


def test_the_state_machine_arn_is_an_output(owned_template: Template) -> None:
    outputs = owned_template.find_outputs("*")
    assert any(
        "StateMachineArn" in name and "backfill --state-machine-arn" in o["Description"]
        for name, o in outputs.items()
    )
