"""Least privilege, per function role, asserted exactly: every (action, resource, condition) the
role's policies grant, in both modes (the stack's own table, an existing table by name).

What every function's role carries: logs:CreateLogStream and logs:PutLogEvents on ITS OWN log
group only (no AWSLambdaBasicExecutionRole, which grants them on every log group), X-Ray's two
write actions (no resource-level permissions), and GetItem/Query of the control partition. A
scheduled function may also send to its own failed-invocations queue (Lambda delivers failed
asynchronous events with the function's role).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.names import CONTROL_PK, FENCE_PK_PREFIX, INDEX_NAME, OPEN_INDEX_NAME
from saga_index.layout_change.checks.drift._cursor import CURSOR_KEY
from tests.infra.template_tools import as_list, render, resources

pytestmark = pytest.mark.infra

# (action, rendered resource, condition as sorted JSON or None)
Grant = tuple[str, str, str | None]

IMPORTED_TABLE_ARN = (
    "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/propflow-prod"
)
CONTROL = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CONTROL_PK]}}
SAGA_ROWS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RSAGA#*"]}}
FENCE_SLOTS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RSAGA_INDEX#FENCE#*"]}}
# The drift guard's cursor: exactly one partition key, matched whole (StringEquals, no wildcard).
DRIFT_CURSOR = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["RSAGA_INDEX#DRIFT#CURSOR"]}}
DRIFT_SCAN = {
    "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    "ForAllValues:StringEquals": {
        "dynamodb:Attributes": [
            "PK",
            "SK",
            "sagaId",
            "personId",
            "GSI4PK",
            "GSI4SK",
            "state",
            "OpenSagaPK",
        ]
    },
}
# The drift guard's re-read of a row the open index got wrong: saga rows, what its rule reads.
DRIFT_OPEN_RECHECK = {
    **SAGA_ROWS,
    "ForAllValues:StringEquals": {
        "dynamodb:Attributes": ["PK", "SK", "personId", "state", "OpenSagaPK"]
    },
    "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
}
VERIFY_READ = {
    **SAGA_ROWS,
    "ForAllValues:StringEquals": {
        "dynamodb:Attributes": ["PK", "SK", "GSI4PK", "personId", "state", "OpenSagaPK"]
    },
    "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
}
# An open-index run's verification: a consistent Scan of the saga rows, what it judges only.
VERIFY_SCAN = {
    "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    "ForAllValues:StringEquals": {
        "dynamodb:Attributes": ["PK", "SK", "personId", "state", "OpenSagaPK"]
    },
}
# A layout re-stamp's attributes and an open-index run's (state in its condition only).
WORKER_ROW = ["PK", "SK", "GSI4PK", "GSI4SK", "personId", "state", "OpenSagaPK"]
WORKER_SCAN = {
    "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
    "ForAllValues:StringEquals": {"dynamodb:Attributes": [*WORKER_ROW, "entityType"]},
}
WORKER_UPDATE = {
    **SAGA_ROWS,
    "ForAllValues:StringEquals": {"dynamodb:Attributes": WORKER_ROW},
    "StringEqualsIfExists": {"dynamodb:ReturnValues": "NONE"},
}
HANDLERS = {
    "workflow-health-sweep": "handlers.sweeps.workflow_health_sweep",
    "retry-failed-prepare": "handlers.sweeps.retry_failed_prepare",
    "stuck-saga-sweep": "handlers.sweeps.stuck_saga_sweep",
    "agent-metrics-snapshot": "handlers.sweeps.agent_metrics_snapshot",
    "drift-guard": "handlers.drift_guard.handler",
    "backfill-plan": "handlers.backfill_plan.handler",
    "backfill-worker": "handlers.backfill_worker.handler",
    "backfill-verify": "handlers.backfill_verify.handler",
}
# Every function that reads the open-saga index: the four sweeps, the drift guard, the verify.
OPEN_INDEX_READERS = {
    "workflow-health-sweep",
    "retry-failed-prepare",
    "stuck-saga-sweep",
    "agent-metrics-snapshot",
    "drift-guard",
    "backfill-verify",
}
SCHEDULED = {
    "workflow-health-sweep",
    "retry-failed-prepare",
    "stuck-saga-sweep",
    "agent-metrics-snapshot",
    "drift-guard",
}


def _condition(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def function_ids(template: dict[str, Any]) -> dict[str, str]:
    by_handler = {handler: name for name, handler in HANDLERS.items()}
    found = {
        by_handler[r["Properties"]["Handler"]]: logical_id
        for logical_id, r in resources(template, "AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] in by_handler
    }
    assert set(found) == set(HANDLERS)
    return found


def role_of(template: dict[str, Any], function_id: str) -> str:
    role = template["Resources"][function_id]["Properties"]["Role"]
    return str(render(role)).removeprefix("${").removesuffix(".Arn}")


def granted(template: dict[str, Any], role_id: str) -> set[Grant]:
    pairs: set[Grant] = set()
    for policy in resources(template, "AWS::IAM::Policy").values():
        if "${" + role_id + "}" not in [render(r) for r in policy["Properties"]["Roles"]]:
            continue
        for statement in render(policy["Properties"]["PolicyDocument"]["Statement"]):
            assert statement["Effect"] == "Allow", statement
            assert set(statement) <= {"Effect", "Action", "Resource", "Condition"}, statement
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    pairs.add((action, str(resource), _condition(statement.get("Condition"))))
    return pairs


def log_group_arn(template: dict[str, Any], function_id: str) -> str:
    logging = template["Resources"][function_id]["Properties"]["LoggingConfig"]
    return "${" + logging["LogGroup"]["Ref"] + ".Arn}"


def failure_queue_arn(template: dict[str, Any], function_id: str) -> str:
    [config] = [
        r["Properties"]
        for r in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    return str(render(config["DestinationConfig"]["OnFailure"]["Destination"]))


def expected(template: dict[str, Any], name: str, function_id: str, imported: bool) -> set[Grant]:
    if imported:
        assert resources(template, "AWS::DynamoDB::Table") == {}
        table = IMPORTED_TABLE_ARN
    else:
        (table_id,) = resources(template, "AWS::DynamoDB::Table")
        table = "${" + table_id + ".Arn}"
    index = f"{table}/index/{INDEX_NAME}"
    # The sparse open-saga index: Query only, for the functions that read open sagas (the
    # sweeps), check them (the drift guard) or verify a move (the backfill's verify).
    open_index = f"{table}/index/{OPEN_INDEX_NAME}"
    (bus_id,) = resources(template, "AWS::Events::EventBus")
    bus = "${" + bus_id + ".Arn}"
    logs = log_group_arn(template, function_id)

    def plain(action: str, resource: str) -> Grant:
        return (action, resource, None)

    def on(action: str, condition: dict[str, Any]) -> Grant:
        return (action, table, _condition(condition))

    grants = {
        plain("logs:CreateLogStream", logs),
        plain("logs:PutLogEvents", logs),
        plain("xray:PutTelemetryRecords", "*"),
        plain("xray:PutTraceSegments", "*"),
        on("dynamodb:GetItem", CONTROL),
        on("dynamodb:Query", CONTROL),
    }
    if name in SCHEDULED:
        grants.add(plain("sqs:SendMessage", failure_queue_arn(template, function_id)))
    if name in {"workflow-health-sweep", "retry-failed-prepare", "stuck-saga-sweep"}:
        grants |= {plain("dynamodb:Query", index), plain("events:PutEvents", bus)}
    if name == "agent-metrics-snapshot":
        grants.add(plain("dynamodb:Query", index))
    if name in OPEN_INDEX_READERS:
        grants.add(plain("dynamodb:Query", open_index))
    if name == "retry-failed-prepare":
        grants.add(on("dynamodb:UpdateItem", SAGA_ROWS))
    if name == "drift-guard":
        grants |= {
            plain("dynamodb:Query", index),
            on("dynamodb:Scan", DRIFT_SCAN),
            # its cursor: read and overwritten whole, on its own partition key only
            on("dynamodb:GetItem", DRIFT_CURSOR),
            on("dynamodb:PutItem", DRIFT_CURSOR),
            on("dynamodb:GetItem", DRIFT_OPEN_RECHECK),
        }
    if name in {"backfill-plan", "backfill-verify"}:
        grants |= {on("dynamodb:PutItem", CONTROL), on("dynamodb:UpdateItem", CONTROL)}
    if name == "backfill-plan":
        # taking the run arms its fence slots: slot 0 read, every slot put
        grants |= {on("dynamodb:GetItem", FENCE_SLOTS), on("dynamodb:PutItem", FENCE_SLOTS)}
    if name == "backfill-verify":
        grants |= {
            plain("dynamodb:Query", index),
            on("dynamodb:GetItem", VERIFY_READ),
            on("dynamodb:Scan", VERIFY_SCAN),
        }
    if name == "backfill-worker":
        grants |= {
            on("dynamodb:UpdateItem", CONTROL),
            # the lease fence: every re-stamp's transaction condition-checks its segment's
            # fence slot (and reads it to say which epoch armed it when refused); nothing of
            # the control partition is in a re-stamp
            on("dynamodb:ConditionCheckItem", FENCE_SLOTS),
            on("dynamodb:GetItem", FENCE_SLOTS),
            on("dynamodb:Scan", WORKER_SCAN),
            on("dynamodb:UpdateItem", WORKER_UPDATE),
        }
    return grants


@pytest.mark.parametrize(
    ("synth", "imported"), [("owned_synth", False), ("import_mode_synth", True)]
)
@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_given_each_function_then_its_role_grants_exactly_these_actions_resources_conditions(
    synth: str, imported: bool, name: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    function_id = function_ids(template)[name]
    role_id = role_of(template, function_id)

    assert granted(template, role_id) == expected(template, name, function_id, imported)


@pytest.mark.parametrize("name", sorted(HANDLERS))
def test_given_each_function_then_its_role_is_its_own_with_no_managed_or_inline_policy(
    owned_synth: Any, name: str
) -> None:
    template = owned_synth.template_json
    function_id = function_ids(template)[name]
    role_id = role_of(template, function_id)
    role = template["Resources"][role_id]["Properties"]

    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role
    assert [s["Principal"] for s in role["AssumeRolePolicyDocument"]["Statement"]] == [
        {"Service": "lambda.amazonaws.com"}
    ]
    others = [fid for fid in function_ids(template).values() if fid != function_id]
    assert all(role_of(template, other) != role_id for other in others)


def test_given_every_function_role_then_no_log_permission_names_another_log_group(
    owned_synth: Any,
) -> None:
    template = owned_synth.template_json
    for name, function_id in function_ids(template).items():
        logs = {
            resource
            for action, resource, _ in granted(template, role_of(template, function_id))
            if action.startswith("logs:")
        }
        assert logs == {log_group_arn(template, function_id)}, name


def test_the_saga_partition_pattern_matches_saga_rows_and_not_the_control_record() -> None:
    # SAGA_ROWS is written out above; tie it to the key scheme the code writes.
    (pattern,) = SAGA_ROWS["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert fnmatchcase(keys.saga_table_key("s-1")["PK"], pattern)
    assert not fnmatchcase(CONTROL_PK, pattern)
    assert not fnmatchcase("PERSON#p-1", pattern)


def test_the_drift_cursor_grant_names_exactly_its_key_and_no_other_item() -> None:
    # DRIFT_CURSOR is written out above; tie it to the key the guard writes, and show that it
    # reaches neither the control partition nor a fence slot nor a saga row.
    (key,) = DRIFT_CURSOR["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]
    assert key == CURSOR_KEY["PK"]["S"]
    for other in (CONTROL_PK, f"{FENCE_PK_PREFIX}0", keys.saga_table_key("s-1")["PK"]):
        assert other != key
    assert not fnmatchcase(key, SAGA_ROWS["ForAllValues:StringLike"]["dynamodb:LeadingKeys"][0])
