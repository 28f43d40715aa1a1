"""Every AWS call a function made during its rehearsal is allowed by its role's policy in the
template, resource by resource (table ARN, index ARN, bus ARN) and, where a statement carries a
`dynamodb:LeadingKeys` condition, partition by partition (the control record's items); and every
permission the role grants was used, or is listed below with the reason it cannot be exercised
here."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import pytest

from saga_index.names import CONTROL_PK
from tests.support.rehearsal.scenario import BACKFILL_HANDLERS, Rehearsal
from tests.support.rehearsal.server import World
from tests.support.rehearsal.stack import ACCOUNT, REGION, StandIn, Synth

pytestmark = pytest.mark.rehearsal

# botocore's signing name -> IAM service prefix, where they differ.
IAM_PREFIX = {"monitoring": "cloudwatch"}
BASIC_EXECUTION_ROLE = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
# Granted, not exercised by the code's own calls, and why that is right.
JUSTIFIED: dict[tuple[str, str], str] = {
    ("xray:PutTraceSegments", "*"): "active tracing: the X-Ray daemon Lambda runs sends the "
    "function's segments with its role; X-Ray has no resource-level permissions",
    ("xray:PutTelemetryRecords", "*"): "active tracing, as above",
}
# Granted to some functions, exercised by others: (action, resource suffix) -> (handlers, why).
JUSTIFIED_FOR: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("dynamodb:Query", "table"): (
        frozenset(BACKFILL_HANDLERS.values()),
        "ControlStore.read's Query of the newest HISTORY item, made only when the STATE item is "
        "missing; a backfill then refuses to run, so the rehearsal (which restores the record "
        "before the backfill) exercises it through the drift guard and the sweeps instead",
    ),
    ("dynamodb:PutItem", "table"): (
        frozenset({BACKFILL_HANDLERS["worker"]}),
        "PutItem on the control partition writes the record's event items (lease acquired, "
        "released), which the plan and verify steps exercise; the three backfill functions share "
        "one control-write grant (issue 11, decision 4) and the worker's own lease calls are "
        "UpdateItems (its heartbeats)",
    ),
}
# Managed policies a function role may carry, and why.
JUSTIFIED_MANAGED = {
    BASIC_EXECUTION_ROLE: "writes the function's own log group (logs:CreateLogStream, "
    "logs:PutLogEvents); the runtime's log agent uses it, not the function's code",
}


# (action, resource ARN, partition key values the request named or None)
Need = tuple[str, str, tuple[str, ...] | None]


@dataclass(frozen=True)
class Grant:
    action: str
    resource: str
    # The partitions a dynamodb:LeadingKeys condition allows; None: no such condition.
    leading_keys: frozenset[str] | None = None

    def allows(self, action: str, resource: str, keys: tuple[str, ...] | None = None) -> bool:
        if not (fnmatchcase(action, self.action) and fnmatchcase(resource, self.resource)):
            return False
        if self.leading_keys is None:
            return True
        # ForAllValues: every partition the request names must be allowed, and it must name one.
        return bool(keys) and set(keys or ()) <= self.leading_keys


def _leading_keys_condition(statement: dict[str, Any]) -> frozenset[str] | None:
    condition = statement.get("Condition")
    if condition is None:
        return None
    assert set(condition) == {"ForAllValues:StringEquals"}, condition
    ((key, values),) = condition["ForAllValues:StringEquals"].items()
    assert key == "dynamodb:LeadingKeys", condition
    return frozenset(_as_list(values))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def role_grants(synth: Synth, stand_in: StandIn, function_id: str) -> tuple[list[Grant], list[str]]:
    """(Allow statements flattened to action x resource, managed policy ARNs) of the role."""
    role_ref = synth.resources[function_id]["Properties"]["Role"]
    role_id = role_ref["Fn::GetAtt"][0]
    role = synth.resources[role_id]["Properties"]
    documents = [p["PolicyDocument"] for p in role.get("Policies", [])]
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"].get("Roles", []):
            documents.append(policy["Properties"]["PolicyDocument"])
    grants: list[Grant] = []
    for document in documents:
        for statement in document["Statement"]:
            assert statement["Effect"] == "Allow", statement
            assert "NotAction" not in statement, statement
            assert "NotResource" not in statement, statement
            leading_keys = _leading_keys_condition(statement)
            for action in _as_list(statement["Action"]):
                for resource in _as_list(stand_in.resolve(statement["Resource"])):
                    grants.append(Grant(action, str(resource), leading_keys))
    managed = [str(stand_in.resolve(arn)) for arn in role.get("ManagedPolicyArns", [])]
    return grants, managed


def _arn(kind: str, name: str) -> str:
    if name.startswith("arn:"):
        return name
    if kind == "table":
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
    return f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{name}"


def required_permissions(call: dict[str, Any]) -> set[Need]:
    """The IAM (action, resource, leading keys) one recorded API call needs."""
    prefix = IAM_PREFIX.get(call["signingName"], call["signingName"])
    action = f"{prefix}:{call['operation']}"
    resources = call["resources"]
    if prefix == "dynamodb":
        table = _arn("table", resources["TableName"])
        keys = call.get("leadingKeys")
        named = None if keys is None else tuple(keys)
        if "IndexName" in resources:
            return {(action, f"{table}/index/{resources['IndexName']}", named)}
        return {(action, table, named)}
    if action == "events:PutEvents":
        return {(action, _arn("bus", bus), None) for bus in resources["EventBusNames"]}
    if action == "sns:Publish":
        return {(action, resources["TopicArn"], None)}
    if action == "cloudwatch:PutMetricData":
        return {(action, "*", None)}  # no resource-level permissions
    raise AssertionError(f"the rehearsal does not know the IAM resource of {action}: {call}")


def _recorded(rehearsal: Rehearsal, function_id: str) -> set[Need]:
    return {
        needed
        for invocation in rehearsal.invocations[function_id]
        for call in invocation.calls
        for needed in required_permissions(call)
    }


@pytest.fixture(scope="module")
def audit(
    rehearsal: Rehearsal, synth: Synth, world: World
) -> dict[str, tuple[set[Need], list[Grant], list[str]]]:
    return {
        function_id: (
            _recorded(rehearsal, function_id),
            *role_grants(synth, world.stand_in, function_id),
        )
        for function_id in rehearsal.functions
    }


def test_given_each_function_then_every_call_it_made_is_allowed_by_its_role(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
) -> None:
    for function_id, (recorded, grants, _) in audit.items():
        denied = sorted(
            (action, resource, keys)
            for action, resource, keys in recorded
            if not any(g.allows(action, resource, keys) for g in grants)
        )
        assert not denied, f"{function_id} would be denied {denied}; its grants: {grants}"


def _justified_elsewhere(grant: Grant, handler: str, exercised: set[Need]) -> bool:
    """Listed in JUSTIFIED_FOR for this handler, and exercised by another function."""
    for (action, kind), (handlers, _) in JUSTIFIED_FOR.items():
        on_table = kind == "table" and "/index/" not in grant.resource
        if grant.action == action and on_table and handler in handlers:
            return any(grant.allows(*need) for need in exercised)
    return False


def test_given_each_function_then_its_role_grants_nothing_its_code_did_not_use(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
    rehearsal: Rehearsal,
) -> None:
    exercised = {need for recorded, _, _ in audit.values() for need in recorded}
    for function_id, (recorded, grants, managed) in audit.items():
        handler = rehearsal.functions[function_id].properties["Handler"]
        unused = sorted(
            (g.action, g.resource)
            for g in grants
            if (g.action, g.resource) not in JUSTIFIED
            and not any(g.allows(*need) for need in recorded)
            and not _justified_elsewhere(g, handler, exercised)
        )
        assert not unused, f"{function_id} is granted {unused} but never used them"
        assert set(managed) <= set(JUSTIFIED_MANAGED), f"{function_id}: {managed}"


def test_given_each_function_then_no_grant_is_broader_than_one_named_resource(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
) -> None:
    for function_id, (_, grants, _) in audit.items():
        broad = [
            g
            for g in grants
            if (g.action, g.resource) not in JUSTIFIED
            and ("*" in g.action or "*" in g.resource or "?" in g.resource)
        ]
        assert not broad, f"{function_id} has over-broad grants {broad}"


def test_given_the_rehearsal_then_it_recorded_the_calls_it_audits(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
    rehearsal: Rehearsal,
) -> None:
    # A recorder that saw nothing would make every check above pass vacuously.
    worker = rehearsal.by_handler["handlers.backfill_worker.handler"]
    recorded, _, _ = audit[worker]
    assert {"dynamodb:Scan", "dynamodb:UpdateItem"} <= {action for action, _, _ in recorded}
    sweep = rehearsal.by_handler["handlers.sweeps.retry_failed_prepare"]
    assert "events:PutEvents" in {action for action, _, _ in audit[sweep][0]}
    # Every function read the control record, a consistent GetItem on its partition only.
    for function_id, (needs, _, _) in audit.items():
        control_reads = {keys for action, resource, keys in needs if action == "dynamodb:GetItem"}
        assert (CONTROL_PK,) in control_reads, function_id


def test_given_a_leading_keys_grant_then_it_allows_only_its_partitions() -> None:
    # The audit above is only as good as this check: a control grant must not cover saga rows.
    grant = Grant("dynamodb:UpdateItem", "arn:table", frozenset({CONTROL_PK}))
    assert grant.allows("dynamodb:UpdateItem", "arn:table", (CONTROL_PK,))
    assert not grant.allows("dynamodb:UpdateItem", "arn:table", ("RSAGA#s1",))
    assert not grant.allows("dynamodb:UpdateItem", "arn:table", None)
