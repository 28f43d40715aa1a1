"""The drift guard's scan and the backfill verify step's saga-row reads against the
attribute-level grants of their roles (the rehearsal's recorder sees actions, resources and
partitions, not attribute names or Select).

The drift checker's base-table scan and the verify step's read-back run against moto; every Scan
and saga-row GetItem they send is recorded and evaluated against the role's statements in the
synthesised template, as tests/infra/test_worker_requests_fit_policy.py does for the worker.
Then the grants are shown to refuse wider reads: another attribute, a whole item, another
partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from infra.backfill import VERIFY_READ_ATTRIBUTES
from infra.drift import DRIFT_SCAN_ATTRIBUTES
from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.index.names import INDEX_NAME
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.readback import verify_source_drained
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import BackfillDirection
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import function_statements
from tests.infra.test_worker_requests_fit_policy import allows
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import seed

pytestmark = pytest.mark.infra

DRIFT_HANDLER = "handlers.drift_guard.handler"
VERIFY_HANDLER = "handlers.backfill_verify.handler"
SAGA_ROW = {"PK": {"S": "RSAGA#s1"}, "SK": {"S": keys.SAGA_SK}}


@pytest.fixture
def recorded(synthesized_template: dict[str, Any]) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    with mock_aws():
        dynamo: Backend = make_backend("read-policy", synthesized_template, endpoint_url=None)
        seed(dynamo)

        def record(params: dict[str, Any], model: Any, **_: Any) -> None:
            calls.append((model.name, dict(params)))

        dynamo.client.meta.events.register("provide-client-params.dynamodb.*", record)
        DriftChecker(dynamo.client, dynamo.table_name, phase=Phase.LEGACY).check(
            scan_unindexed=True
        )
        # Nothing moved yet: every saga row is still on the source key, so each is re-read.
        verify_source_drained(
            dynamo.client,
            dynamo.table_name,
            index_name=INDEX_NAME,
            move=Move(BackfillDirection.FORWARD, Layout.legacy(), Layout.sharded(16)),
        )
        yield calls


def test_every_scan_of_the_drift_guard_and_read_of_the_verify_step_is_allowed(
    recorded: list[tuple[str, dict[str, Any]]], owned_synth: Synthesised
) -> None:
    template = owned_synth.template_json
    scans = [params for operation, params in recorded if operation == "Scan"]
    reads = [
        params
        for operation, params in recorded
        if operation == "GetItem" and params["Key"]["PK"]["S"].startswith(keys.SAGA_PK_PREFIX)
    ]
    # the scan and the read-back did run
    assert scans
    assert len(reads) >= 20

    for handler, operation, requests in (
        (DRIFT_HANDLER, "Scan", scans),
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
