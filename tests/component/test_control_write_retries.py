"""Every control-record write survives DynamoDB's "not now" answers (on moto, the refusals
injected by botocore `before-call` hooks, so nothing reaches the table): the heartbeat, the
lease's acquire and release, the operator's throttle, pause, resume and stop, and `phase set`'s
intent, compare-and-set and settle are sent again after TransactionConflictException and the
throttles, and give up with RetryLaterError naming the item and the attempts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from saga_index.index.errors import RetryLaterError
from saga_index.layout_change.backfill.keeper import LeaseKeeper
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.lease.controls import (
    clear_throttle,
    pause_backfill,
    resume_backfill,
    set_throttle,
)
from saga_index.layout_change.lease.grant import (
    acquire_lease,
    heartbeat_lease,
    new_lease_token,
    release_lease,
)
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.retry import RetryPolicy, retry_transient
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant
from tests.support.control_fixtures import set_phase

# No waiting in tests: the back-off's shape is the unit test's business.
FAST = RetryPolicy(attempts=6, base_delay=0.0, max_delay=0.0)
REFUSALS = ["TransactionConflictException", "ThrottlingException", "RequestLimitExceeded"]


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("retries", synthesized_template, endpoint_url=None)


class Refuse:
    """Refuse the next `times` writes of `operation` with `code`, before they are sent."""

    def __init__(self, client: Any, operation: str, code: str, times: int) -> None:
        self.code, self.left, self.refused = code, times, 0
        client.meta.events.register(f"before-call.dynamodb.{operation}", self)

    def __call__(self, **_: Any) -> None:
        if self.left <= 0:
            return
        self.left -= 1
        self.refused += 1
        raise ClientError({"Error": {"Code": self.code, "Message": "refused"}}, "Write")


def store_of(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name, retry=FAST)


def held_lease(dynamo: Backend, clock: Clock) -> str:
    token = new_lease_token()
    acquire_lease(store_of(dynamo), holder="t", token=token, direction="forward", clock=clock)
    return token


WRITES: dict[str, Callable[[ControlStore, Clock, str], object]] = {
    "heartbeat": lambda s, c, t: heartbeat_lease(s, token=t, clock=c),
    "throttle": lambda s, c, t: set_throttle(s, 50, changed_by="ops", clock=c),
    "throttle --clear": lambda s, c, t: clear_throttle(s, changed_by="ops", clock=c),
    "pause": lambda s, c, t: pause_backfill(s, changed_by="ops", clock=c),
    "resume": lambda s, c, t: resume_backfill(s, changed_by="ops", clock=c),
    "release (stop)": lambda s, c, t: release_lease(s, token=t, clock=c),
}


@pytest.mark.parametrize("code", REFUSALS)
@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_state_write_refused_for_now_is_sent_again_until_it_lands(
    dynamo: Backend, write: str, code: str
) -> None:
    plant(dynamo, "migrating")
    clock = Clock()
    token = held_lease(dynamo, clock)
    refuse = Refuse(dynamo.client, "UpdateItem", code, times=FAST.attempts - 1)

    WRITES[write](store_of(dynamo), clock, token)

    assert refuse.refused == FAST.attempts - 1
    state = store_of(dynamo).read()
    if write == "release (stop)":
        assert state.lease is None
    elif write == "pause":
        assert state.backfill_paused
    elif write == "throttle":
        assert state.backfill_max_writes_per_second == 50.0


@pytest.mark.parametrize("write", sorted(WRITES))
def test_a_state_write_that_stays_refused_gives_up_naming_the_item_and_the_attempts(
    dynamo: Backend, write: str
) -> None:
    plant(dynamo, "migrating")
    clock = Clock()
    token = held_lease(dynamo, clock)
    before = store_of(dynamo).read()
    refuse = Refuse(dynamo.client, "UpdateItem", "TransactionConflictException", times=99)

    with pytest.raises(RetryLaterError) as raised:
        WRITES[write](store_of(dynamo), clock, token)

    assert refuse.refused == FAST.attempts
    message = str(raised.value)
    assert "STATE item (RSAGA_INDEX#CONTROL / STATE)" in message
    assert f"{FAST.attempts} attempts" in message
    assert "TransactionConflictException" in message
    assert raised.value.retry_at is not None
    refuse.left = 0
    assert store_of(dynamo).read() == before  # nothing was written


def test_acquire_survives_a_conflict_and_a_throttle(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    conflict = Refuse(dynamo.client, "UpdateItem", "TransactionConflictException", times=2)
    token = new_lease_token()

    grant = acquire_lease(
        store_of(dynamo), holder="t", token=token, direction="forward", clock=Clock()
    )

    assert conflict.refused == 2
    assert grant.lease.token == token
    assert store_of(dynamo).read().lease_epoch == grant.epoch


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem"])
def test_phase_set_survives_conflicts_on_its_intent_compare_and_set_and_settle(
    dynamo: Backend, operation: str
) -> None:
    # PutItem: the HISTORY intent and its settling; UpdateItem: the STATE compare-and-set
    plant(dynamo, "migrating")
    refuse = Refuse(dynamo.client, operation, "ProvisionedThroughputExceededException", times=3)

    change = set_phase(
        store_of(dynamo), Phase.ROLLING_BACK, changed_by="ops", reason="abort", clock=Clock()
    )

    assert refuse.refused == 3
    assert change.state.phase is Phase.ROLLING_BACK
    assert change.history_written


def test_phase_set_that_stays_refused_abandons_its_intent_and_says_retry_later(
    dynamo: Backend,
) -> None:
    plant(dynamo, "migrating")
    store = store_of(dynamo)
    Refuse(dynamo.client, "UpdateItem", "TransactionConflictException", times=FAST.attempts)

    with pytest.raises(RetryLaterError, match="STATE item"):
        set_phase(store, Phase.ROLLING_BACK, changed_by="ops", reason="abort", clock=Clock())

    assert store.read().phase is Phase.MIGRATING
    [_, intent] = store.history_entries()
    assert (intent.applied, intent.abandoned) == (False, True)


def test_the_keeper_rides_out_a_heartbeat_that_gave_up(dynamo: Backend) -> None:
    # A heartbeat that stayed contended is one missed heartbeat, not a crash of the keeper
    plant(dynamo, "migrating")
    clock = Clock()
    token = held_lease(dynamo, clock)
    keeper = LeaseKeeper(
        store_of(dynamo), token, TokenBucket(10.0), own_rate=10.0, clock=clock, poll_seconds=0.01
    )
    with keeper:
        refuse = Refuse(dynamo.client, "UpdateItem", "ThrottlingException", times=FAST.attempts)
        deadline = time.monotonic() + 10
        while refuse.left > 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refuse.left == 0
    assert keeper.lost is None


def test_the_helper_waits_with_bounded_jittered_back_off_and_passes_other_errors() -> None:
    waits: list[float] = []
    calls: list[int] = []
    policy = RetryPolicy(attempts=6, base_delay=0.05, max_delay=0.3)

    def refused() -> None:
        calls.append(1)
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": ""}}, "PutItem")

    with pytest.raises(RetryLaterError, match="slot 3 stayed contended: 6 attempts"):
        retry_transient(refused, what="slot 3", policy=policy, sleep=waits.append, rng=lambda: 1)
    assert len(calls) == 6
    assert waits == [0.05, 0.1, 0.2, 0.3, 0.3]

    def denied() -> None:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": ""}}, "PutItem")

    with pytest.raises(ClientError, match="AccessDenied"):
        retry_transient(denied, what="x", policy=policy, sleep=waits.append)
