"""A local backfill of 8 segments under DynamoDB's documented conflict rules and per-key
ceilings (devkit.semantics on moto), while an operator throttles, pauses and resumes it.

The known-bad variant keeps the fence that ConditionChecks the ONE control STATE item on every
re-stamp (tests/support/contended_backfill.py, SHARED_STATE_FENCE): it shows the layer catches
what that design does on DynamoDB. The re-stamps cancel EACH OTHER (no single-item write holds
an item, so every cancelled TransactWriteItems met another re-stamp's transaction), and the
heartbeats and the operator's commands are refused with TransactionConflictException. A fence
without a shared item runs through the same scenario with PRODUCT_FENCE (or a FenceVariant of
its own), to be asserted to complete with every control write answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from devkit.capacity.table_schema import TableSchema
from tests.support.backends import Backend, make_backend
from tests.support.contended_backfill import SHARED_STATE_FENCE, run_contended_backfill

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

    stats = outcome.semantics.stats
    report = (
        f"stats={stats} failures={outcome.stopped_segments} lease_lost={outcome.run.lease_lost} "
        f"left={contended.left_on_legacy} heartbeats={outcome.heartbeats.outcomes} "
        f"operator={outcome.operator.outcomes}"
    )
    # The re-stamps cancel each other on the STATE item they all check.
    assert stats.cancelled_transactions > 0, report
    assert stats.conflicts["TransactWriteItems"] == stats.cancelled_transactions, report
    # Heartbeats and the operator's pause/resume/throttle are refused while a re-stamp holds
    # STATE.
    assert outcome.heartbeats.outcomes["TransactionConflictException"] > 0, report
    assert outcome.operator.outcomes["TransactionConflictException"] > 0, report
    assert "TransactionConflictException" in outcome.operator_failures, report
    # What the run came to (segments stopped by SegmentThrottledError once the fence's conflict
    # retries were spent, a lease lost for want of a heartbeat, rows left): printed, not
    # asserted, as it varies with the machine's speed.
    print(report)
