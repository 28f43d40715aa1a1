"""The per-key read pacer: at most `units_per_key` read units on one key in any 1-second window,
measured on a fake clock with the pages' own costs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saga_index.index.errors import InvalidInputError
from saga_index.store.dynamo.key_pace import (
    PAGE_READ_UNITS,
    KeyReadIncompleteError,
    KeyReadPace,
    KeyReadPacer,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


class PagedKey:
    """A Query on one key answered page by page, each page costing what it is given; records
    the time each request was sent and what it cost."""

    def __init__(self, clock: FakeClock, costs: Sequence[float], *, report: bool = True) -> None:
        self.clock = clock
        self.costs = list(costs)
        self.report = report
        self.sent: list[tuple[float, float]] = []
        self.requests: list[Mapping[str, Any]] = []

    def query(self, **request: Any) -> Mapping[str, Any]:
        n = len(self.sent)
        self.requests.append(request)
        self.sent.append((self.clock(), self.costs[n]))
        page: dict[str, Any] = {"Items": [], "Count": 1}
        if self.report:
            page["ConsumedCapacity"] = {"TableName": "t", "CapacityUnits": self.costs[n]}
        if n + 1 < len(self.costs):
            page["LastEvaluatedKey"] = {"n": {"N": str(n)}}
        return page


def busiest_second(sent: Sequence[tuple[float, float]]) -> float:
    """The most read units sent in any window [t, t + 1) that starts at a request."""
    return max(sum(c for at, c in sent if start <= at < start + 1.0) for start, _ in sent)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.floats(min_value=0.5, max_value=PAGE_READ_UNITS), min_size=1, max_size=120),
    units_per_key=st.sampled_from([150.0, 300.0, 1000.0]),
)
def test_no_second_on_a_key_reads_more_than_its_units(
    costs: list[float], units_per_key: float
) -> None:
    clock = FakeClock()
    key = PagedKey(clock, costs)
    pacer = KeyReadPacer(KeyReadPace(units_per_key=units_per_key), clock=clock, sleep=clock.sleep)
    pages = list(pacer.pages(key.query, {"TableName": "t"}, "RenewalSaga#3"))
    assert len(pages) == len(costs)
    assert busiest_second(key.sent) <= units_per_key + 1e-6
    assert pacer.units_spent == pytest.approx(sum(costs))
    assert pacer.units_on("RenewalSaga#3") == pytest.approx(sum(costs))


def test_full_pages_go_at_the_pace_less_one_banked_page() -> None:
    # 100 pages of 1 MB (128 units each) at 300 units per key: the first is banked, the rest
    # refill at 300 - 128 = 172 units per second.
    clock = FakeClock()
    key = PagedKey(clock, [PAGE_READ_UNITS] * 100)
    pace = KeyReadPace()
    pacer = KeyReadPacer(pace, clock=clock, sleep=clock.sleep)
    list(pacer.pages(key.query, {}, "k"))
    assert pace.units_per_key == 300
    assert pace.rate == pytest.approx(172)
    assert clock.now == pytest.approx(99 * 128 / 172)
    assert clock.now <= pace.seconds_for(100 * 128)
    assert busiest_second(key.sent) <= 300


def test_every_request_asks_for_its_consumed_capacity() -> None:
    clock = FakeClock()
    key = PagedKey(clock, [1.0, 1.0])
    list(KeyReadPacer(clock=clock, sleep=clock.sleep).pages(key.query, {"Limit": 5}, "k"))
    assert [r["ReturnConsumedCapacity"] for r in key.requests] == ["TOTAL", "TOTAL"]
    assert key.requests[1]["ExclusiveStartKey"] == {"n": {"N": "0"}}


def test_a_server_that_does_not_report_the_cost_is_charged_a_whole_page() -> None:
    clock = FakeClock()
    key = PagedKey(clock, [0.5] * 4, report=False)
    pacer = KeyReadPacer(clock=clock, sleep=clock.sleep)
    list(pacer.pages(key.query, {}, "k"))
    assert pacer.units_spent == 4 * PAGE_READ_UNITS
    assert clock.now == pytest.approx(3 * PAGE_READ_UNITS / 172)


def test_keys_are_paced_apart() -> None:
    # A second key does not wait for the first one's pages.
    clock = FakeClock()
    pacer = KeyReadPacer(clock=clock, sleep=clock.sleep)
    first = PagedKey(clock, [PAGE_READ_UNITS] * 3)
    list(pacer.pages(first.query, {}, "a"))
    finished_first = clock.now
    second = PagedKey(clock, [PAGE_READ_UNITS])
    list(pacer.pages(second.query, {}, "b"))
    assert second.sent == [(finished_first, PAGE_READ_UNITS)]


def test_a_read_that_cannot_finish_before_its_deadline_stops_before_the_late_request() -> None:
    clock = FakeClock()
    key = PagedKey(clock, [PAGE_READ_UNITS] * 10)
    pacer = KeyReadPacer(clock=clock, sleep=clock.sleep)
    with pytest.raises(KeyReadIncompleteError, match="did not finish within 2 s") as caught:
        list(pacer.pages(key.query, {}, "RenewalSaga#1", deadline=2.0))
    # Pages at 0, 0.74 and 1.49 s; the fourth's turn (2.23 s) is past the deadline.
    assert len(key.sent) == 3
    assert all(at < 2.0 for at, _ in key.sent)
    assert caught.value.key == "RenewalSaga#1"
    assert caught.value.units_read == 3 * PAGE_READ_UNITS


def test_a_deadline_already_passed_sends_nothing() -> None:
    clock = FakeClock()
    clock.now = 5.0
    key = PagedKey(clock, [1.0])
    with pytest.raises(KeyReadIncompleteError):
        list(KeyReadPacer(clock=clock, sleep=clock.sleep).pages(key.query, {}, "k", deadline=5))
    assert key.sent == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"units_per_key": 128}, "must exceed the cost of one page"),
        ({"units_per_key": 3001}, "at most a partition's 3000"),
        ({"units_per_key": 0}, "positive"),
        ({"units_per_key": float("inf")}, "positive"),
        ({"page_units": -1}, "positive"),
        ({"units_per_key": True}, "positive"),
    ],
)
def test_a_pace_that_cannot_hold_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        KeyReadPace(**kwargs)


def test_keys_read_in_parallel_take_the_longest_worker() -> None:
    pace = KeyReadPace()
    one_key = 172 * 10  # ten seconds at 172 units a second
    assert pace.seconds_for(one_key) == pytest.approx(10)
    assert pace.seconds_for_keys([one_key] * 16, workers=16) == pytest.approx(10)
    assert pace.seconds_for_keys([one_key] * 64, workers=16) == pytest.approx(40)
    assert pace.seconds_for_keys([one_key] * 3, workers=1) == pytest.approx(30)
    with pytest.raises(InvalidInputError, match="workers"):
        pace.seconds_for_keys([one_key], workers=0)
