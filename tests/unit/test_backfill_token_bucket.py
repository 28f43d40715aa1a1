"""The token bucket that paces the backfill's writes, on a fake clock."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.backfill.pacer import PaceRules
from saga_index.layout_change.backfill.pacing import TokenBucket
from tests.support.far_over import far_over as refused_far_over


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self.slept += seconds


def bucket(rate: float, clock: FakeClock, **kwargs: object) -> TokenBucket:
    return TokenBucket(rate, clock=clock, sleep=clock.sleep, **kwargs)  # type: ignore[arg-type]


def far_over(b: TokenBucket, reasons: tuple[str, ...] = (), segment: int | None = None) -> None:
    refused_far_over(lambda: b.on_throttle(reasons, segment=segment), lambda: b.decreases)


def take(b: TokenBucket, n: int) -> None:
    for _ in range(n):
        assert b.acquire()


@pytest.mark.parametrize("rate", [0.5, 1.0, 7.5, 50.0, 1000.0])
def test_given_a_rate_when_many_tokens_are_taken_then_they_come_exactly_at_that_rate(
    rate: float,
) -> None:
    clock = FakeClock()
    b = bucket(rate, clock)
    take(b, 1)  # the one token of burst
    start = clock.now
    take(b, 200)
    assert clock.now - start == pytest.approx(200 / rate, rel=1e-9)


@pytest.mark.parametrize(("rate", "banked"), [(10, 1), (100, 5), (1000, 50)])
def test_given_idle_time_then_at_most_50_ms_of_tokens_are_banked(rate: float, banked: int) -> None:
    # The cap must hold over any window, so a long pause buys almost no burst.
    clock = FakeClock()
    b = bucket(rate, clock)
    clock.now += 60
    before = clock.now
    take(b, banked)
    assert clock.now == before  # the banked tokens come at once
    take(b, rate)
    assert clock.now - before == pytest.approx(1.0)  # then exactly at the rate


def test_given_late_wake_ups_then_the_rate_is_still_met() -> None:
    # sleep() overshoots; a one-token bucket would lose every overshoot.
    clock = FakeClock()
    late = 0.001
    b = TokenBucket(100, clock=clock, sleep=lambda s: clock.sleep(s + late))
    take(b, 1)
    start = clock.now
    take(b, 1000)
    assert 1000 / (clock.now - start) == pytest.approx(100, rel=0.01)


# Recovery frozen (a time scale of hours): what a test of the bucket's metering needs.
FROZEN = PaceRules(increase_interval=10_000.0)


def test_given_a_throttle_then_the_rate_halves_and_recovers_gradually_to_the_cap() -> None:
    clock = FakeClock()
    b = bucket(100, clock)
    far_over(b, ("IndexWriteProvisionedThroughputExceeded",))
    assert b.rate == 50
    assert b.decreases == 2  # a step back, escalated
    clock.now += 24
    take(b, 1)
    # 95 % of the way to 90 % of the rate remembered as bad (100) within the increase interval
    assert b.rate == pytest.approx(90 - 40 * math.exp(-3), rel=1e-3)
    clock.now += 600
    assert b.rate == 100  # the memory decayed, the probe reached the cap: never above it
    assert b.pace().reason == "cap"


def test_given_a_burst_of_throttles_then_the_rate_steps_back_and_halves_once_per_interval() -> None:
    clock = FakeClock()
    b = bucket(64, clock, rules=PaceRules(decrease_interval=1))
    b.on_throttle()
    assert (b.rate, b.decreases) == (pytest.approx(0.9 * 64), 1)  # a step back
    for _ in range(20):  # the key goes on refusing: it was far over, halve (once)
        b.on_throttle()
    assert (b.rate, b.decreases) == (32, 2)
    clock.now += 1
    rising = b.rate
    b.on_throttle()
    # rising when throttled: back to the rate a second ago (32), not halved
    assert (b.rate, b.decreases) == (pytest.approx(min(0.9 * rising, 32)), 3)


def test_given_endless_throttles_then_the_rate_stops_at_its_floor() -> None:
    clock = FakeClock()
    b = bucket(64, clock)
    for _ in range(30):
        for _ in range(5):  # each second's refusals: far over
            b.on_throttle()
        clock.now += 1
    assert b.rate == b.lowest_rate == 1
    at_floor = b.decreases
    for _ in range(10):
        b.on_throttle()
        clock.now += 1
    assert b.rate == 1
    assert b.decreases == at_floor  # at the floor a throttle changes nothing


def test_given_a_halved_rate_then_tokens_come_at_the_new_rate() -> None:
    clock = FakeClock()
    b = bucket(10, clock, burst_seconds=0, rules=FROZEN)
    take(b, 1)
    far_over(b)
    start = clock.now
    take(b, 10)
    assert clock.now - start == pytest.approx(2.0, rel=1e-3)  # 10 tokens at 5/s


def test_given_a_key_range_throttle_then_the_segments_wait_for_the_slowed_rate() -> None:
    clock = FakeClock()
    b = bucket(40, clock, segments=4, burst_seconds=0, rules=FROZEN)
    far_over(b, ("IndexWriteKeyRangeThroughputExceeded",), segment=2)
    assert b.rate == 40  # the run is not slowed
    take(b, 1)
    start = clock.now
    for _ in range(5):
        assert b.acquire(segment=2)
    # one run token (1/40 s), then the 10/s share halved: 5/s
    assert clock.now - start == pytest.approx(1 / 40 + 4 / 5, rel=1e-3)
    start = clock.now
    for _ in range(5):
        assert b.acquire(segment=1)
    # segment 1, not slowed, paces as the slowed one does: the key it found full is likely its
    assert clock.now - start == pytest.approx(1 / 40 + 4 / 5, rel=1e-3)


def test_given_a_late_wake_up_then_a_slowed_segment_keeps_its_rate() -> None:
    clock = FakeClock()
    b = TokenBucket(
        40, clock=clock, sleep=lambda s: clock.sleep(s + 0.01), segments=4, rules=FROZEN
    )
    far_over(b, ("IndexWriteKeyRangeThroughputExceeded",), segment=2)
    assert b.acquire(segment=2)
    start = clock.now
    for _ in range(50):
        assert b.acquire(segment=2)
    # every wake-up 10 ms late, and still 5/s: the lateness is kept, within the burst
    assert 50 / (clock.now - start) == pytest.approx(5, rel=0.01)


def test_given_an_account_limit_then_no_token_until_the_pause_ends() -> None:
    clock = FakeClock()
    b = bucket(10, clock)
    take(b, 1)
    b.on_throttle(["TableWriteAccountLimitExceeded"])
    assert b.pace().paused
    assert "TableWriteAccountLimitExceeded" in b.pace().describe()
    start = clock.now
    take(b, 1)
    assert clock.now - start >= 60  # the pause, then the halved rate
    assert not b.pace().paused
    assert b.rate == 5


def test_given_a_stop_request_while_waiting_then_acquire_returns_false_without_a_token() -> None:
    clock = FakeClock()
    b = bucket(0.1, clock, max_sleep=0.25)  # one token per 10 s
    take(b, 1)
    naps: list[float] = []
    assert b.acquire(should_stop=lambda: len(naps) >= 3 or naps.append(1) is not None) is False
    assert clock.slept == pytest.approx(0.75)  # short naps: a stop is noticed within 0.25 s


@pytest.mark.parametrize("rate", [0, -1, float("inf"), float("nan")])
def test_given_a_rate_that_is_not_positive_and_finite_then_it_is_refused(rate: float) -> None:
    with pytest.raises(InvalidInputError, match="positive"):
        TokenBucket(rate)


def test_given_a_new_cap_then_tokens_come_at_it() -> None:
    # The control record's runtime throttle, applied to a running bucket.
    clock = FakeClock()
    b = bucket(100, clock, burst_seconds=0)
    take(b, 1)
    b.set_cap(10)
    start = clock.now
    take(b, 10)
    assert clock.now - start == pytest.approx(1.0)
    b.set_cap(200)
    start = clock.now
    take(b, 200)
    assert clock.now - start == pytest.approx(1.0, rel=0.01)
    with pytest.raises(InvalidInputError, match="positive"):
        b.set_cap(0)


def test_given_a_bucket_backing_off_then_a_new_cap_does_not_end_the_back_off() -> None:
    clock = FakeClock()
    b = bucket(100, clock)
    far_over(b)
    b.set_cap(400)
    assert (b.cap, b.rate) == (400, 50)  # still backing off, recovering toward 400
    b.set_cap(20)
    assert (b.cap, b.rate) == (20, 20)


def test_given_a_pause_then_no_token_until_resumed_and_no_burst_after() -> None:
    clock = FakeClock()
    b = bucket(10, clock, max_sleep=0.25)
    take(b, 1)
    b.set_paused(True)
    naps: list[float] = []

    def resume_after_an_hour() -> bool:
        naps.append(clock.now)
        if clock.now - naps[0] >= 3600:
            b.set_paused(False)
        return False

    start = clock.now
    assert b.acquire(should_stop=resume_after_an_hour)
    # it waited the whole pause in short naps, banked nothing, and then paced at the rate
    assert clock.now - start >= 3600
    assert max(later - earlier for earlier, later in pairwise(naps)) <= 0.25 + 1e-9
    resumed = clock.now
    take(b, 10)
    assert clock.now - resumed == pytest.approx(1.0, abs=0.11)


def test_given_a_stop_request_while_paused_then_acquire_returns_false() -> None:
    clock = FakeClock()
    b = bucket(10, clock)
    b.set_paused(True)
    calls: list[int] = []
    assert b.acquire(should_stop=lambda: len(calls) >= 2 or calls.append(1) is not None) is False
