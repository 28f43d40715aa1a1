"""The backfill's pacer (layout_change.backfill.pacer): its invariants under any sequence of
throttles, cap changes and time, on a fake clock (hypothesis), and the answer to each reason."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.backfill.pacer import Pacer, PaceRules, Scope, reasons_of, scope_of

REASONS = [
    "TableWriteKeyRangeThroughputExceeded",
    "IndexWriteKeyRangeThroughputExceeded",
    "TableWriteProvisionedThroughputExceeded",
    "IndexWriteProvisionedThroughputExceeded",
    "TableWriteAccountLimitExceeded",
    "IndexWriteAccountLimitExceeded",
    "TableWriteMaxOnDemandThroughputExceeded",
    "IndexWriteMaxOnDemandThroughputExceeded",
    "TableReadKeyRangeThroughputExceeded",
    "something DynamoDB adds later",
]


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Wait:
    seconds: float


@dataclass(frozen=True)
class Throttle:
    reasons: tuple[str, ...]
    segment: int | None


@dataclass(frozen=True)
class NewCap:
    cap: float


EVENTS = st.one_of(
    st.builds(Wait, st.floats(min_value=0.0, max_value=90.0)),
    st.builds(
        Throttle,
        st.lists(st.sampled_from(REASONS), max_size=2).map(tuple),
        st.one_of(st.none(), st.integers(min_value=0, max_value=3)),
    ),
    st.builds(NewCap, st.floats(min_value=1.0, max_value=2_000.0)),
)


@settings(max_examples=150, deadline=None)
@given(
    cap=st.floats(min_value=1.0, max_value=2_000.0),
    events=st.lists(EVENTS, max_size=60),
)
def test_given_any_signals_then_the_pace_keeps_its_invariants(
    cap: float, events: list[Wait | Throttle | NewCap]
) -> None:
    clock = Clock()
    rules = PaceRules()
    pacer = Pacer(cap, clock=clock, rules=rules, segments=4)
    last_rate = pacer.run_rate()
    last_change = -1e18  # time of the last increase or decrease
    increases: list[float] = []
    bad: list[tuple[float, float]] = []  # (rate throttled, when)
    for event in events:
        if isinstance(event, Wait):
            clock.now += event.seconds
        elif isinstance(event, Throttle):
            before = pacer.decreases, pacer.pauses
            rate_before = pacer.run_rate()
            pacer.observe(event.reasons, event.segment)
            if pacer.pauses != before[1] or (
                pacer.decreases != before[0] and pacer.run_rate() < rate_before
            ):
                bad.append((rate_before, clock.now))
        else:
            pacer.set_cap(event.cap)
            # the floor wins over a remembered bad rate: a run always makes progress
            bad = [(throttled, when) for throttled, when in bad if throttled > pacer.floor]
        rate = pacer.run_rate()
        pace = pacer.pace()
        # never above the cap; never below the floor (a pause shows rate 0, nothing else does)
        assert rate <= pacer.cap + 1e-9
        assert rate >= pacer.floor - 1e-9
        assert pace.paused or pace.rate == rate
        for segment in range(4):
            own = pacer.segment_rate(segment)
            assert own is None or pacer.segment_floor - 1e-9 <= own <= rate + 1e-9
        if isinstance(event, Wait) and rate > last_rate:
            # increases spaced: at least the interval after the previous change
            increases.append(clock.now)
            assert clock.now - last_change >= rules.increase_interval - 1e-9
            assert rate <= 2 * last_rate + 1e-9  # at most double
        if rate != last_rate and not isinstance(event, NewCap):
            last_change = clock.now
        if isinstance(event, NewCap):
            last_change = max(last_change, clock.now) if rate < last_rate else last_change
        # a rate throttled is not reached again while it is remembered
        for throttled, when in bad:
            if clock.now - when < rules.bad_rate_seconds and rate > pacer.floor:
                assert rate < throttled
        last_rate = rate


def test_given_a_throttle_within_the_decrease_interval_then_it_halves_once() -> None:
    clock = Clock()
    pacer = Pacer(800, clock=clock)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    clock.now += 19.9
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert (pacer.run_rate(), pacer.decreases) == (400, 1)
    clock.now += 0.1
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert (pacer.run_rate(), pacer.decreases) == (200, 2)


def test_given_recovery_then_it_doubles_every_40_s_up_to_90_percent_of_the_bad_rate() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 1000 bad, now 500
    clock.now += 20
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 500 bad, now 250
    seen = []
    for _ in range(6):
        clock.now += 40
        seen.append(pacer.run_rate())
    # 450: doubling 250 stops at 90 % of 500; at 200 s the bad rate ages to 550 (90 %: 495)
    assert seen == pytest.approx([450, 450, 450, 450, 495, 495])
    assert pacer.pace().reason == "TableWriteProvisionedThroughputExceeded"


def test_given_a_key_range_reason_then_only_its_segment_slows() -> None:
    clock = Clock()
    pacer = Pacer(400, clock=clock, segments=4)
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=3)
    assert pacer.run_rate() == 400
    assert pacer.segment_rate(3) == 50  # its 100/s share, halved
    assert pacer.segment_rate(0) is None
    assert "1 segment(s) slowed" in pacer.pace().describe()


@pytest.mark.parametrize(
    ("reason", "scope"),
    [
        ("IndexWriteKeyRangeThroughputExceeded", Scope.SEGMENT),
        ("TableReadKeyRangeThroughputExceeded", Scope.SEGMENT),
        ("TableWriteProvisionedThroughputExceeded", Scope.RUN),
        ("IndexWriteProvisionedThroughputExceeded", Scope.RUN),
        ("TableWriteAccountLimitExceeded", Scope.PAUSE),
        ("IndexWriteAccountLimitExceeded", Scope.PAUSE),
        ("TableWriteMaxOnDemandThroughputExceeded", Scope.PAUSE),
        ("IndexWriteMaxOnDemandThroughputExceeded", Scope.PAUSE),
        ("unknown", Scope.RUN),
    ],
)
def test_each_reason_asks_for_its_answer(reason: str, scope: Scope) -> None:
    assert scope_of(reason) is scope


def test_given_either_spelling_of_the_list_then_the_reasons_are_read() -> None:
    listed = [{"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": "arn:...index/GSI4"}]
    assert reasons_of({"ThrottlingReasons": listed}) == ["IndexWriteKeyRangeThroughputExceeded"]
    assert reasons_of({"throttlingReasons": listed}) == ["IndexWriteKeyRangeThroughputExceeded"]
    assert reasons_of({"Error": {"Code": "ThrottlingException"}}) == []


def test_given_a_snapshot_then_the_next_invocation_goes_on_from_it() -> None:
    first, second = Clock(), Clock()
    second.now = 10.0  # another invocation's clock, another origin
    pacer = Pacer(100, clock=first)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    first.now += 30
    later = Pacer(100, clock=second)
    later.restore(pacer.snapshot())
    assert later.run_rate() == 50
    second.now += 9.9
    assert later.run_rate() == 50  # 40 s since the decrease not yet passed
    second.now += 0.1
    assert later.run_rate() == 90  # doubled, held under 90 % of the remembered 100


@pytest.mark.parametrize("floor", [0.0, -0.5, 1.5])
def test_given_a_floor_out_of_range_then_it_is_refused(floor: float) -> None:
    with pytest.raises(InvalidInputError, match="pace floor"):
        PaceRules(floor_fraction=floor)
