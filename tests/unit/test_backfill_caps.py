"""The write caps a run ran at: one segment's sequence across its invocations, within its
share of the payload budget, and the run's merged from its segments'."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from saga_index.layout_change.backfill.caps import (
    APPLIED_CAP_BUDGET,
    MAX_APPLIED_CAPS,
    MIN_APPLIED_CAPS,
    applied_cap_limit,
    extend_caps,
    merge_caps,
)


def is_subsequence(short: list[float], long: list[float]) -> bool:
    rest = iter(long)
    return all(any(value == other for other in rest) for value in short)


def test_each_invocation_adds_only_the_changes_and_rounds_to_a_few_bytes() -> None:
    first = extend_caps([], [40.0], limit=16)
    second = extend_caps(first, [40.0, 8.0], limit=16)  # it started at the cap the last ended at
    third = extend_caps(second, [8.0, 100 / 3], limit=16)
    assert (first, second, third) == ([40.0], [40.0, 8.0], [40.0, 8.0, 33.333])


def test_past_its_limit_a_segment_keeps_its_first_cap_and_its_latest() -> None:
    caps = extend_caps([], [float(n) for n in range(1, 11)], limit=4)
    assert caps == [1.0, 8.0, 9.0, 10.0]
    assert extend_caps(caps, [11.0], limit=4) == [1.0, 9.0, 10.0, 11.0]


def test_a_segments_share_of_the_budget_is_at_least_its_first_and_latest() -> None:
    assert applied_cap_limit(1) == MAX_APPLIED_CAPS
    assert applied_cap_limit(400) == APPLIED_CAP_BUDGET // 400 == 5
    assert applied_cap_limit(1000) == MIN_APPLIED_CAPS == 2
    assert applied_cap_limit(1000, budget=None) == MAX_APPLIED_CAPS


def test_segments_that_saw_the_same_changes_merge_into_one_sequence() -> None:
    assert merge_caps([[400.0, 20.0]] * 1000) == [400.0, 20.0]


def test_a_segment_that_ended_early_or_started_late_adds_nothing_the_others_saw() -> None:
    # the record went 50 -> 20 -> 50: one segment saw it all, one ended before the throttle,
    # one started after it
    assert merge_caps([[50.0, 20.0, 50.0], [50.0], [20.0, 50.0]]) == [50.0, 20.0, 50.0]


def test_a_change_only_one_segment_saw_is_kept_in_its_place() -> None:
    assert merge_caps([[50.0, 50.5, 20.0], [50.0, 20.0]]) == [50.0, 50.5, 20.0]
    assert merge_caps([]) == []


caps = st.lists(st.sampled_from([5.0, 20.0, 50.0, 400.0]), max_size=6)


@given(st.lists(caps, max_size=8))
def test_the_merge_holds_every_segments_sequence_in_order_and_nothing_else(
    sequences: list[list[float]],
) -> None:
    merged = merge_caps(sequences)
    assert all(is_subsequence(sequence, merged) for sequence in sequences)
    assert set(merged) == {cap for sequence in sequences for cap in sequence}
    assert len(merged) <= sum(len(sequence) for sequence in sequences)
