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
from saga_index.layout_change.backfill.pace_curve import (
    PACED_START_FRACTION,
    PACED_START_SECONDS,
    STARTING,
    paced_rules,
)
from saga_index.layout_change.backfill.pacer import (
    ESCALATE_AFTER,
    ESCALATE_SHARE,
    Pacer,
    PaceRules,
)
from saga_index.layout_change.backfill.throttle_reasons import Scope, reasons_of, scope_of
from saga_index.layout_change.backfill.wire import SegmentCounts
from tests.support.far_over import far_over as refused_far_over

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


def far_over(
    pacer: Pacer,
    reason: str = "TableWriteProvisionedThroughputExceeded",
    segment: int | None = None,
) -> None:
    refused_far_over(lambda: pacer.observe([reason], segment), lambda: pacer.decreases)


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
    stepped_from = 0.0
    escalated = False
    held: list[tuple[float, float]] = []  # (rate held under, until)
    for event in events:
        if isinstance(event, Wait):
            clock.now += event.seconds
        elif isinstance(event, Throttle):
            before, rate_before = pacer.decreases, pacer.run_rate()
            pacer.observe(event.reasons, event.segment)
            if pacer.run_rate() < rate_before and pacer.pauses == 0:
                if clock.now - last_decrease >= rules.decrease_interval - 1e-9:
                    # a step back: at most one per decrease interval
                    last_decrease, stepped_from, escalated = clock.now, rate_before, False
                    held.append((rate_before * rules.approach, clock.now + rules.bad_rate_seconds))
                else:
                    # within it, at most one escalation: to half the rate stepped back from
                    assert not escalated
                    escalated = True
                    assert pacer.run_rate() == pytest.approx(max(pacer.floor, stepped_from / 2))
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


def test_given_a_steady_rate_throttled_then_it_steps_back_and_halves_if_refusals_go_on() -> None:
    clock = Clock()
    pacer = Pacer(800, clock=clock)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert pacer.run_rate() == pytest.approx(720)  # a step back: 90 % of the rate
    # refusals within the decrease interval, fewer than enough: the pace barely over the key
    enough = max(ESCALATE_AFTER, ESCALATE_SHARE * 800)  # 16 at 800/s
    for _ in range(int(enough) - 1):
        clock.now += 0.01
        pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert (pacer.decreases, pacer.run_rate()) == (1, pytest.approx(720))
    # enough of them: it was far over (the load under it rose): half the rate it stepped from
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert (pacer.decreases, pacer.run_rate()) == (2, 400)
    clock.now += 0.5
    for _ in range(100):  # the same second's: no further decrease
        pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert pacer.decreases == 2
    assert pacer.pace().reason == "IndexWriteProvisionedThroughputExceeded"


def test_given_a_step_back_then_refusals_after_its_interval_do_not_escalate_it() -> None:
    clock = Clock()
    pacer = Pacer(100, clock=clock)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    clock.now += 1.0  # the key took the stepped-back pace for a second: a new step, not halving
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    assert pacer.decreases == 2
    assert pacer.run_rate() == pytest.approx(0.9 * 90)


def test_given_a_step_back_then_an_account_limit_still_pauses_the_run() -> None:
    clock = Clock()
    pacer = Pacer(100, clock=clock)
    pacer.observe(["IndexWriteProvisionedThroughputExceeded"])
    pacer.observe(["TableWriteAccountLimitExceeded"])  # not taken for one more refusal
    assert pacer.paused()
    assert pacer.pauses == 1


def test_given_a_throttle_then_recovery_is_gradual_toward_90_percent_of_the_bad_rate() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    far_over(pacer)  # 1000 bad, now 500
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
    far_over(pacer)  # 1000 bad: held under 900
    clock.now += 25
    far_over(pacer)  # 882 steady: halved, bad 882
    bad = 900 - 400 * math.exp(-25 / 8)
    assert pacer.run_rate() == pytest.approx(bad / 2)
    held = []
    for _ in range(29):
        clock.now += 1
        held.append(pacer.run_rate())
    assert max(held) < 0.9 * bad  # the memory holds it under the bad rate's 90 %
    assert held[-1] > 0.88 * bad  # and near it, once recovered
    clock.now += 1  # 30 s: the memory decayed: a probe, CUBIC centred on the bad rate
    start = 0.9 * bad - (0.9 * bad - bad / 2) * math.exp(-30 / 8)
    flat_at = 24 * ((1 - start / bad) / 0.5) ** (1 / 3)  # back at the bad rate (CUBIC's K)
    probe = []
    for _ in range(40):
        clock.now += 1
        probe.append(pacer.run_rate())
    # each second's rate and its rise to the next, short of the cap (where the probe ends)
    rises = [(rate, later - rate) for rate, later in pairwise(probe) if later < 1000]
    assert len(rises) > 20
    assert all(rise > 0 for _, rise in rises)
    below = [rise for rate, rise in rises if rate < bad]
    above = [rise for rate, rise in rises if rate > bad]
    assert all(a > b for a, b in pairwise(below))  # concave back to the bad rate
    assert all(a < b for a, b in pairwise(above))  # convex past it
    # flat around it: seven seconds within half a percent of the rate the key refused at, where
    # the key's ceiling is (the first seconds past the memory climbed 3 % of it each)
    assert sum(abs(rate - bad) < 0.005 * bad for rate in probe) >= 7
    assert probe[0] - start > 0.02 * bad
    assert probe[math.floor(flat_at) - 1] < bad < probe[math.ceil(flat_at) - 1]
    # +50 % of the bad rate within the increase interval past it (the cap the ceiling)
    assert probe[math.ceil(flat_at + 24) - 1] == pytest.approx(min(1000, 1.5 * bad), rel=1e-3)


