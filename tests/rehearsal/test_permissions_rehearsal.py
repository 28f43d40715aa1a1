"""Every AWS call a function made during its rehearsal is allowed by its role's policy in the
template, resource by resource (table ARN, index ARN, bus ARN) and, where a statement carries a
`dynamodb:LeadingKeys` condition, partition by partition (the control record's items, saga rows);
and every permission the role grants was used, or is listed below with the reason it cannot be
exercised here.

The recorder sees each call's action, resources and partition, not its attribute names, Select
or ReturnValues: a statement's attribute-level conditions (dynamodb:Attributes, dynamodb:Select,
dynamodb:ReturnValues) are not evaluated here. tests/infra/test_worker_requests_fit_policy.py
checks the worker's requests against them, tests/infra/test_read_requests_fit_policy.py the drift
guard's scans and the verify step's saga-row reads."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import pytest

from saga_index.index.names import CONTROL_PK, OPEN_INDEX_NAME
from tests.support.rehearsal.scenario import BACKFILL_HANDLERS, Rehearsal
from tests.support.rehearsal.server import World
from tests.support.rehearsal.stack import ACCOUNT, REGION, StandIn, Synth, UnresolvableError

pytestmark = pytest.mark.rehearsal

# botocore's signing name -> IAM service prefix, where they differ.
IAM_PREFIX = {"monitoring": "cloudwatch"}
# Granted, not exercised by the code's own calls, and why that is right.
JUSTIFIED: dict[tuple[str, str], str] = {
    ("xray:PutTraceSegments", "*"): "active tracing: the X-Ray daemon Lambda runs sends the "
    "function's segments with its role; X-Ray has no resource-level permissions",
    ("xray:PutTelemetryRecords", "*"): "active tracing, as above",
}
# Granted on the function's OWN resources, used by Lambda on its behalf, not by its code.
JUSTIFIED_OWN: dict[str, str] = {
    "logs:CreateLogStream": "the runtime writes the function's log to its own log group "
    "(LoggingConfig.LogGroup), with the function's role",
    "logs:PutLogEvents": "as above",
    "sqs:SendMessage": "Lambda sends a failed asynchronous invocation to the function's own "
    "on-failure destination (EventInvokeConfig), with the function's role",
}
# Granted to some functions, exercised by others: (action, resource suffix) -> (handlers, why).
JUSTIFIED_FOR: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("dynamodb:Query", "table"): (
        frozenset(BACKFILL_HANDLERS.values()),
        "ControlStore.read's Query of the newest HISTORY item, made only when the STATE item is "
        "missing; a backfill then refuses to run, so the rehearsal (which restores the record "
        "before the backfill) exercises it through the drift guard and the sweeps instead",
    ),
    ("dynamodb:Scan", "table"): (
        frozenset({BACKFILL_HANDLERS["verify"]}),
        "the verify step's projected Scan of the saga rows, made only for an open-index run (the "
        "table compared with the open index); the rehearsal's record never starts the open "
        "index's move (JUSTIFIED_INDEX), and the worker's Scan exercises the same action on the "
        "table; tests/infra/test_read_requests_fit_policy.py drives that Scan against the grant",
    ),
    ("dynamodb:GetItem", "table"): (
        frozenset({BACKFILL_HANDLERS["worker"], "handlers.drift_guard.handler"}),
        "the drift guard's re-read of a saga row the open index gets wrong, made only while the "
        "open index is open (the rehearsal's record never starts its move: JUSTIFIED_INDEX; "
        "tests/infra/test_read_requests_fit_policy.py drives it against the grant); and "
        "the fence's read of its segment's slot, made only when a re-stamp is refused (to say "
        "which epoch armed it); the rehearsal's run is never refused at a slot, and the plan "
        "step's arming exercises the same read of a slot",
    ),
}
# Granted on an index, not exercised here: index name -> (action, why).
JUSTIFIED_INDEX: dict[str, tuple[str, str]] = {
    OPEN_INDEX_NAME: (
        "dynamodb:Query",
        "the sweeps, the drift guard and the backfill's verify read the open-saga index only "
        "once the control record's open-index state has them read it (its own move, after the "
        "index exists and is ACTIVE); the rehearsal's record never starts that move",
    ),
}
# Conditions on attributes the recorder does not see (module docstring).
UNCHECKED_KEYS = frozenset({"dynamodb:Attributes", "dynamodb:Select", "dynamodb:ReturnValues"})
# Resources the stand-in does not create, named by logical id instead.
OWN_RESOURCE_TYPES = ("AWS::Logs::LogGroup", "AWS::SQS::Queue")


# (action, resource ARN, partition key values the request named or None)
Need = tuple[str, str, tuple[str, ...] | None]


@dataclass(frozen=True)
class Grant:
    action: str
    resource: str
    # The partitions a dynamodb:LeadingKeys condition allows; None: no such condition.
    leading_keys: frozenset[str] | None = None
    # StringLike: leading_keys are patterns ("RSAGA#*"), else exact values.
    like: bool = False

    def allows(self, action: str, resource: str, keys: tuple[str, ...] | None = None) -> bool:
        if not (fnmatchcase(action, self.action) and fnmatchcase(resource, self.resource)):
            return False
        if self.leading_keys is None:
            return True
        # ForAllValues: every partition the request names must be allowed, and it must name one.
        if not keys:
            return False
        if self.like:
            return all(any(fnmatchcase(k, p) for p in self.leading_keys) for k in keys)
        return set(keys) <= self.leading_keys


def _leading_keys_condition(statement: dict[str, Any]) -> tuple[frozenset[str] | None, bool]:
    """(the partitions a LeadingKeys condition allows or None, whether they are patterns).
    Any other condition must be one of UNCHECKED_KEYS: this check fails on what it cannot read."""
    condition = statement.get("Condition")
    if condition is None:
        return None, False
    leading: tuple[frozenset[str] | None, bool] = (None, False)
    for operator, tests in condition.items():
        for key, values in tests.items():
            if key == "dynamodb:LeadingKeys":
                assert operator in ("ForAllValues:StringEquals", "ForAllValues:StringLike"), (
                    condition
                )
                leading = (frozenset(_as_list(values)), operator.endswith("StringLike"))
            else:
                assert key in UNCHECKED_KEYS, condition
    return leading


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _own_resource(synth: Synth, value: Any) -> str | None:
    """A stand-in ARN for the ARN of a log group or queue of the template (the rehearsal creates
    neither): 'own:<logical id>'."""
    if isinstance(value, dict) and set(value) == {"Fn::GetAtt"}:
        logical_id, attribute = value["Fn::GetAtt"]
        kind = synth.resources.get(logical_id, {}).get("Type")
        if attribute == "Arn" and kind in OWN_RESOURCE_TYPES:
            return f"own:{logical_id}"
    return None


def _resolve(synth: Synth, stand_in: StandIn, value: Any) -> Any:
    own = _own_resource(synth, value)
    if own is not None:
        return own
    try:
        return stand_in.resolve(value)
    except UnresolvableError:
        if isinstance(value, list):
            return [_resolve(synth, stand_in, v) for v in value]
        raise


def own_resources(synth: Synth, function_id: str) -> set[str]:
    """The function's own log group and on-failure destination, as _own_resource names them."""
    owned = set()
    props = synth.resources[function_id]["Properties"]
    owned.add(f"own:{props['LoggingConfig']['LogGroup']['Ref']}")
    for config in synth.of_type("AWS::Lambda::EventInvokeConfig").values():
        if config["Properties"]["FunctionName"] == {"Ref": function_id}:
            destination = config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"]
            owned.add(str(_own_resource(synth, destination)))
    return owned


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
            leading_keys, like = _leading_keys_condition(statement)
            for action in _as_list(statement["Action"]):
                for resource in _as_list(_resolve(synth, stand_in, statement["Resource"])):
                    grants.append(Grant(action, str(resource), leading_keys, like))
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


