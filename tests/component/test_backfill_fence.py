"""The lease fence on moto (which has TransactWriteItems): once a newer run armed the fence
slots, a worker of an older one writes nothing, however long it was paused; a re-stamp touches
its own slot and the row, never the control partition; conflicts with an arming are retried a
bounded number of times; a server without transactions falls back to the clock fence once, with
a warning."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from saga_index.index import keys
from saga_index.layout_change.backfill.fence import (
    CONFLICT_RETRIES,
    FenceMode,
    LeaseFence,
    RowWrite,
)
from saga_index.layout_change.backfill.leased import default_max_heartbeat_age
from saga_index.layout_change.backfill.pacing import SegmentThrottledError
from saga_index.layout_change.backfill.slots import arm_fence, read_slot
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token, release_lease
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.expressions import attribute_fragment
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant
from tests.support.control_fixtures import set_phase
from tests.support.fence_scenario import SAGAS, run_paused_worker_scenario

STATE_ITEM_EXISTS = attribute_fragment("attribute_exists(#PK)", "PK")


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("fence", synthesized_template, endpoint_url=None)


def restamp_request(dynamo: Backend, saga_id: str) -> dict[str, Any]:
    """The row re-stamp the worker would send (legacy -> its shard)."""
    return {
        "TableName": dynamo.table_name,
        "Key": {"PK": {"S": f"RSAGA#{saga_id}"}, "SK": {"S": "META"}},
        "UpdateExpression": "SET #gsi4pk = :target",
        "ConditionExpression": "attribute_exists(#pk) AND #gsi4pk = :readGsi4pk",
        "ExpressionAttributeNames": {"#pk": "PK", "#gsi4pk": "GSI4PK"},
        "ExpressionAttributeValues": {
            ":target": {"S": keys.sharded_gsi4pk(3)},
            ":readGsi4pk": {"S": keys.LEGACY_GSI4PK},
        },
    }


def leased_fence(dynamo: Backend, clock: Clock, **kw: Any) -> tuple[LeaseFence, str]:
    """A fence of a run that holds the lease and armed its slots. Unless a test gives its own,
    its monotonic clock stands still and its sleeps pass at once: no heartbeat grows old and no
    slot's pace waits while a loaded machine runs the test slowly."""
    kw.setdefault("monotonic", lambda: 0.0)
    kw.setdefault("sleep", lambda _seconds: None)
    plant(dynamo, "migrating")
    store = ControlStore(dynamo.client, dynamo.table_name)
    token = new_lease_token()
    grant = acquire_lease(store, holder="t", token=token, direction="forward", clock=clock)
    arm_fence(
        dynamo.client,
        dynamo.table_name,
        epoch=grant.epoch,
        token=token,
        state_version=1,
        segments=2,
        armed_by="t",
    )
    fence = LeaseFence(
        dynamo.client,
        dynamo.table_name,
        token=token,
        state_version=1,
        epoch=grant.epoch,
        max_heartbeat_age=10.0,
        clock=clock,
        **kw,
    )
    fence.mark_heartbeat()
    return fence, token


def gsi4pk(dynamo: Backend, saga_id: str) -> str:
    raw = dynamo.get(f"RSAGA#{saga_id}", "META")
    assert raw is not None
    return str(raw["GSI4PK"]["S"])


