"""What a refused control write may promise, and the fence epoch's guarantee (pure).

retry_transient says "nothing was written" only when no refused call had been resent by
botocore: a resend follows a lost answer as well as a throttle, so a refusal of the resend says
nothing about the first request. The next fencing epoch is above every epoch the record holds,
whatever the clock of the host taking the lease says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from saga_index.index.errors import RetryLaterError
from saga_index.layout_change.lease.epoch import next_epoch
from saga_index.layout_change.record.state import ControlState
from saga_index.store.dynamo.retry import RetryPolicy, botocore_resent, retry_transient

POLICY = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def throttled(retry_attempts: int | None) -> ClientError:
    meta = {} if retry_attempts is None else {"RetryAttempts": retry_attempts}
    return ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "x"}, "ResponseMetadata": meta},
        "UpdateItem",
    )


def give_up(errors: list[ClientError]) -> RetryLaterError:
    answers = iter(errors)

    def call() -> None:
        raise next(answers)

    with pytest.raises(RetryLaterError) as raised:
        retry_transient(call, what="the item", policy=POLICY, sleep=lambda _s: None)
    return raised.value


def test_given_refusals_never_resent_then_nothing_was_written_is_known() -> None:
    err = give_up([throttled(0), throttled(None), throttled(0)])
    assert err.outcome_known
    assert "nothing was written" in str(err)


def test_given_one_refusal_of_a_resent_request_then_what_is_stored_is_not_known() -> None:
    # The first call's request got no answer (or a throttle: botocore cannot tell us which),
    # botocore resent it, the resend was refused: the first may have landed.
    err = give_up([throttled(2), throttled(0), throttled(0)])
    assert not err.outcome_known
    assert "nothing was written" not in str(err)
    assert "may have landed" in str(err)
    assert botocore_resent(throttled(1))
    assert not botocore_resent(throttled(None))


def test_given_slot_zero_armed_by_a_clock_ahead_then_the_next_epoch_is_above_it() -> None:
    ahead = int((NOW + timedelta(minutes=10)).timestamp() * 1000)
    restored = ControlState.never_migrated()  # a restore rebuilds STATE without leaseEpoch
    epoch = next_epoch(restored, NOW, armed=ahead)
    assert epoch == ahead + 1


def test_given_nothing_in_the_record_then_the_clock_is_the_floor() -> None:
    assert next_epoch(ControlState.never_migrated(), NOW) == int(NOW.timestamp() * 1000)


def test_given_epochs_in_state_and_slot_then_the_next_is_above_both() -> None:
    from dataclasses import replace

    state = replace(ControlState.never_migrated(), lease_epoch=10**13)
    assert next_epoch(state, NOW, armed=5) == 10**13 + 1
    assert next_epoch(state, NOW, armed=10**13 + 7) == 10**13 + 8
