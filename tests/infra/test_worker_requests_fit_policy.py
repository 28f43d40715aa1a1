"""The backfill worker's attribute-level grants against the requests its code makes.

The deploy rehearsal (tests/rehearsal) checks every call's action, resource and partition
against the role, but its recorder does not see attribute names, Select or ReturnValues. Here
the worker's code runs a forward and a rollback move against moto, then an open-index run's
stamping and its removal (the other row rule the worker runs), every Scan and saga-row
UpdateItem it sends is recorded, and each is evaluated against the worker role's statements in
the synthesised template as AWS documents the keys: dynamodb:Attributes is every attribute the
request names (key, projection, update and condition expressions), dynamodb:Select is
SPECIFIC_ATTRIBUTES for a projected Scan, dynamodb:ReturnValues is NONE unless set.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys, names
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import as_list, function_statements
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import backfill, seed
from tests.support.open_index import add_open_index, open_backfill

pytestmark = pytest.mark.infra

WORKER_HANDLER = "handlers.backfill_worker.handler"
# Words an expression may hold besides placeholders: operators and functions, never attributes.
EXPRESSION_WORDS = {
    "SET",
    "REMOVE",
    "ADD",
    "DELETE",
    "AND",
    "OR",
    "NOT",
    "IN",
    "BETWEEN",
    "attribute_exists",
    "attribute_not_exists",
    "attribute_type",
    "begins_with",
    "contains",
    "size",
    "if_not_exists",
    "list_append",
}
_WORD = re.compile(r"(?<![#:\w])[A-Za-z_][A-Za-z0-9_]*")


def named_attributes(params: dict[str, Any]) -> set[str]:
    """Every attribute a request names; fails on a bare (placeholder-less) name in an
    expression, which this reading could miss."""
    named = set(params.get("Key", {})) | set(params.get("ExpressionAttributeNames", {}).values())
    fields = ("ProjectionExpression", "UpdateExpression", "ConditionExpression", "FilterExpression")
    for field in fields:
        bare = set(_WORD.findall(params.get(field, ""))) - EXPRESSION_WORDS
        assert not bare, f"{field} names {bare} without a placeholder: {params[field]!r}"
    return named


def worker_statements(template: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return function_statements(template, WORKER_HANDLER, action)


def allows(statement: dict[str, Any], params: dict[str, Any], operation: str) -> bool:
    """The statement's conditions against the request (the keys used in this stack only)."""
    context: dict[str, list[str]] = {"dynamodb:Attributes": sorted(named_attributes(params))}
    if "Key" in params:
        context["dynamodb:LeadingKeys"] = [params["Key"]["PK"]["S"]]
    if operation == "Scan":
        implied = "SPECIFIC_ATTRIBUTES" if "ProjectionExpression" in params else "ALL_ATTRIBUTES"
        context["dynamodb:Select"] = [params.get("Select", implied)]
    if operation == "GetItem" and "ProjectionExpression" not in params:
        # No projection reads the whole item (AWS's attribute-level example requires
        # SPECIFIC_ATTRIBUTES where dynamodb:Select is present).
        context["dynamodb:Select"] = ["ALL_ATTRIBUTES"]
    if operation == "UpdateItem":
        context["dynamodb:ReturnValues"] = [params.get("ReturnValues", "NONE")]
    # The Update element of a TransactWriteItems carries no ReturnValues: the key is absent.
    for operator, tests in statement.get("Condition", {}).items():
        for key, allowed in tests.items():
            values = context.get(key)
            allowed_values = as_list(allowed)
            if operator == "ForAllValues:StringEquals":
                ok = values is None or set(values) <= set(allowed_values)
            elif operator == "ForAllValues:StringLike":
                ok = values is None or all(
                    any(re.fullmatch(re.escape(p).replace(r"\*", ".*"), v) for p in allowed_values)
                    for v in values
                )
            elif operator == "StringEquals":
                ok = values is not None and len(values) == 1 and values[0] in allowed_values
            elif operator == "StringEqualsIfExists":
                ok = values is None or (len(values) == 1 and values[0] in allowed_values)
            else:
                raise AssertionError(f"this check does not know {operator}")
            if not ok:
                return False
    return True


@pytest.fixture
def recorded(synthesized_template: dict[str, Any]) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    with mock_aws():
        dynamo: Backend = make_backend("worker-policy", synthesized_template, endpoint_url=None)
        add_open_index(dynamo.client, dynamo.table_name)
        seed(dynamo)
        # A closed saga with a stale key: the open-index run's forward removal.
        dynamo.put_saga("closed", "p-c", state="EXPIRED", **{names.OPEN_INDEX_PARTITION_KEY: "x"})

        def record(params: dict[str, Any], model: Any, **_: Any) -> None:
            calls.append((model.name, dict(params)))

        dynamo.client.meta.events.register("provide-client-params.dynamodb.*", record)
        backfill(dynamo, "forward")
        backfill(dynamo, "rollback")
        for direction in ("forward", "rollback"):
            assert open_backfill(dynamo.client, dynamo.table_name, direction).complete
        yield calls


def test_every_scan_and_saga_row_update_of_the_worker_is_allowed_by_its_attribute_grants(
    recorded: list[tuple[str, dict[str, Any]]], owned_synth: Synthesised
) -> None:
    template = owned_synth.template_json
    scans = [params for operation, params in recorded if operation == "Scan"]
    updates = [
        params
        for operation, params in recorded
        if operation == "UpdateItem" and params["Key"]["PK"]["S"].startswith(keys.SAGA_PK_PREFIX)
    ]
    # the move did run, and the open-index run's stamps and removals
    assert scans
    assert updates
    open_updates = [u for u in updates if "OpenSagaPK" in u["ExpressionAttributeNames"].values()]
    assert {u["UpdateExpression"].split()[0] for u in open_updates} == {"SET", "REMOVE"}

    for operation, requests in (("Scan", scans), ("UpdateItem", updates)):
        statements = worker_statements(template, f"dynamodb:{operation}")
        for params in requests:
            assert any(allows(s, params, operation) for s in statements), (operation, params)


def test_the_check_refuses_what_the_grants_exclude(owned_synth: Synthesised) -> None:
    # Without this, a check that allows everything would leave the test above green.
    template = owned_synth.template_json
    [update] = [
        s for s in worker_statements(template, "dynamodb:UpdateItem") if "StringLike" in str(s)
    ]
    fine = {
        "Key": {"PK": {"S": "RSAGA#s1"}, "SK": {"S": "META"}},
        "UpdateExpression": "SET #gsi4pk = :target",
        "ExpressionAttributeNames": {"#gsi4pk": "GSI4PK"},
    }
    assert allows(update, fine, "UpdateItem")
    # The fenced write's Update inside TransactWriteItems: the same grant, no ReturnValues key.
    assert allows(update, fine, "TransactWriteItems.Update")
    # Any attribute neither re-stamp names (a saga's payload, its openedAt, its lease).
    for other in ("payload", "openedAt", "leaseId"):
        other_attribute = {**fine, "ExpressionAttributeNames": {"#gsi4pk": other}}
        assert not allows(update, other_attribute, "UpdateItem"), other
    assert not allows(update, {**fine, "ReturnValues": "ALL_OLD"}, "UpdateItem")
    assert not allows(update, {**fine, "Key": {"PK": {"S": "PERSON#p"}}}, "UpdateItem")
    [scan] = worker_statements(template, "dynamodb:Scan")
    assert not allows(scan, {}, "Scan")  # no projection: whole items
