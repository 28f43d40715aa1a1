"""The drift guard's scan and the backfill verify step's saga-row reads against the
attribute-level grants of their roles (the rehearsal's recorder sees actions, resources and
partitions, not attribute names or Select).

The drift checker's base-table scan (once as legacy, once with the open-saga index `open`, when it
also Queries the open index and re-reads the rows it gets wrong) and the verify step's read-backs
(a layout run's, and an open-index run's: its consistent Scan of the saga rows and its re-read of
each row the open index gets wrong) run against moto; every Scan, Query and saga-row GetItem
they send is recorded and evaluated against the role's statements in the synthesised template,
as tests/infra/test_worker_requests_fit_policy.py does for the worker.
Then the grants are shown to refuse wider reads: another attribute, a whole item, another
partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from infra.backfill import VERIFY_READ_ATTRIBUTES, VERIFY_SCAN_ATTRIBUTES
from infra.drift import DRIFT_SCAN_ATTRIBUTES, OPEN_RECHECK_ATTRIBUTES
from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.index.names import INDEX_NAME, OPEN_INDEX_NAME, OPEN_INDEX_PARTITION_KEY
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.open_readback import OpenVerify, verify_open_index
from saga_index.layout_change.backfill.readback import verify_source_drained
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import BackfillKind, ControlStore
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import BackfillDirection
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import as_list, function_statements, render
from tests.infra.test_worker_requests_fit_policy import allows
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import VALID, seed
from tests.support.control_seed import seed_open_index, seed_state
from tests.support.open_index import add_open_index, open_ticket

pytestmark = pytest.mark.infra

DRIFT_HANDLER = "handlers.drift_guard.handler"
VERIFY_HANDLER = "handlers.backfill_verify.handler"
SAGA_ROW = {"PK": {"S": "RSAGA#s1"}, "SK": {"S": keys.SAGA_SK}}


Calls = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def recorded(synthesized_template: dict[str, Any]) -> Iterator[dict[str, Calls]]:
    """The requests of each reader, by handler."""
    calls: Calls = []
    with mock_aws():
        dynamo: Backend = make_backend("read-policy", synthesized_template, endpoint_url=None)
        add_open_index(dynamo.client, dynamo.table_name)
        seed(dynamo)

        def record(params: dict[str, Any], model: Any, **_: Any) -> None:
            calls.append((model.name, dict(params)))

        dynamo.client.meta.events.register("provide-client-params.dynamodb.*", record)
        DriftChecker(dynamo.client, dynamo.table_name, phase=Phase.LEGACY).check(
            scan_unindexed=True
        )
        drift = len(calls)
        # Nothing moved yet: every saga row is still on the source key, so each is re-read.
        verify_source_drained(
            dynamo.client,
            dynamo.table_name,
            index_name=INDEX_NAME,
            move=Move(BackfillDirection.FORWARD, Layout.legacy(), Layout.sharded(16)),
        )
        # Nothing stamped yet: every open saga differs from the open index, so each is re-read.
        request = BackfillRequest(
            direction=BackfillDirection.FORWARD,
            kind=BackfillKind.OPEN_INDEX,
            total_segments=2,
            dry_run=False,
        )
        verification = verify_open_index(
            dynamo.client,
            dynamo.table_name,
            request,
            open_ticket("forward"),
            options=OpenVerify(recheck_delay_seconds=0.001),
            sleep=lambda _seconds: None,
        )
        assert not verification.ok
        verify = len(calls)
        # The open index `open`, an open saga a writer left unstamped (the seeded open sagas
        # carry no OpenSagaPK either): the guard's scanning run Queries the open index and
        # re-reads each row it gets wrong.
        seed_state(dynamo.client, dynamo.table_name, Layout.sharded(16), version=5)
        seed_open_index(dynamo.client, dynamo.table_name, Layout.sharded(16), 16, version=6)
        dynamo.put_saga("unstamped", "p-9", gsi4pk="shard")
        state = ControlStore(dynamo.client, dynamo.table_name).read()
        DriftChecker(dynamo.client, dynamo.table_name, state=state, open_recheck_seconds=0).check(
            scan_unindexed=True
        )
        yield {
            DRIFT_HANDLER: calls[:drift] + calls[verify:],
            VERIFY_HANDLER: calls[drift:verify],
        }


def saga_row_reads(calls: Calls) -> list[dict[str, Any]]:
    return [
        params
        for operation, params in calls
        if operation == "GetItem" and params["Key"]["PK"]["S"].startswith(keys.SAGA_PK_PREFIX)
    ]


def test_every_scan_of_the_drift_guard_and_read_of_the_verify_step_is_allowed(
    recorded: dict[str, Calls], owned_synth: Synthesised
) -> None:
    template = owned_synth.template_json
    drift_scans = [params for operation, params in recorded[DRIFT_HANDLER] if operation == "Scan"]
    verify_scans = [params for operation, params in recorded[VERIFY_HANDLER] if operation == "Scan"]
    reads = saga_row_reads(recorded[VERIFY_HANDLER])
    rechecks = saga_row_reads(recorded[DRIFT_HANDLER])
    # the guard's scanning runs (legacy, and the open index `open`) and its open-index re-read
    assert len(drift_scans) >= 2
    assert "RSAGA#unstamped" in {r["Key"]["PK"]["S"] for r in rechecks}
    # the scans and the read-backs did run: every saga row re-read by the layout's, and the
    # open sagas once more by the open index's (projecting what it judges)
    assert drift_scans
    assert verify_scans
    assert all(s["ConsistentRead"] for s in verify_scans)
    assert len(reads) >= len(VALID) + 10
    assert any("state" in r.get("ExpressionAttributeNames", {}).values() for r in reads)

    for handler, operation, requests in (
        (DRIFT_HANDLER, "Scan", drift_scans),
        (DRIFT_HANDLER, "GetItem", rechecks),
        (VERIFY_HANDLER, "Scan", verify_scans),
        (VERIFY_HANDLER, "GetItem", reads),
    ):
        statements = function_statements(template, handler, f"dynamodb:{operation}")
        for params in requests:
            assert any(allows(s, params, operation) for s in statements), (operation, params)


def test_the_drift_guard_may_scan_only_the_attributes_it_judges(
    owned_synth: Synthesised,
) -> None:
    [scan] = function_statements(owned_synth.template_json, DRIFT_HANDLER, "dynamodb:Scan")
    assert scan["Condition"] == {
        "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(DRIFT_SCAN_ATTRIBUTES)},
    }
    judged = {
        "Select": "SPECIFIC_ATTRIBUTES",
        "ProjectionExpression": "#a0, #a1, #a2",
        "ExpressionAttributeNames": {"#a0": "PK", "#a1": "SK", "#a2": "GSI4PK"},
    }
    assert allows(scan, judged, "Scan")
    # Any other attribute of any item (a tenant's payload, the control record's lease token).
    for other in ("payload", "leaseToken", "leaseId"):
        wider = {**judged, "ExpressionAttributeNames": {"#a0": "PK", "#a1": "SK", "#a2": other}}
        assert not allows(scan, wider, "Scan"), other
    assert not allows(scan, {}, "Scan")  # no projection: whole items
    # The open index's rule reads a saga's state and its OpenSagaPK
    open_rule = {
        **judged,
        "ExpressionAttributeNames": {"#a0": "PK", "#a1": "state", "#a2": OPEN_INDEX_PARTITION_KEY},
    }
    assert allows(scan, open_rule, "Scan")


def test_every_query_of_the_open_index_by_the_drift_guard_is_granted_on_that_index(
    recorded: dict[str, Calls], owned_synth: Synthesised
) -> None:
    queries = [
        params
        for operation, params in recorded[DRIFT_HANDLER]
        if operation == "Query" and params.get("IndexName") == OPEN_INDEX_NAME
    ]
    # Its 16 keys, read twice (the re-check)
    assert len(queries) == 32
    statements = function_statements(owned_synth.template_json, DRIFT_HANDLER, "dynamodb:Query")
    granted = {str(render(resource)) for s in statements for resource in as_list(s["Resource"])}
    assert any(resource.endswith(f"/index/{OPEN_INDEX_NAME}") for resource in granted), granted


def test_the_drift_guard_may_re_read_only_saga_rows_and_only_what_the_open_index_rule_reads(
    owned_synth: Synthesised,
) -> None:
    statements = function_statements(owned_synth.template_json, DRIFT_HANDLER, "dynamodb:GetItem")
    [saga_rows] = [s for s in statements if "StringLike" in str(s)]
    assert saga_rows["Condition"]["ForAllValues:StringEquals"] == {
        "dynamodb:Attributes": list(OPEN_RECHECK_ATTRIBUTES)
    }
    names = {f"#a{n}": name for n, name in enumerate(OPEN_RECHECK_ATTRIBUTES)}
    recheck = {
        "Key": SAGA_ROW,
        "ProjectionExpression": ", ".join(names),
        "ExpressionAttributeNames": names,
    }
    assert any(allows(s, recheck, "GetItem") for s in statements)
    refused = {
        "a whole saga row": {"Key": SAGA_ROW},
        "another attribute": {**recheck, "ExpressionAttributeNames": {**names, "#a0": "payload"}},
        "a tenant's lease row": {**recheck, "Key": {"PK": {"S": "LEASE#l1"}, "SK": SAGA_ROW["SK"]}},
        "a fence slot": {**recheck, "Key": {"PK": {"S": "RSAGA_INDEX#FENCE#0"}, "SK": {"S": "X"}}},
    }
    for what, params in refused.items():
        assert not any(allows(s, params, "GetItem") for s in statements), what


def test_the_verify_step_may_read_only_saga_rows_and_only_what_it_confirms(
    owned_synth: Synthesised,
) -> None:
    template = owned_synth.template_json
    statements = function_statements(template, VERIFY_HANDLER, "dynamodb:GetItem")
    # No GetItem on the table without a condition (the control record's has its own).
    assert all("Condition" in s for s in statements)
    confirm = {
        "Key": SAGA_ROW,
        "ProjectionExpression": "#gsi4pk, #personId",
        "ExpressionAttributeNames": {"#gsi4pk": "GSI4PK", "#personId": "personId"},
    }
    assert any(allows(s, confirm, "GetItem") for s in statements)
    refused = {
        "a whole saga row": {"Key": SAGA_ROW},
        "another attribute": {
            **confirm,
            "ExpressionAttributeNames": {"#gsi4pk": "GSI4PK", "#personId": "payload"},
        },
        "a tenant's lease row": {**confirm, "Key": {"PK": {"S": "LEASE#l1"}, "SK": SAGA_ROW["SK"]}},
        "a fence slot": {**confirm, "Key": {"PK": {"S": "RSAGA_INDEX#FENCE#0"}, "SK": {"S": "X"}}},
    }
    for what, params in refused.items():
        assert not any(allows(s, params, "GetItem") for s in statements), what
    [saga_rows] = [s for s in statements if "StringLike" in str(s)]
    assert saga_rows["Condition"]["ForAllValues:StringEquals"] == {
        "dynamodb:Attributes": list(VERIFY_READ_ATTRIBUTES)
    }


def test_the_verify_step_may_scan_only_what_an_open_index_verification_judges(
    owned_synth: Synthesised,
) -> None:
    [scan] = function_statements(owned_synth.template_json, VERIFY_HANDLER, "dynamodb:Scan")
    assert scan["Condition"] == {
        "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
        "ForAllValues:StringEquals": {"dynamodb:Attributes": list(VERIFY_SCAN_ATTRIBUTES)},
    }
    judged = {
        "Select": "SPECIFIC_ATTRIBUTES",
        "ProjectionExpression": "#a0, #a1, #a2",
        "ExpressionAttributeNames": {"#a0": "PK", "#a1": "state", "#a2": "OpenSagaPK"},
    }
    assert allows(scan, judged, "Scan")
    for other in ("GSI4PK", "payload", "leaseToken"):
        wider = {**judged, "ExpressionAttributeNames": {"#a0": "PK", "#a1": "SK", "#a2": other}}
        assert not allows(scan, wider, "Scan"), other
    assert not allows(scan, {}, "Scan")  # no projection: whole items
