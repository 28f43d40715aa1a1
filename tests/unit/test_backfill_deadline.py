"""The worker's wait for a write token ends at the Lambda deadline.

At a low cap throttled to its floor, one token can take longer than the safety margin: the
invocation must return its cursor, not done, before the margin is crossed, instead of waiting
for the token and timing out.
"""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index import keys
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.pacer import PaceRules
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.segment import run_segment
from saga_index.layout_change.backfill.wire import RunTicket, cursor_of
from saga_index.layout_change.record.state import BackfillDirection
from tests.support.far_over import far_over
from tests.unit.test_backfill_token_bucket import FakeClock

MARGIN = 60.0


def saga(n: int) -> dict[str, Any]:
    person = f"person-{n}"
    return {
        "PK": {"S": f"RSAGA#s{n}"},
        "SK": {"S": "META"},
        "entityType": {"S": keys.ENTITY_TYPE},
        "personId": {"S": person},
        "GSI4PK": {"S": keys.LEGACY_GSI4PK},
        "GSI4SK": {"S": f"{person}#2026-01-01T00:00:00.000Z"},
    }


class OnePageClient:
    """A table of three legacy sagas in one Scan page; records when each write was sent."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.rows = [saga(n) for n in range(3)]
        self.writes: list[float] = []

    def scan(self, **_: Any) -> dict[str, Any]:
        return {"Items": self.rows}

    def update_item(self, **_: Any) -> dict[str, Any]:
        self.writes.append(self.clock.now)
        return {}


def test_given_a_token_slower_than_the_margin_then_the_worker_returns_its_cursor_in_time() -> None:
    # Given a 1 write/s cap throttled to its floor (1/64 per second: one token per 64 s, longer
    # than the 60 s margin), one banked token, and 100 s left in the invocation
    clock = FakeClock()
    bucket = TokenBucket(
        1.0,
        clock=clock,
        sleep=clock.sleep,
        rules=PaceRules(decrease_interval=1.0, increase_interval=10_000.0),
    )
    for _ in range(6):  # each second the key far over: a step back escalated to halving
        far_over(bucket.on_throttle, lambda: bucket.decreases)
        clock.now += 1.0
    assert bucket.rate == pytest.approx(1 / 64, rel=1e-2)  # recovery frozen: hours to climb
    clock.now += 64.0
    deadline = clock.now + 100.0
    client = OnePageClient(clock)
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=1,
        max_writes_per_second=1.0,
        dry_run=False,
    ).segment_requests(RunTicket.unleased(Move.between_legacy_and("forward", 16)))[0]
    # When one invocation runs the segment
    result = run_segment(
        client,
        "table",
        request,
        remaining_seconds=lambda: deadline - clock.now,
        safety_margin_seconds=MARGIN,
        bucket=bucket,
    )
    # Then it wrote the row its banked token allowed, stopped waiting for the next token by the
    # margin, and returned the cursor after the written row (not done)
    assert len(client.writes) == 1
    assert deadline - clock.now >= MARGIN
    assert not result.done
    assert result.cursor == cursor_of(client.rows[0])
    assert result.restamped == 1


def test_given_a_wait_budget_then_acquire_waits_no_longer_and_returns_false() -> None:
    clock = FakeClock()
    bucket = TokenBucket(1 / 64, clock=clock, sleep=clock.sleep)
    assert bucket.acquire()
    start = clock.now
    assert not bucket.acquire(budget=lambda: start + 10.0 - clock.now)
    assert clock.now - start <= 10.0
    # with room for the token, it comes
    assert bucket.acquire(budget=lambda: 1000.0)
