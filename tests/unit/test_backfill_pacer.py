"""The backfill's pacer (layout_change.backfill.pacer): its invariants under any sequence of
throttles, cap changes and time, on a fake clock (hypothesis), and the answer to each reason."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.backfill.pacer import Pacer, PaceRules, Scope, reasons_of, scope_of
from saga_index.layout_change.backfill.wire import SegmentCounts

# What a Step Functions worker accepts as the carried pace (wire.SegmentCounts.pace).
WIRE: TypeAdapter[object] = TypeAdapter(SegmentCounts.model_fields["pace"].annotation)

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
# Found by the property: a throttle at the floor of a raised cap (65/64 above the rate
# remembered as bad at cap 1) must not replace that memory with its own, higher rate; back at
# cap 1 the pace would rise over the first bad rate while it is still remembered.
@example(
    cap=1.0,
    events=[Throttle((), None), Wait(1.0), NewCap(65.0), Throttle((), None), NewCap(1.0)],
)
def test_given_any_signals_then_the_pace_keeps_its_invariants(
    cap: float, events: list[Wait | Throttle | NewCap]
) -> None:
    clock = Clock()
    rules = PaceRules()
    pacer = Pacer(cap, clock=clock, rules=rules, segments=4)
    last_decrease = -1e18
    held: list[tuple[float, float]] = []  # (rate held under, until)
    for event in events:
        if isinstance(event, Wait):
            clock.now += event.seconds
        elif isinstance(event, Throttle):
            before, rate_before = pacer.decreases, pacer.run_rate()
            pacer.observe(event.reasons, event.segment)
            if pacer.run_rate() < rate_before and pacer.pauses == 0:
                # the run's rate falls at most once per decrease interval
                assert clock.now - last_decrease >= rules.decrease_interval - 1e-9
                last_decrease = clock.now
                held.append((rate_before * rules.approach, clock.now + rules.bad_rate_seconds))
            assert pacer.decreases >= before
        else:
            pacer.set_cap(event.cap)
        rate = pacer.run_rate()
        pace = pacer.pace()
        # never above the cap; never below the floor (a pause shows rate 0, nothing else does)
        assert rate <= pacer.cap + 1e-9
        assert rate >= pacer.floor - 1e-9
        assert pace.paused or pace.rate == rate
        for segment in range(4):
            own = pacer.segment_rate(segment)
            assert own is None or pacer.segment_floor - 1e-9 <= own <= rate / 4 + 1e-9
        # a throttled rate holds the pace under it (a margin under) while it is remembered
        for under, until in held:
            if clock.now < until and rate > pacer.floor:
                assert rate <= under + 1e-9


def test_given_a_throttle_at_a_steady_rate_then_it_halves_once_per_decrease_interval() -> None:
    clock = Clock()
    pacer = Pacer(800, clock=clock)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    clock.now += 0.9
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])  # the same second's: counted once
    assert pacer.decreases == 1
    assert pacer.run_rate() == pytest.approx(400 + 320 * (1 - math.exp(-0.9 / 8)))
    assert pacer.pace().reason == "IndexWriteProvisionedThroughputExceeded"


def test_given_a_throttle_then_recovery_is_gradual_toward_90_percent_of_the_bad_rate() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 1000 bad, now 500
    seen = [pacer.run_rate()]
    for _ in range(29):
        clock.now += 1
        seen.append(pacer.run_rate())
    assert seen[0] == 500
    steps = [later - earlier for earlier, later in pairwise(seen)]
    # rising every second, fastest far from the bad rate, never a jump, never past 90 % of it
    assert all(a > b > 0 for a, b in pairwise(steps))
    assert max(steps) < 60
    assert max(seen) < 900
    # 24 s after the throttle (the increase interval): 95 % of the way
    assert seen[24] == pytest.approx(900 - 400 * math.exp(-3))


def test_given_a_remembered_bad_rate_then_the_pace_holds_under_it_until_it_decays() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    clock.now += 1
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 1000 bad: held under 900
    clock.now += 25
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 882 steady: halved, bad 882
    bad = 900 - 400 * math.exp(-25 / 8)
    assert pacer.run_rate() == pytest.approx(bad / 2)
    held = []
    for _ in range(29):
        clock.now += 1
        held.append(pacer.run_rate())
    assert max(held) < 0.9 * bad  # the memory holds it under the bad rate's 90 %
    assert held[-1] > 0.88 * bad  # and near it, once recovered
    clock.now += 1  # 30 s: the memory decayed: a probe upward, gentle near the bad rate
    probe = []
    for _ in range(24):
        clock.now += 1
        probe.append(pacer.run_rate())
    assert all(a <= b for a, b in pairwise(probe))
    assert probe[1] - probe[0] < 2  # gentle at first
    assert probe[16] > bad  # past the bad rate within 17 s of the probe
    assert probe[-1] == pytest.approx(min(1000, 1.5 * 0.9 * bad), rel=1e-3)


def test_given_a_throttle_while_rising_then_the_pace_steps_back_under_it() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])  # 1000 bad, now 500, rising
    clock.now += 3
    rising, a_second_ago = pacer.run_rate(), 900 - 400 * math.exp(-2 / 8)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])
    # the rise overshot: back to the rate a second ago, not halved
    assert pacer.run_rate() == pytest.approx(min(0.9 * rising, a_second_ago))
    assert pacer.run_rate() > rising / 2
    assert pacer.decreases == 2


@pytest.mark.parametrize("rate", [10.0, 1_000.0])
def test_given_a_cap_then_no_sequence_of_time_and_raises_exceeds_it(rate: float) -> None:
    clock = Clock()
    pacer = Pacer(rate, clock=clock)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])
    peak = 0.0
    for second in range(600):
        clock.now += 1
        if second == 100:
            pacer.set_cap(rate / 4)
        if second == 300:
            pacer.set_cap(rate)
        peak = max(peak, pacer.run_rate() / pacer.cap)
    assert peak == pytest.approx(1.0)  # it got back to its cap, never above it
    assert pacer.pace().reason == "cap"


@pytest.mark.parametrize(
    "reason", ["TableWriteAccountLimitExceeded", "IndexWriteMaxOnDemandThroughputExceeded"]
)
def test_given_an_account_or_on_demand_maximum_then_the_run_pauses_and_says_so(
    reason: str,
) -> None:
    clock = Clock()
    pacer = Pacer(100, clock=clock)
    pacer.observe([reason])
    pace = pacer.pace()
    assert (pace.paused, pace.rate, pace.reason) == (True, 0.0, reason)
    assert pace.describe() == f"paused ({reason})"
    assert pace.to_json()["paused"] is True
    assert (pacer.pauses, pacer.paused_seconds) == (1, 60.0)
    clock.now += 59.9
    pacer.observe([reason])  # still paused: one pause, extended
    assert pacer.pauses == 1
    assert pacer.paused()
    clock.now += 60.1
    # resumed at half the rate it had, a pause being no time spent at a rate
    assert not pacer.paused()
    assert pacer.run_rate() == pytest.approx(90 - 40 * math.exp(-0.1 / 8))


def test_given_a_key_range_reason_then_the_slowed_segments_pace_and_the_run_does_not() -> None:
    clock = Clock()
    pacer = Pacer(400, clock=clock, segments=4)
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=3)
    assert pacer.run_rate() == 400  # the run is not slowed
    assert pacer.segment_rate(3) == 50  # its 100/s share, halved
    # a segment not slowed paces as the slowed ones do: the key they found full is likely its
    assert pacer.segment_rate(0) == 50
    assert "1 segment(s) slowed" in pacer.pace().describe()
    clock.now += 5
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=1)
    # the key is full: segment 3, slowed on it, falls with segment 1 (rising: a step back)
    assert pacer.segment_rate(1) == 50
    rising = 90 - 40 * math.exp(-5 / 8)
    assert pacer.segment_rate(3) == pytest.approx(min(0.9 * rising, 90 - 40 * math.exp(-4 / 8)))
    clock.now += 600
    assert pacer.segment_rate(3) is None  # recovered together: the run's rate governs again


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
    first.now += 12
    later = Pacer(100, clock=second)
    later.restore(pacer.snapshot())
    for _ in range(40):
        assert later.run_rate() == pytest.approx(pacer.run_rate())  # the same curve
        assert later.snapshot()["badRate"] == pacer.snapshot()["badRate"]
        first.now += 1
        second.now += 1


def test_given_a_snapshot_of_the_first_version_then_it_goes_on_from_its_rate() -> None:
    # A Step Functions segment in flight across the deploy: Vitess' keys, no curve.
    clock = Clock()
    pacer = Pacer(100, clock=clock)
    pacer.restore(
        {
            "rate": 45.0,
            "reason": "IndexWriteProvisionedThroughputExceeded",
            "sinceIncrease": None,
            "sinceDecrease": 30.0,
            "badRate": 50.0,
            "badFor": 150.0,
            "pausedFor": 0.0,
            "pauseReason": "",
        }
    )
    assert pacer.run_rate() == 45  # held at 90 % of the bad rate
    clock.now += 149
    assert pacer.run_rate() == 45
    assert pacer.pace().reason == "IndexWriteProvisionedThroughputExceeded"
    clock.now += 60  # the memory decayed: probing above it again
    assert pacer.run_rate() > 50


def test_given_a_key_range_slowdown_then_the_segments_next_invocation_starts_slowed() -> None:
    # A Step Functions worker's pacer: one segment (3), its share the whole cap.
    first, second = Clock(), Clock()
    second.now = 10.0  # another invocation's clock, another origin
    pacer = Pacer(100, clock=first)
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=3)
    first.now += 2
    carried = WIRE.validate_python(pacer.snapshot(3))  # as the state machine carries it
    later = Pacer(100, clock=second)
    later.restore(carried)
    assert later.run_rate() == 100  # the run is not slowed, in either invocation
    # the segment starts its next invocation slowed, then recovers on the curve it was on
    assert later.segment_rate(3) == pytest.approx(90 - 40 * math.exp(-2 / 8))
    for _ in range(40):
        assert later.segment_rate(3) == pytest.approx(pacer.segment_rate(3))
        assert later.snapshot(3) == pytest.approx(pacer.snapshot(3))
        first.now += 1
        second.now += 1
    first.now += 600
    second.now += 600
    # recovered: the run's rate governs it again, and nothing of it is carried on
    assert later.segment_rate(3) is pacer.segment_rate(3) is None
    assert "slowedSegment" not in later.snapshot(3)


def test_given_a_snapshot_with_or_without_the_slowed_segment_then_either_worker_goes_on() -> None:
    clock = Clock()
    pacer = Pacer(100, clock=clock)
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=3)
    newer, run_only = pacer.snapshot(3), pacer.snapshot()
    # the first version's keys mean what they meant: an older worker restoring the newer
    # snapshot (reading only those) goes on at the run's pace as it did
    assert {k: v for k, v in newer.items() if k in run_only} == run_only
    assert newer["slowedSegment"] == 3
    # every added value is one the worker's `pace` accepts (an older worker's too)
    assert WIRE.validate_python(newer) == newer
    # a snapshot without them (an older worker's) starts the segment at the run's rate
    older = Pacer(100, clock=clock)
    older.restore(run_only)
    assert older.segment_rate(3) is None
    # another segment's invocation is not slowed by this one's carried state
    assert pacer.snapshot(2) == run_only


@pytest.mark.parametrize("floor", [0.0, -0.5, 1.5])
def test_given_a_floor_out_of_range_then_it_is_refused(floor: float) -> None:
    with pytest.raises(InvalidInputError, match="pace floor"):
        PaceRules(floor_fraction=floor)