def _justified_index(grant: Grant) -> bool:
    """Listed in JUSTIFIED_INDEX: its action on exactly that index of the table, no wider."""
    return any(
        grant.action == action and fnmatchcase(grant.resource, f"arn:*:table/*/index/{index}")
        for index, (action, _) in JUSTIFIED_INDEX.items()
    )


def test_given_each_function_then_its_role_grants_nothing_its_code_did_not_use(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
    rehearsal: Rehearsal,
    synth: Synth,
) -> None:
    exercised = {need for recorded, _, _ in audit.values() for need in recorded}
    for function_id, (recorded, grants, managed) in audit.items():
        handler = rehearsal.functions[function_id].properties["Handler"]
        own = own_resources(synth, function_id)
        unused = sorted(
            (g.action, g.resource)
            for g in grants
            if (g.action, g.resource) not in JUSTIFIED
            and not (g.action in JUSTIFIED_OWN and g.resource in own)
            and not any(g.allows(*need) for need in recorded)
            and not _justified_elsewhere(g, handler, exercised)
            and not _justified_index(g)
        )
        assert not unused, f"{function_id} is granted {unused} but never used them"
        # No managed policy: AWSLambdaBasicExecutionRole would write every log group.
        assert managed == [], f"{function_id}: {managed}"


def test_given_each_function_then_its_own_resource_grants_name_only_its_own(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
    synth: Synth,
) -> None:
    for function_id, (_, grants, _) in audit.items():
        own = own_resources(synth, function_id)
        for grant in grants:
            if grant.action in JUSTIFIED_OWN:
                assert grant.resource in own, f"{function_id}: {grant}"


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
    # ... and a saga-row grant must not cover the control record.
    saga = Grant("dynamodb:UpdateItem", "arn:table", frozenset({"RSAGA#*"}), like=True)
    assert saga.allows("dynamodb:UpdateItem", "arn:table", ("RSAGA#s1",))
    assert not saga.allows("dynamodb:UpdateItem", "arn:table", (CONTROL_PK,))
    assert not saga.allows("dynamodb:UpdateItem", "arn:table", ("PERSON#p1",))
    assert not saga.allows("dynamodb:UpdateItem", "arn:table", None)


def test_given_the_backfill_worker_then_it_may_not_create_control_items(
    audit: dict[str, tuple[set[Need], list[Grant], list[str]]],
    rehearsal: Rehearsal,
) -> None:
    # Its lease calls are heartbeats (UpdateItem); the plan and verify steps write event items.
    _, grants, _ = audit[rehearsal.by_handler[BACKFILL_HANDLERS["worker"]]]
    assert not [g for g in grants if g.action == "dynamodb:PutItem"]
