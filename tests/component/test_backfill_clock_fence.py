"""The clock fence dates a heartbeat by when its request was SENT (on moto, with the run on the
clock fence only, as on a server without transactions).

A worker is paused right after a heartbeat reached the server: its answer arrives 150 s later
(both stubbed clocks jump), by which time another run took the lease over. Dated on arrival,
that answer would be a fresh proof and the segments would re-stamp for another heartbeat period;
dated on sending it is 150 s old, so each segment writes at most the one row it may already
have been sending: the bound docs/control-contract.md states.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index.names import CONTROL_PK
from saga_index.layout_change.backfill.keeper import LeaseKeeper, take_run
from saga_index.layout_change.backfill.leased import fence_for_run
from saga_index.layout_change.backfill.local import run_backfill
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token
from saga_index.layout_change.record.store import ControlStore
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant, request

SEGMENTS = 4
ROWS = 240
RATE = 150.0
PAUSE_SECONDS = 150.0  # past the lease's TTL (120 s): the lease can be taken over meanwhile
POLL_SECONDS = 0.25  # the run (ROWS at RATE) lasts several heartbeat periods


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("clockfence", synthesized_template, endpoint_url=None)


class Clocks:
    """The worker's wall and monotonic clocks: real time, plus the pauses it went through."""

    def __init__(self) -> None:
        self.wall = Clock()
        self._started = time.monotonic()
        self.offset = 0.0
        self.lock = threading.Lock()

    def now(self) -> Any:
        return self.wall.now + timedelta(seconds=time.monotonic() - self._started + self.offset)

    def mono(self) -> float:
        return time.monotonic() + self.offset

    def pause(self, seconds: float) -> None:
        with self.lock:
            self.offset += seconds


def test_a_worker_paused_right_after_a_heartbeat_writes_at_most_one_row_per_segment(
    dynamo: Backend,
) -> None:
    for n in range(ROWS):
        dynamo.put_saga(f"c{n:04}", f"person-{n % 37}")
    plant(dynamo, "migrating")
    clocks = Clocks()
    store = ControlStore(dynamo.new_client(), dynamo.table_name)
    token = new_lease_token()
    run_request = request(segments=SEGMENTS, rate=RATE)
    ticket, _ = take_run(
        store, run_request, holder="paused@host", token=token, clock=clocks.now, arm=False
    )
    fence = fence_for_run(
        dynamo.client,
        dynamo.table_name,
        token=token,
        state_version=ticket.state_version,
        ttl_seconds=120.0,
        poll_seconds=POLL_SECONDS,
        transactional=False,
        clock=clocks.now,
        monotonic=clocks.mono,
    )
    bucket = TokenBucket(RATE)
    keeper = LeaseKeeper(
        store,
        token,
        bucket,
        own_rate=RATE,
        clock=clocks.now,
        monotonic=clocks.mono,
        poll_seconds=POLL_SECONDS,
        fence=fence,
    )
    heartbeats: list[int] = []
    taken_over = threading.Event()
    after_loss: list[str] = []

    def answer_arrives_late(parsed: Any, **_: Any) -> None:
        # The second heartbeat (the first inside the run) reached the server; the process is
        # stopped before its answer is read, and meanwhile another run takes the lease over.
        if parsed.get("Attributes", {}).get("PK", {}).get("S") != CONTROL_PK:
            return
        heartbeats.append(1)
        if len(heartbeats) == 2:
            clocks.pause(PAUSE_SECONDS)
            other = ControlStore(dynamo.new_client(), dynamo.table_name)
            acquire_lease(
                other, holder="next", token=new_lease_token(), direction="forward", clock=clocks.now
            )
            taken_over.set()

    def row_sent(params: Any, **_: Any) -> None:
        if taken_over.is_set() and params["Key"]["PK"]["S"].startswith("RSAGA#"):
            after_loss.append(params["Key"]["PK"]["S"])

    store.client.meta.events.register("after-call.dynamodb.UpdateItem", answer_arrives_late)
    dynamo.client.meta.events.register("provide-client-params.dynamodb.UpdateItem", row_sent)

    with keeper:
        outcome = run_backfill(
            dynamo.client, dynamo.table_name, run_request, run=ticket, bucket=bucket, fence=fence
        )

    assert taken_over.is_set(), "the run ended before its second heartbeat: more rows needed"
    assert keeper.lost is not None
    assert "no heartbeat proved the backfill lease" in str(keeper.lost)
    # The late answer did not refresh the proof: it is as old as the pause
    assert fence.heartbeat_age() >= PAUSE_SECONDS
    assert len(after_loss) <= SEGMENTS, after_loss
    assert sum(r.restamped for r in outcome.results) < ROWS
