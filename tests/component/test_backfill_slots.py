"""The lease's fencing epoch and the fence slots it arms (backfill.slots, lease.grant) on moto:
the epoch only grows, arming keeps a high-water mark and revokes the slots of an older, wider
run, an older run's late arming changes nothing, and a retried arming is idempotent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.keeper import take_run
from saga_index.layout_change.backfill.slots import arm_fence, read_slot
from saga_index.layout_change.lease import LeaseLostError
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token, release_lease
from saga_index.layout_change.record.store import ControlStore
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("slots", synthesized_template, endpoint_url=None)


def store_of(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name)


def arm(dynamo: Backend, epoch: int, token: str, segments: int) -> int:
    return arm_fence(
        dynamo.client,
        dynamo.table_name,
        epoch=epoch,
        token=token,
        state_version=1,
        segments=segments,
        armed_by=token,
    )


def slot(dynamo: Backend, n: int) -> dict[str, Any]:
    item = read_slot(dynamo.client, dynamo.table_name, n)
    assert item is not None, f"slot {n} was never armed"
    return item


def test_every_new_token_gets_a_higher_epoch_and_a_retry_keeps_its_own(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    clock = Clock()
    first = acquire_lease(
        store_of(dynamo), holder="a", token="ta", direction="forward", clock=clock
    )
    # at least the acquisition time in epoch milliseconds
    assert first.epoch == int(clock().timestamp() * 1000)
    again = acquire_lease(
        store_of(dynamo), holder="a", token="ta", direction="forward", clock=clock
    )
    assert again.epoch == first.epoch
    release_lease(store_of(dynamo), token="ta", clock=clock)
    # in the same millisecond (or on a clock behind the last acquirer's): the previous one + 1
    second = acquire_lease(
        store_of(dynamo), holder="b", token="tb", direction="forward", clock=clock
    )
    assert second.epoch == first.epoch + 1
    assert store_of(dynamo).read().lease_epoch == second.epoch
    # and the epoch stays on STATE after the release, for the next acquisition
    release_lease(store_of(dynamo), token="tb", clock=clock)
    assert store_of(dynamo).read().lease_epoch == second.epoch


def test_arming_keeps_the_high_water_mark_and_revokes_an_older_wider_runs_slots(
    dynamo: Backend,
) -> None:
    assert arm(dynamo, 10, "wide", segments=8) == 8
    assert arm(dynamo, 11, "narrow", segments=2) == 8
    assert slot(dynamo, 0)["slots"] == 8
    for n in range(2):
        assert (slot(dynamo, n)["epoch"], slot(dynamo, n)["leaseToken"]) == (11, "narrow")
    for n in range(2, 8):
        assert slot(dynamo, n)["epoch"] == 11
        assert "leaseToken" not in slot(dynamo, n)  # revoked: no segment of any run checks it
    assert read_slot(dynamo.client, dynamo.table_name, 8) is None


def test_an_older_runs_late_arming_is_refused_and_changes_nothing(dynamo: Backend) -> None:
    arm(dynamo, 20, "newer", segments=2)
    before = [slot(dynamo, n) for n in range(2)]

    with pytest.raises(LeaseLostError, match="fence slot 0 is armed by epoch 20"):
        arm(dynamo, 19, "older", segments=6)

    assert [slot(dynamo, n) for n in range(2)] == before
    # it armed nothing beyond: its wider slots were never written
    assert read_slot(dynamo.client, dynamo.table_name, 2) is None


def test_a_retried_arming_is_idempotent(dynamo: Backend) -> None:
    arm(dynamo, 30, "run", segments=3)
    first = [slot(dynamo, n) for n in range(3)]
    assert arm(dynamo, 30, "run", segments=3) == 3
    assert [slot(dynamo, n)["epoch"] for n in range(3)] == [e["epoch"] for e in first]


def test_taking_a_run_arms_its_slots_and_a_dry_run_arms_none(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    clock = Clock()
    dry = BackfillRequest.model_validate(
        {"direction": "forward", "totalSegments": 3, "maxWritesPerSecond": 10, "dryRun": True}
    )
    ticket, _ = take_run(store_of(dynamo), dry, holder="h", token=new_lease_token(), clock=clock)
    assert ticket.lease_epoch is None
    assert read_slot(dynamo.client, dynamo.table_name, 0) is None

    run = dry.model_copy(update={"dry_run": False})
    token = new_lease_token()
    ticket, _ = take_run(store_of(dynamo), run, holder="h", token=token, clock=clock)
    assert ticket.lease_epoch is not None
    for n in range(3):
        assert (slot(dynamo, n)["epoch"], slot(dynamo, n)["leaseToken"]) == (
            ticket.lease_epoch,
            token,
        )
