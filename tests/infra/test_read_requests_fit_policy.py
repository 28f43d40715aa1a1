"""The drift guard's scan and the backfill verify step's saga-row reads against the
attribute-level grants of their roles (the rehearsal's recorder sees actions, resources and
partitions, not attribute names or Select).

The drift checker's base-table scan and the verify step's read-backs (a layout run's, and an
open-index run's: its consistent Scan of the saga rows and its re-read of each row the open index
gets wrong) run against moto; every Scan and saga-row GetItem they send is recorded and
evaluated against the role's statements in the synthesised template, as
tests/infra/test_worker_requests_fit_policy.py does for the worker.
Then the grants are shown to refuse wider reads: another attribute, a whole item, another
partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from infra.backfill import VERIFY_READ_ATTRIBUTES, VERIFY_SCAN_ATTRIBUTES
from infra.drift import DRIFT_SCAN_ATTRIBUTES
from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.index.names import INDEX_NAME
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.open_readback import OpenVerify, verify_open_index
from saga_index.layout_change.backfill.readback import verify_source_drained
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import BackfillKind
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import BackfillDirection
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import function_statements
from tests.infra.test_worker_requests_fit_policy import allows
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import VALID, seed
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
        yield {DRIFT_HANDLER: calls[:drift], VERIFY_HANDLER: calls[drift:]}


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
    # the scans and the read-backs did run: every saga row re-read by the layout's, and the
    # open sagas once more by the open index's (projecting what it judges)
    assert drift_scans
    assert verify_scans
    assert all(s["ConsistentRead"] for s in verify_scans)
    assert len(reads) >= len(VALID) + 10
    assert any("state" in r.get("ExpressionAttributeNames", {}).values() for r in reads)

    for handler, operation, requests in (
        (DRIFT_HANDLER, "Scan", drift_scans),
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
    for other in ("state", "payload", "leaseToken"):
        wider = {**judged, "ExpressionAttributeNames": {"#a0": "PK", "#a1": "SK", "#a2": other}}
        assert not allows(scan, wider, "Scan"), other
    assert not allows(scan, {}, "Scan")  # no projection: whole items


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
