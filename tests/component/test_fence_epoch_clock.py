"""The fence epoch never lets one host's clock block later runs, and a backfill refused by a
fence slot says what it found, frees its lease, and names a step that works when followed
literally (`saga-index backfill clear-fence`). On moto (it runs the fence's transactions)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from moto import mock_aws

from saga_index.layout_change.record import ControlStore
from saga_index.layout_change.record.items import FENCE_EPOCH, fence_slot_key, state_key
from saga_index.store.dynamo.codec import serialize
from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run
from tests.support.backfill_contract import AFTER_EFFECTIVE, Clock, plant, seed

FAST = ("--max-writes-per-second", "1000", "--segments", "2")
AHEAD = timedelta(minutes=10)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("epoch-clock", synthesized_template, endpoint_url=None)


def slot_epoch(dynamo: Backend, slot: int) -> int | None:
    raw = dynamo.client.get_item(
        TableName=dynamo.table_name, Key=serialize(fence_slot_key(slot)), ConsistentRead=True
    ).get("Item")
    return None if raw is None else int(raw[FENCE_EPOCH]["N"])


def lose_and_restore_state(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(state_key()))
    code, _, err = run(capsys, dynamo, "phase", "restore", "--json")
    assert code == 0, err
    assert ControlStore(dynamo.client, dynamo.table_name).read().lease_epoch is None


def backfill_from_a_clock_ahead(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
    """A migrating table's forward backfill run from a host whose clock is 10 minutes ahead."""
    plant(dynamo, "migrating")
    seed(dynamo)
    code, _, err = run(capsys, dynamo, "backfill", *FAST, clock=Clock(AFTER_EFFECTIVE + AHEAD))
    assert code in (0, 3), err


def test_a_fence_armed_from_a_clock_ahead_does_not_block_the_next_run_after_a_restore(
    capsys: pytest.CaptureFixture[str], dynamo: Backend
) -> None:
    # Given a backfill run from a host whose clock is 10 minutes ahead: slot 0 armed at an
    # epoch 600,000 ms above the wall clock
    backfill_from_a_clock_ahead(capsys, dynamo)
    armed = slot_epoch(dynamo, 0)
    assert armed is not None
    assert armed >= int((AFTER_EFFECTIVE + AHEAD).timestamp() * 1000)
    # And the STATE item lost and restored from history (without leaseEpoch)
    lose_and_restore_state(capsys, dynamo)

    # When the next backfill runs from a correct clock
    code, _, err = run(capsys, dynamo, "backfill", *FAST, clock=Clock(AFTER_EFFECTIVE))

    # Then it proceeds: its epoch is above the slot's, whatever the clocks said
    assert code in (0, 3), err
    new_epoch = slot_epoch(dynamo, 0)
    assert new_epoch is not None
    assert new_epoch > armed
    state = ControlStore(dynamo.client, dynamo.table_name).read()
    assert state.lease is None
    assert state.lease_epoch == new_epoch


def test_a_slot_no_run_holds_is_named_the_lease_freed_and_clear_fence_lets_the_run_start(
    capsys: pytest.CaptureFixture[str], dynamo: Backend
) -> None:
    # Given slots armed by a run whose slot 0 is gone (deleted by hand), slot 1 left at an
    # epoch far above any the record holds
    backfill_from_a_clock_ahead(capsys, dynamo)
    stale = slot_epoch(dynamo, 1)
    assert stale is not None
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(fence_slot_key(0)))
    lose_and_restore_state(capsys, dynamo)

    # When the next backfill runs from a correct clock
    code, out, err = run(capsys, dynamo, "backfill", *FAST, clock=Clock(AFTER_EFFECTIVE))

    # Then it is refused, saying what it found: the slot, its epoch, the record's epoch
    assert code == 1, err
    assert "fence slot 1 refused this run's epoch" in err
    assert f"armed by epoch {stale}" in err
    assert "the record's leaseEpoch is" in err
    assert "saga-index backfill clear-fence --reason TEXT" in err
    # And its own lease is released: nothing blocks the next attempt
    assert ControlStore(dynamo.client, dynamo.table_name).read().lease is None

    # When the operator follows the advice literally
    code, out, err = run(capsys, dynamo, "backfill", "clear-fence", "--reason", "TEXT", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert 1 in doc["cleared"]
    assert doc["highestEpochCleared"] >= stale
    assert slot_epoch(dynamo, 1) is None
    # Then the same backfill starts
    code, _, err = run(capsys, dynamo, "backfill", *FAST, clock=Clock(AFTER_EFFECTIVE))
    assert code in (0, 3), err
    events = ControlStore(dynamo.client, dynamo.table_name).events()
    assert any(e.get("event") == "fence-cleared" and e.get("reason") == "TEXT" for e in events)


def test_clear_fence_is_refused_while_a_run_holds_a_live_lease(
    capsys: pytest.CaptureFixture[str], dynamo: Backend
) -> None:
    plant(dynamo, "migrating")
    seed(dynamo)
    assert run(capsys, dynamo, "backfill", *FAST, clock=Clock(AFTER_EFFECTIVE))[0] in (0, 3)
    armed = slot_epoch(dynamo, 0)
    from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token

    acquire_lease(
        ControlStore(dynamo.client, dynamo.table_name),
        holder="live-run",
        token=new_lease_token(),
        direction="forward",
        clock=Clock(AFTER_EFFECTIVE),
    )

    code, out, err = run(capsys, dynamo, "backfill", "clear-fence", "--reason", "x", "--json")

    assert code == 5, err
    assert json.loads(out)["retryLater"] is True
    assert "live-run" in err
    assert slot_epoch(dynamo, 0) == armed  # nothing deleted


def test_clear_fence_needs_a_reason(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
    code, _, err = run(capsys, dynamo, "backfill", "clear-fence")
    assert code == 2
    assert "--reason" in err
