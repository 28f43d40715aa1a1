"""The cached provider: at most T seconds stale, bounded stale serving when the record cannot
be read, loud failure after. The clock and T are injected: nothing here sleeps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from saga_index.index import keys
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.errors import (
    ControlRecordInvalidError,
    ControlRecordUnavailableError,
)
from saga_index.layout_change.record.phase import layouts_for_phase
from saga_index.layout_change.record.provider import ControlProvider, FixedStateSource
from saga_index.layout_change.record.routing import Routing
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.layout_change.record.timing import CACHE_SECONDS, ControlTiming

AT = datetime(2026, 3, 1, tzinfo=UTC)
S16 = Layout.sharded(16)
TIMING = ControlTiming(cache_seconds=30, stale_grace_seconds=30, in_flight_margin_seconds=15)


def _migrating(version: int = 1) -> ControlState:
    return ControlState(
        transition=Transition(
            version=version,
            layout=LEGACY,
            moving_to=S16,
            previous_layout=LEGACY,
            previous_moving_to=None,
            changed_at=AT,
            changed_by="op",
            reason="go",
            effective_at=AT + TIMING.effective_delay,
        )
    )


class FakeRecord:
    """The record as a store would read it; `fail` makes every read raise it."""

    def __init__(self, state: ControlState) -> None:
        self.current = state
        self.reads = 0
        self.fail: Exception | None = None

    def read(self) -> ControlState:
        self.reads += 1
        if self.fail is not None:
            raise self.fail
        return self.current


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def world() -> tuple[FakeRecord, FakeClock, ControlProvider]:
    fake, clock = FakeRecord(ControlState.never_migrated()), FakeClock()
    return fake, clock, ControlProvider(fake, timing=TIMING, clock=clock)


def test_given_the_default_timing_then_t_is_thirty_seconds_and_effective_at_is_later() -> None:
    assert CACHE_SECONDS == 30.0
    assert ControlTiming().effective_delay == timedelta(seconds=75)


def test_given_many_reads_within_t_then_the_record_is_read_once(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, clock, provider = world
    for _ in range(16):
        provider.routing()
        clock.now += 1

    assert fake.reads == 1


def test_given_a_phase_change_then_a_writer_stamps_the_new_key_within_t(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, clock, provider = world
    assert provider.routing().write_key("p-1") == keys.LEGACY_GSI4PK

    fake.current = _migrating()
    clock.now += TIMING.cache_seconds - 0.001
    stale = provider.routing().write_key("p-1")
    clock.now += 0.001
    fresh = provider.routing().write_key("p-1")

    assert stale == keys.LEGACY_GSI4PK  # allowed: still within T
    assert fresh == keys.shard_gsi4pk_for_person("p-1", 16)


def test_given_refresh_then_the_record_is_read_now_whatever_the_cache_holds(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, _, provider = world
    provider.state()
    fake.current = _migrating()

    assert provider.refresh().version == 1
    assert fake.reads == 2


@pytest.mark.parametrize(
    "failure",
    [
        ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "GetItem"),
        EndpointConnectionError(endpoint_url="http://dynamodb"),
        ControlRecordInvalidError("phase disagrees"),
    ],
    ids=["client-error", "connection", "malformed"],
)
def test_given_an_unreadable_record_then_the_last_good_state_serves_until_t_plus_grace(
    world: tuple[FakeRecord, FakeClock, ControlProvider], failure: Exception
) -> None:
    fake, clock, provider = world
    fake.current = _migrating()
    provider.state()

    fake.fail = failure
    clock.now += TIMING.max_served_age - 0.001
    served = provider.state()
    clock.now += 0.001

    assert served.version == 1
    with pytest.raises(ControlRecordUnavailableError, match="60 s"):
        provider.state()


def test_given_an_unreadable_record_and_no_state_yet_then_reads_fail(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, _, provider = world
    fake.fail = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "x"}}, "GetItem")

    with pytest.raises(ControlRecordUnavailableError, match="no state was read before"):
        provider.routing()


def test_given_a_failing_record_then_it_is_read_again_once_a_second_not_per_call(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    # Given a good state past T and a record that now fails (a throttled control partition)
    fake, clock, provider = world
    provider.state()
    fake.fail = ClientError({"Error": {"Code": "ThrottlingException", "Message": "x"}}, "GetItem")
    clock.now += TIMING.cache_seconds
    # When 100 requests arrive within the next second, then 100 more a second later
    first = [provider.state() for _ in range(100)]
    reads_in_the_first_second = fake.reads - 1
    clock.now += TIMING.retry_after_seconds
    second = [provider.state() for _ in range(100)]
    # Then each second re-reads the record once, serving the last good state meanwhile
    assert (reads_in_the_first_second, fake.reads - 1) == (1, 2)
    assert {s.version for s in first + second} == {0}


def test_given_a_failing_record_and_no_state_yet_then_calls_fail_without_a_read_each(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, _, provider = world
    fake.fail = EndpointConnectionError(endpoint_url="http://dynamodb")
    for _ in range(10):
        with pytest.raises(ControlRecordUnavailableError, match="Could not connect"):
            provider.routing()
    assert fake.reads == 1
    # and a refresh (a worker between invocations) reads at once, whatever the last failure
    fake.fail = None
    assert provider.refresh().version == 0
    assert fake.reads == 2


def test_given_the_record_readable_again_then_serving_resumes_from_a_fresh_read(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, clock, provider = world
    provider.state()
    fake.fail = ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "GetItem")
    clock.now += TIMING.cache_seconds
    provider.state()

    fake.fail, fake.current = None, _migrating(version=2)
    clock.now += 1

    assert provider.state().version == 2
    assert provider.age_seconds == 0


def test_given_a_missing_record_then_it_is_served_and_routes_over_both_layouts(
    world: tuple[FakeRecord, FakeClock, ControlProvider],
) -> None:
    fake, _, provider = world
    sharded = Transition(
        version=2,
        layout=S16,
        moving_to=None,
        previous_layout=LEGACY,
        previous_moving_to=S16,
        changed_at=AT,
        changed_by="op",
        reason="done",
        effective_at=AT,
    )
    fake.current = ControlState(transition=sharded, condition=RecordCondition.MISSING)

    routing = provider.routing()

    assert routing == Routing.between(LEGACY, S16)


def test_given_a_fixed_source_with_a_phase_override_then_it_routes_as_that_phase() -> None:
    source = FixedStateSource(
        ControlState.never_migrated(), Routing.between(*layouts_for_phase("rolling-back", 16))
    )

    assert source.routing().write_key("p-1") == keys.LEGACY_GSI4PK
    assert source.state().version == 0