def test_a_fenced_write_under_a_held_lease_lands_and_a_changed_row_is_skipped(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("a", "p-1")
    dynamo.put_saga("b", "p-2", gsi4pk=keys.sharded_gsi4pk(9))
    fence, _ = leased_fence(dynamo, Clock())

    assert fence.write(restamp_request(dynamo, "a")) is RowWrite.WRITTEN
    assert fence.write(restamp_request(dynamo, "b")) is RowWrite.ROW_CHANGED
    assert (gsi4pk(dynamo, "a"), gsi4pk(dynamo, "b")) == (
        keys.sharded_gsi4pk(3),
        keys.sharded_gsi4pk(9),
    )
    assert fence.mode is FenceMode.TRANSACTIONAL
    assert fence.lost is None


def a_newer_run(dynamo: Backend, clock: Clock, direction: str) -> None:
    """Another run takes the lease and arms its fence slots (one segment: the other slots it
    finds are revoked)."""
    store = ControlStore(dynamo.client, dynamo.table_name)
    token = new_lease_token()
    grant = acquire_lease(store, holder="newer", token=token, direction=direction, clock=clock)
    arm_fence(
        dynamo.client,
        dynamo.table_name,
        epoch=grant.epoch,
        token=token,
        state_version=grant.state.version,
        segments=1,
        armed_by="newer",
    )


@pytest.mark.parametrize("loss", ["taken-over", "released", "rolled-back"])
@pytest.mark.parametrize("slot", [0, 1])
def test_a_write_after_a_newer_run_armed_is_refused_by_dynamodb_and_writes_nothing(
    dynamo: Backend, loss: str, slot: int
) -> None:
    # Given a fence whose clock check still passes (a worker paused after it)
    dynamo.put_saga("a", "p-1")
    clock = Clock()
    fence, token = leased_fence(dynamo, clock)
    store = ControlStore(dynamo.client, dynamo.table_name)
    lost: list[str] = []
    fence.on_lost = lambda err: lost.append(str(err))
    if loss == "taken-over":
        clock.advance(200)
        a_newer_run(dynamo, clock, "forward")
    elif loss == "released":
        release_lease(store, token=token, clock=clock)
        a_newer_run(dynamo, clock, "forward")
    else:
        release_lease(store, token=token, clock=clock)
        set_phase(store, "rolling-back", changed_by="ops", reason="abort", clock=clock)
        clock.advance(600)
        a_newer_run(dynamo, clock, "rollback")
    fence.mark_heartbeat()  # the clock fence alone would let it through

    # When it writes, through its segment's slot
    outcome = fence.write(restamp_request(dynamo, "a"), slot=slot)

    # Then DynamoDB refused the slot's check: nothing moved, and the run is told which epoch
    # armed the slot
    assert outcome is RowWrite.LEASE_LOST
    assert gsi4pk(dynamo, "a") == keys.LEGACY_GSI4PK
    assert len(lost) == 1
    assert "refused" in lost[0]
    assert f"fence slot {slot} is armed by epoch" in lost[0]
    assert ("revoked" in lost[0]) == (slot == 1)
    assert fence.write(restamp_request(dynamo, "a"), slot=slot) is RowWrite.LEASE_LOST


def test_a_restamp_checks_its_own_slot_and_never_the_control_partition(dynamo: Backend) -> None:
    dynamo.put_saga("a", "p-1")
    fence, token = leased_fence(dynamo, Clock())
    sent: list[dict[str, Any]] = []
    dynamo.client.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems",
        lambda params, **_: sent.append(params),
    )
    assert fence.write(restamp_request(dynamo, "a"), slot=1) is RowWrite.WRITTEN
    [request] = sent
    keys_touched = [
        next(iter(action.values()))["Key"]["PK"]["S"] for action in request["TransactItems"]
    ]
    assert keys_touched == ["RSAGA_INDEX#FENCE#1", "RSAGA#a"]
    slot = read_slot(dynamo.client, dynamo.table_name, 1)
    assert slot is not None
    assert slot["leaseToken"] == token
    assert slot["epoch"] == fence.epoch


def test_the_clock_fence_refuses_a_write_once_the_last_heartbeat_is_too_old(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("a", "p-1")
    clock = Clock()
    mono = [100.0]
    fence, _ = leased_fence(dynamo, clock, transactional=False, monotonic=lambda: mono[0])
    fence.mark_heartbeat()
    mono[0] += 11.0  # the monotonic clock says 11 s, the wall clock says 0 (stepped back)
    assert fence.write(restamp_request(dynamo, "a")) is RowWrite.LEASE_LOST
    assert fence.lost is not None
    assert "no heartbeat" in str(fence.lost)
    assert gsi4pk(dynamo, "a") == keys.LEGACY_GSI4PK

    fence2, _ = leased_fence(dynamo, clock, transactional=False, monotonic=lambda: mono[0])
    fence2.mark_heartbeat()
    clock.advance(11)  # a suspended laptop: the wall clock moved on, the monotonic one did not
    assert not fence2.check_clock()
    assert default_max_heartbeat_age(120, 5) == 20.0
    assert default_max_heartbeat_age(10, 5) == 5.0


def _cancel(reasons: list[str]) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": code} for code in reasons],
        },
        "TransactWriteItems",
    )