def test_given_a_throttle_while_rising_then_the_pace_steps_back_under_it() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock)
    far_over(pacer)  # 1000 bad, now 500, rising
    clock.now += 3
    rising, a_second_ago = pacer.run_rate(), 900 - 400 * math.exp(-2 / 8)
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])
    # the rise overshot: back to the rate a second ago, not halved
    assert pacer.run_rate() == pytest.approx(min(0.9 * rising, a_second_ago))
    assert pacer.run_rate() > rising / 2
    assert pacer.decreases == 3  # the first step back, its escalation, this one


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
    far_over(pacer, "IndexWriteKeyRangeThroughputExceeded", segment=3)
    assert pacer.run_rate() == 400  # the run is not slowed
    assert pacer.segment_rate(3) == 50  # its 100/s share, halved
    # a segment not slowed paces as the slowed ones do: the key they found full is likely its
    assert pacer.segment_rate(0) == 50
    assert "1 segment(s) slowed" in pacer.pace().describe()
    clock.now += 5
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=1)
    # the key is full: segment 1 steps back from the rate it wrote at (segment 3's, which it
    # paced as), and segment 3, slowed on it, falls with it (rising: to its rate a second ago)
    rising = 90 - 40 * math.exp(-5 / 8)
    assert pacer.segment_rate(1) == pytest.approx(0.9 * rising)
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
    far_over(pacer, "IndexWriteKeyRangeThroughputExceeded", segment=3)
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


def test_given_a_backfills_rules_then_the_run_rises_from_its_start_to_the_cap() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock, rules=paced_rules())
    assert pacer.run_rate() == pytest.approx(1000 * PACED_START_FRACTION)
    assert pacer.pace().reason == STARTING
    seen = []
    for _ in range(int(PACED_START_SECONDS)):
        clock.now += 1
        seen.append(pacer.run_rate())
    # evenly, and at the cap when its start's seconds are up
    steps = [later - earlier for earlier, later in pairwise(seen)]
    assert steps == pytest.approx([1000 * (1 - PACED_START_FRACTION) / PACED_START_SECONDS] * 9)
    assert seen[-1] == pytest.approx(1000)
    assert pacer.pace().reason == "cap"
    # a run at a fixed cap (floor 1) starts at it
    assert Pacer(1000, clock=clock, rules=paced_rules(1.0)).run_rate() == 1000


def test_given_a_throttle_while_starting_then_the_rise_ends_under_it() -> None:
    clock = Clock()
    pacer = Pacer(1000, clock=clock, rules=paced_rules())
    clock.now += 5  # 650/s, rising
    rising = pacer.run_rate()
    pacer.observe(["TableWriteProvisionedThroughputExceeded"])
    # back to the rate a second ago (580/s), under the rate refused, and held under it
    assert pacer.run_rate() == pytest.approx(min(0.9 * rising, rising - 70))
    clock.now += 20
    assert pacer.run_rate() < 0.9 * rising
    assert pacer.pace().reason == "TableWriteProvisionedThroughputExceeded"


def test_given_a_snapshot_while_starting_then_the_next_invocation_goes_on_rising() -> None:
    first, second = Clock(), Clock()
    second.now = 10.0
    pacer = Pacer(1000, clock=first, rules=paced_rules())
    first.now += 4
    later = Pacer(1000, clock=second, rules=paced_rules())
    later.restore(WIRE.validate_python(pacer.snapshot()))  # type: ignore[arg-type]
    for _ in range(12):
        assert later.run_rate() == pytest.approx(pacer.run_rate())
        first.now += 1
        second.now += 1
    assert later.run_rate() == 1000


def test_given_a_snapshot_after_the_start_then_the_next_invocation_does_not_rise_again() -> None:
    first, second = Clock(), Clock()
    pacer = Pacer(1000, clock=first, rules=paced_rules())
    first.now += 30
    assert pacer.run_rate() == 1000
    later = Pacer(1000, clock=second, rules=paced_rules())
    later.restore(pacer.snapshot())
    assert later.run_rate() == 1000  # at the cap it was at, not at its start's 30 %


def test_given_segments_slowed_then_another_segment_slows_from_the_rate_it_wrote_at() -> None:
    clock = Clock()
    pacer = Pacer(400, clock=clock, segments=4)
    far_over(pacer, "IndexWriteKeyRangeThroughputExceeded", segment=3)
    assert pacer.segment_rate(0) == 50  # segment 0 writes at the slowed one's rate
    clock.now += 5
    pacer.observe(["IndexWriteKeyRangeThroughputExceeded"], segment=0)
    # refused, it steps back from what it wrote at, not from the run's 100/s share: that rate
    # (90/s, twice what the key took) would flood the key
    assert pacer.segment_rate(0) == pytest.approx(0.9 * (90 - 40 * math.exp(-5 / 8)))


