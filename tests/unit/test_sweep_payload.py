"""The Scheduler payload's clock check: a scheduledTime further than the tolerance from the
invocation clock is refused, at the boundary included."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from handlers.runtime import ScheduledPayload

NOW = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)


def at(moment: datetime) -> dict[str, str]:
    return {"scheduledTime": moment.isoformat()}


def parse(event: dict[str, str], invoked_at: datetime | None = NOW) -> ScheduledPayload:
    return ScheduledPayload.for_invocation(event, invoked_at=invoked_at)


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(minutes=20), -timedelta(minutes=20)])
def test_given_a_scheduled_time_within_the_tolerance_then_it_is_accepted(offset: timedelta) -> None:
    assert parse(at(NOW + offset)).scheduled_time == NOW + offset


@pytest.mark.parametrize(
    "offset",
    [
        timedelta(minutes=20, milliseconds=1),
        -timedelta(minutes=20, milliseconds=1),
        timedelta(days=30000),
    ],
)
def test_given_a_scheduled_time_beyond_the_tolerance_then_it_is_refused_naming_both_clocks(
    offset: timedelta,
) -> None:
    with pytest.raises(ValidationError) as caught:
        parse(at(NOW + offset))
    (error,) = caught.value.errors()
    assert error["loc"] == ("scheduledTime",)
    assert "20 minutes" in error["msg"]
    assert "2026-07-10T12:02:00" in error["msg"]  # the invocation clock it was compared with


def test_given_no_scheduled_time_then_there_is_nothing_to_check() -> None:
    assert parse({}).scheduled_time is None


def test_given_no_invocation_clock_then_the_model_only_validates_the_shape() -> None:
    # The drift guard's payload extends this model and parses without a clock.
    far = NOW + timedelta(days=30000)
    assert ScheduledPayload.model_validate(at(far)).scheduled_time == far


def test_the_tolerance_covers_every_sweep_period_and_a_delivery_margin() -> None:
    # A firing may wait in Lambda's async queue up to its maximum event age (= its period):
    # delivered that late, it must still be accepted, or it would land in the failure queue.
    from saga_index.index.jobs import SCHEDULED_JOBS

    longest = max(job.period_minutes for job in SCHEDULED_JOBS)
    assert timedelta(minutes=longest + 5) <= ScheduledPayload.CLOCK_TOLERANCE