def test_arming_conflicts_are_retried_a_bounded_number_of_times(dynamo: Backend) -> None:
    dynamo.put_saga("a", "p-1")
    fence, _ = leased_fence(dynamo, Clock(), sleep=lambda _: None)
    calls: list[int] = []

    def conflict_twice(**_: Any) -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise _cancel(["TransactionConflict", "None"])

    dynamo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", conflict_twice)
    assert fence.write(restamp_request(dynamo, "a")) is RowWrite.WRITTEN
    assert (len(calls), fence.conflicts) == (3, 2)
    dynamo.client.meta.events.unregister("before-call.dynamodb.TransactWriteItems", conflict_twice)

    def always(**_: Any) -> None:
        raise _cancel(["TransactionConflict", "None"])

    # Still our slot after every retry: the segment stops, nothing lost
    dynamo.put_saga("b", "p-2")
    dynamo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", always)
    with pytest.raises(SegmentThrottledError, match="TransactionConflict"):
        fence.write(restamp_request(dynamo, "b"))
    assert fence.conflicts == 2 + CONFLICT_RETRIES
    assert fence.lost is None

    # A newer run armed the slot meanwhile: the lease is lost, not a throttle
    clock = Clock()
    clock.advance(200)
    a_newer_run(dynamo, clock, "forward")
    assert fence.write(restamp_request(dynamo, "b")) is RowWrite.LEASE_LOST
    assert fence.lost is not None
    assert "armed by epoch" in str(fence.lost)


def test_a_server_without_transactions_falls_back_to_the_clock_fence_once_with_a_warning(
    dynamo: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    dynamo.put_saga("a", "p-1")
    dynamo.put_saga("b", "p-2")
    fence, _ = leased_fence(dynamo, Clock())
    sent: list[int] = []

    def unknown(**_: Any) -> None:
        sent.append(1)
        raise ClientError(
            {"Error": {"Code": "UnknownOperationException", "Message": ""}}, "TransactWriteItems"
        )

    dynamo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", unknown)
    with caplog.at_level(logging.WARNING):
        assert fence.write(restamp_request(dynamo, "a")) is RowWrite.WRITTEN
        assert fence.write(restamp_request(dynamo, "b")) is RowWrite.WRITTEN
    assert fence.mode is FenceMode.CLOCK
    assert len(sent) == 1
    [warning] = [r for r in caplog.records if "clock fence only" in r.getMessage()]
    assert "10 s after the last good heartbeat was sent" in warning.getMessage()


def test_given_a_paused_worker_then_the_transactional_fence_lets_no_row_move(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome, cli = run_paused_worker_scenario(
        dynamo, capsys, transactional=True, server_has_transactions=True
    )

    assert outcome.run.fence_mode == FenceMode.TRANSACTIONAL.value
    assert outcome.run.lease_lost is not None
    # Its re-stamp was refused by its slot: the rollback run armed it with a newer epoch
    assert "refused" in outcome.run.lease_lost
    assert "is armed by epoch" in outcome.run.lease_lost
    assert outcome.strays == []
    assert cli.sagas_all() == sorted(SAGAS)
    assert cli.drift() == 0


def test_given_a_paused_worker_without_a_fence_then_the_same_scenario_hides_a_saga(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deliberately broken variant: no transaction, no clock check (the old worker)
    monkeypatch.setattr(LeaseFence, "check_clock", lambda self: self.lost is None)
    outcome, cli = run_paused_worker_scenario(
        dynamo, capsys, transactional=False, server_has_transactions=True
    )

    assert outcome.strays != []
    assert len(cli.sagas_all()) < len(SAGAS)
    assert cli.drift() == 1


def test_timedelta_of_the_injected_clock_is_what_the_fence_measures() -> None:
    clock = Clock()
    fence = LeaseFence(
        None, "t", token="x", state_version=1, epoch=1, max_heartbeat_age=5, clock=clock
    )
    fence.mark_heartbeat(mono=0.0)
    clock.now += timedelta(seconds=3)
    assert fence.heartbeat_age() >= 3.0
