"""A local backfill of 8 segments under DynamoDB's documented conflict rules and per-key
ceilings (devkit.semantics on moto), while an operator throttles, pauses and resumes it.

The known-bad variant keeps the fence that ConditionChecks the ONE control STATE item on every
re-stamp (tests/support/contended_backfill.py, SHARED_STATE_FENCE): it shows the layer catches
what that design does on DynamoDB. The re-stamps cancel EACH OTHER (no single-item write holds
an item, so every cancelled TransactWriteItems met another re-stamp's transaction), and the
heartbeats and the operator's commands are refused with TransactionConflictException.

The product's own fence (each re-stamp checks its own segment's fence slot) runs through the
same scenario and is held to what a fence with no shared item must do: every row moved, the
lease held, no re-stamp cancelled, every heartbeat answered, the operator's `backfill
throttle`, `pause` and `resume` each applied, and no write of the run's own on the control
partition (0 WCU per re-stamp there; the heartbeats are the keeper's, counted apart).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from devkit.capacity.table_schema import TableSchema
from saga_index.layout_change.lease.events import EVENT_PAUSE, EVENT_RESUME, EVENT_THROTTLE
from saga_index.layout_change.record.store import ControlStore
from tests.support.backends import Backend, make_backend
from tests.support.contended_backfill import (
    PRODUCT_FENCE,
    SHARED_STATE_FENCE,
    describe,
    run_contended_backfill,
)

ROWS = 160
SEGMENTS = 8


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("contended", synthesized_template, endpoint_url=None)


def test_shared_state_fence_is_starved_under_dynamodb_conflicts(
    dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    schema = TableSchema.from_template(synthesized_template, dynamo.table_name)

    contended = run_contended_backfill(
        dynamo, schema, fence=SHARED_STATE_FENCE, rows=ROWS, segments=SEGMENTS
    )
    outcome = contended.outcome

    stats = outcome.stats
    report = describe(contended)
    # The re-stamps cancel each other on the STATE item they all check.
    assert stats.cancelled_transactions > 0, report
    assert stats.conflicts["TransactWriteItems"] == stats.cancelled_transactions, report
    # Control writes (heartbeats, the operator's pause/resume/throttle) are refused while a
    # re-stamp holds STATE (their retries get most of them through at this small scale: the
    # refusals are counted per attempt). Which of the two meets a conflict is down to timing:
    # on a loaded machine the operator's few writes can all land between transactions, so the
    # two are counted together; the heartbeats alone must meet some, being many.
    refused = (
        outcome.heartbeats.outcomes["TransactionConflictException"]
        + outcome.operator.outcomes["TransactionConflictException"]
    )
    assert refused > 0, report
    assert outcome.heartbeats.outcomes["TransactionConflictException"] > 0, report
    # And every re-stamp costs the control partition its ConditionCheck: 2 WCU.
    restamped = outcome.run.summary.restamped
    assert outcome.restamp_wcu["control"] == pytest.approx(2.0 * restamped), report
    # What the run came to (segments stopped by SegmentThrottledError once the fence's conflict
    # retries were spent, a lease lost for want of a heartbeat, rows left): printed, not
    # asserted, as it varies with the machine's speed.
    print(report)


def test_the_product_fence_holds_under_dynamodb_conflicts(
    dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    schema = TableSchema.from_template(synthesized_template, dynamo.table_name)

    contended = run_contended_backfill(
        dynamo, schema, fence=PRODUCT_FENCE, rows=ROWS, segments=SEGMENTS
    )

    outcome, report = contended.outcome, describe(contended)
    assert outcome.stats.cancelled_transactions == 0, report
    assert outcome.stopped_segments == {}, report
    assert outcome.run.lease_lost is None, report
    assert contended.left_on_legacy == 0, report
    assert outcome.heartbeats.ok == outcome.heartbeats.total > 0, report
    assert outcome.operator.ok == outcome.operator.total > 0, report
    assert outcome.operator_failures == [], report
    # Each of the operator's commands was applied during the run (its EVENT item is written
    # only after its STATE write succeeded)
    applied = {e["event"] for e in ControlStore(dynamo.client, dynamo.table_name).events()}
    assert {EVENT_THROTTLE, EVENT_PAUSE, EVENT_RESUME} <= applied, report
    # The run's own requests consumed nothing on the control partition: each re-stamp's check
    # costs its own fence slot's partition 2 WCU (an item in a transaction is charged twice)
    assert outcome.restamp_wcu.get("control", 0.0) == 0.0, report
    restamped = outcome.run.summary.restamped
    assert restamped == ROWS, report
    assert outcome.restamp_wcu["slots"] == pytest.approx(2.0 * restamped), report
    # ...and the index its delete and put, 1 WCU each, as a single write's (a row under 1 KB)
    assert outcome.restamp_wcu["index"] == pytest.approx(2.0 * restamped), report