@pytest.mark.parametrize("start", [0.0, -0.1, 1.01])
def test_given_a_start_out_of_range_then_it_is_refused(start: float) -> None:
    with pytest.raises(InvalidInputError, match="pace start"):
        PaceRules(start_fraction=start)


def test_a_probe_is_cubic_centred_on_the_bad_rate() -> None:
    from saga_index.layout_change.backfill.pace_curve import probe

    flat_at = 24 * (0.1 / 0.5) ** (1 / 3)
    assert probe(90, 100, 0, 24) == pytest.approx(90)
    assert probe(90, 100, flat_at, 24) == pytest.approx(100)
    assert probe(90, 100, flat_at + 24, 24) == pytest.approx(150)
    # a second either side of the bad rate it barely moves; a second after the memory, 1.2 %
    assert probe(90, 100, flat_at + 1, 24) - 100 < 0.01
    assert probe(90, 100, 1, 24) - 90 > 1.2
    # from at or above the bad rate (a raised cap's floor): convex from where it starts
    assert probe(120, 100, 24, 24) == pytest.approx(180)


def rising_pacer() -> tuple[Clock, Pacer]:
    """A run 5 s into its start's rise: 650/s, 580 a second ago (a rise of 70 writes)."""
    clock = Clock()
    pacer = Pacer(1000, clock=clock, rules=paced_rules())  # 300, rising to 1000 within 10 s
    clock.now += 5
    return clock, pacer


def refuse(clock: Clock, pacer: Pacer, count: int, reason: str, segment: int | None = None) -> None:
    """`count` refused requests 10 ms apart (the rest of one key second)."""
    for _ in range(count):
        pacer.observe([reason], segment)
        clock.now += 0.01


def test_given_a_rise_that_overshot_then_the_rest_of_its_second_does_not_halve_it() -> None:
    clock, pacer = rising_pacer()
    # the rise overshot: the key refuses the rest of its second, 50 requests (fewer than the
    # 70 it rose by, and the 13 a steady rate's step back takes to escalate, together)
    refuse(clock, pacer, 50, "TableWriteProvisionedThroughputExceeded")
    assert pacer.decreases == 1  # stepped back to the rate a second ago, not halved (325)
    assert 580 <= pacer.run_rate() < 650
    # held steady under the memory, the same refusals say the load under it rose: halved
    clock.now += 20
    steady = pacer.run_rate()
    refuse(clock, pacer, 50, "TableWriteProvisionedThroughputExceeded")
    assert pacer.decreases == 3
    assert pacer.run_rate() < steady / 2 * 1.05


def test_given_a_rise_when_the_load_rose_then_refusals_beyond_the_rise_halve_it() -> None:
    clock, pacer = rising_pacer()
    # the step back, the 13 refusals a steady rate's takes to escalate, the 70 the rise could
    # explain and one more: the load under the rise rose too
    enough = max(ESCALATE_AFTER, ESCALATE_SHARE * 650)
    refuse(
        clock, pacer, 1 + math.ceil(enough + 70.0) + 1, "TableWriteProvisionedThroughputExceeded"
    )
    assert pacer.decreases == 2
    assert pacer.run_rate() == pytest.approx(325, rel=0.01)  # half the rate it stepped from


def test_given_segments_rising_on_a_key_range_then_a_load_that_rose_halves_them() -> None:
    """Segments slowed by a key range probe upward on their own curves; a rise of the traffic
    on that key during their climb refuses more than the climb could: they halve at once
    (the refusals do not run on for a second at the stepped-back rates)."""
    reason = "IndexWriteKeyRangeThroughputExceeded"
    clock = Clock()
    pacer = Pacer(1000, clock=clock, segments=4)
    pacer.observe([reason], 0)  # segment 0 slowed from its share, 250 -> 225
    clock.now += 1.0
    pacer.observe([reason], 0)  # and again: 225 remembered as bad, 202.5
    clock.now += 30 + 14 + 11  # the memory decayed, back at 225 and climbing past it
    climbing = pacer.segment_rate(0) or 0.0
    assert 225 < climbing < 250
    refused = 0
    while pacer.decreases < 4 and refused < 60:
        refuse(clock, pacer, 1, reason, segment=0)
        refused += 1
        if refused == 4:
            # a few refusals (the climb's own, a write or two over the key's ceiling): one step
            # back (to the rate a second ago)
            assert pacer.decreases == 3
            assert climbing * 0.9 <= (pacer.segment_rate(0) or 0) < climbing
    # enough more (the key far over): the step back escalated to half the rate it stepped from,
    # more than a steady rate's step back takes but fewer than a second's refusals
    assert pacer.decreases == 4
    assert ESCALATE_SHARE * 4 * climbing < refused < 60
    assert pacer.segment_rate(0) == pytest.approx(climbing / 2, rel=0.01)
