"""A fenced re-stamp's throttle is a cancelled transaction: DynamoDB lists no ThrottlingReasons,
only a code per item (CancellationReasons). Its ThrottlingError is about the key that item's
write hits, so it slows the segment that sent it, not the run; ProvisionedThroughputExceeded (the
table's or an index's provisioned capacity) and a plain request's reasonless throttle slow the
run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.fence import LeaseFence, is_transaction_throttle
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.segment import run_segment
from saga_index.layout_change.backfill.throttle_reasons import (
    TRANSACTION_ITEM_THROTTLED,
    Scope,
    reasons_of,
    scope_of,
)
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.record.state import BackfillDirection
from tests.unit.test_backfill_deadline import saga
from tests.unit.test_backfill_token_bucket import FakeClock

CAP = 400.0
SEGMENTS = 4
SEGMENT = 2


def cancelled(*codes: str) -> ClientError:
    """A TransactionCanceledException as botocore parses it: one reason per item, in order."""
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


def plain_throttle() -> ClientError:
    """A plain request's throttle without ThrottlingReasons (an older server's)."""
    return ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "UpdateItem"
    )


class OnceThrottledClient:
    """One legacy saga in one Scan page; its first write (a transaction, or a plain update) is
    refused with `error`, the next one lands."""

    def __init__(self, error: ClientError) -> None:
        self.rows = [saga(0)]
        self.error: ClientError | None = error
        self.writes = 0

    def scan(self, **_: Any) -> dict[str, Any]:
        return {"Items": self.rows}

    def _write(self) -> dict[str, Any]:
        error, self.error = self.error, None
        if error is not None:
            raise error
        self.writes += 1
        return {}

    def transact_write_items(self, **_: Any) -> dict[str, Any]:
        return self._write()

    def update_item(self, **_: Any) -> dict[str, Any]:
        return self._write()


def run_one_row(error: ClientError, *, fenced: bool) -> TokenBucket:
    """Segment SEGMENT of SEGMENTS re-stamps its one row, the first attempt refused by `error`;
    the run's bucket after it."""
    clock = FakeClock()
    bucket = TokenBucket(CAP, clock=clock, sleep=clock.sleep, segments=SEGMENTS)
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=SEGMENTS,
        max_writes_per_second=CAP,
        dry_run=False,
    ).segment_requests(RunTicket.unleased(Move.between_legacy_and("forward", 16)))[SEGMENT]
    fence = None
    if fenced:
        fence = LeaseFence(
            object(),  # replaced below: the fence writes through the worker's client
            "table",
            token="token",
            state_version=1,
            max_heartbeat_age=60.0,
            epoch=1,
            clock=lambda: datetime(2026, 1, 1, tzinfo=UTC),
            monotonic=clock,
            sleep=clock.sleep,
        )
        fence.mark_heartbeat()
    client = OnceThrottledClient(error)
    if fence is not None:
        fence.client = client
    result = run_segment(client, "table", request, bucket=bucket, fence=fence)
    # tried again at the pacer's next token, and written
    assert result.restamped == 1
    assert client.writes == 1
    return bucket


def test_a_cancelled_transactions_throttling_error_slows_its_segment_not_the_run() -> None:
    bucket = run_one_row(cancelled("None", "ThrottlingError"), fenced=True)
    pace = bucket.pace()
    # the run is not slowed
    assert pace.reason == "cap"
    assert bucket.pacer.run_rate() == CAP
    # the segment's share is (stepped back to 90 % of it: one refusal, the key barely over),
    # and a segment not slowed paces as it does
    assert list(pace.slowed_segments) == [SEGMENT]
    assert pace.slowed_segments[SEGMENT] == pytest.approx(0.9 * CAP / SEGMENTS, rel=0.01)
    assert bucket.pacer.segment_rate(0) == pytest.approx(0.9 * CAP / SEGMENTS, rel=0.01)
    # the lowest pace the run wrote at: every segment at the slowed one's
    assert bucket.lowest_rate == pytest.approx(0.9 * CAP)


def test_a_cancelled_transactions_provisioned_throughput_exceeded_slows_the_run() -> None:
    bucket = run_one_row(cancelled("None", "ProvisionedThroughputExceeded"), fenced=True)
    assert bucket.pacer.run_rate() == pytest.approx(0.9 * CAP, rel=0.01)
    assert bucket.pace().slowed_segments == {}


def test_a_plain_requests_throttle_without_a_reason_still_slows_the_run() -> None:
    bucket = run_one_row(plain_throttle(), fenced=False)
    assert bucket.pacer.run_rate() == pytest.approx(0.9 * CAP, rel=0.01)
    assert bucket.pace().reason == "unknown"
    assert bucket.pace().slowed_segments == {}


@pytest.mark.parametrize(
    ("codes", "reasons", "scope"),
    [
        (("None", "ThrottlingError"), [TRANSACTION_ITEM_THROTTLED], Scope.SEGMENT),
        (("ThrottlingError", "None"), [TRANSACTION_ITEM_THROTTLED], Scope.SEGMENT),
        (
            ("None", "ProvisionedThroughputExceeded"),
            ["TransactionItemProvisionedThroughputExceeded"],
            Scope.RUN,
        ),
    ],
)
def test_a_cancelled_transactions_item_codes_are_its_reasons(
    codes: tuple[str, ...], reasons: list[str], scope: Scope
) -> None:
    error = cancelled(*codes)
    assert is_transaction_throttle(error)
    assert reasons_of(error.response) == reasons
    assert all(scope_of(reason) is scope for reason in reasons)


def test_a_cancellation_by_a_condition_is_no_throttle_and_names_no_reason() -> None:
    error = cancelled("ConditionalCheckFailed", "None")
    assert not is_transaction_throttle(error)
    assert reasons_of(error.response) == []
