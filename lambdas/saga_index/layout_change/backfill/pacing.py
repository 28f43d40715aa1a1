"""The pace of the re-stamps: a token bucket at the rate the run's pacer chooses.

Re-stamping a row deletes it from the hot legacy index partition (a GSI key change is a delete
plus a put), so an uncapped backfill would cause the very throttling it exists to end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from saga_index.index import SagaIndexError
from saga_index.layout_change.backfill.pace_curve import PaceRules
from saga_index.layout_change.backfill.pacer import Pace, Pacer
from saga_index.store.dynamo import ThrottleCounter

log = logging.getLogger(__name__)

# How a run waits up to `seconds` of its monotonic clock for an event (True: it was set). Real
# seconds by default; a harness whose clock runs slower than real time (devkit's dilation) waits
# longer in real ones.
Wait = Callable[[threading.Event, float], bool]


def event_wait(event: threading.Event, seconds: float) -> bool:
    return event.wait(seconds)


def sleeper(wait: Wait) -> Callable[[float], object]:
    """A sleep of `seconds` on `wait`'s clock: time.sleep for real seconds."""
    if wait is event_wait:
        return time.sleep
    never = threading.Event()
    return lambda seconds: wait(never, seconds)


class SegmentThrottledError(SagaIndexError):
    """DynamoDB kept throttling after botocore's retries: the segment stops where it is.

    Raised, not swallowed: the Step Functions task retries it with a long backoff (its name is
    part of the state machine's Retry), and the local runner stops and exits 1. Nothing is lost:
    the rows already re-stamped stay re-stamped and the next run's Scan skips them.
    """


class TokenBucket:
    """Meters writes at the rate the run's pacer (layout_change.backfill.pacer) chooses.

    It banks at most `burst_seconds` worth of tokens (at least one): enough that a late wake-up
    or a Scan page does not cost its time in writes (with a single token every overshoot of
    sleep() is lost, measured at 9 % of the cap at 100 writes/s), and little enough that any
    1-second window stays within 5 % of the cap; a backfill has no latency goal that a bigger
    burst would serve. `on_throttle` hands a throttle's reasons to the pacer: a segment slowed
    by a key range also waits for its own, lower rate (`acquire(segment=...)`), and while the
    pacer pauses (an account or on-demand maximum) no token is handed out.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        rules: PaceRules | None = None,
        segments: int = 1,
        max_sleep: float = 0.25,
        burst_seconds: float = 0.05,
    ) -> None:
        self.pacer = Pacer(rate, clock=clock, rules=rules, segments=segments)
        # The operator's pause (the record's): no token until resumed.
        self.paused = False
        # Set once the run must stop (its lease is lost): no token is handed out after that.
        self.refused = False
        self.max_sleep = max_sleep
        self.burst_seconds = burst_seconds
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 1.0
        self._updated = clock()
        self._segment_next: dict[int, float] = {}

    @property
    def cap(self) -> float:
        return self.pacer.cap

    @property
    def rate(self) -> float:
        return self.pacer.run_rate()

    @property
    def decreases(self) -> int:
        return self.pacer.decreases

    @property
    def lowest_rate(self) -> float:
        return self.pacer.lowest_rate

    def pace(self) -> Pace:
        """The pace now, and why (the operator's pause shows as a pause)."""
        pace = self.pacer.pace()
        if self.paused:
            return Pace(0.0, pace.cap, "paused by the control record", paused=True)
        return pace

    def _advance(self, now: float, rate: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        capacity = max(1.0, rate * self.burst_seconds)
        self._tokens = min(capacity, self._tokens + elapsed * rate)

    def set_cap(self, rate: float) -> None:
        """A new cap (the control record's runtime throttle): the pace stays at most it."""
        with self._lock:
            self._advance(self._clock(), self.pacer.run_rate())
            self.pacer.set_cap(rate)

    def set_paused(self, paused: bool) -> None:
        """Paused: acquire() hands out no token (and banks none) until resumed."""
        with self._lock:
            self._advance(self._clock(), self.pacer.run_rate())
            self.paused = paused

    def refuse(self) -> None:
        """Hand out no token from now on (the lease keeper's stop): acquire() returns False."""
        with self._lock:
            self.refused = True

    def acquire(
        self,
        should_stop: Callable[[], bool] = lambda: False,
        *,
        budget: Callable[[], float] | None = None,
        segment: int | None = None,
    ) -> bool:
        """Take one token, waiting as long as needed (and as long as the bucket is paused);
        False if should_stop() turned true first, or once the wait would outlast `budget()`
        (the seconds it may still wait: a Lambda's remaining time minus its safety margin).
        At a low cap throttled to its floor one token can take longer than that margin.
        A stop is checked before every token, not only while waiting: a run told to stop gets
        no further token even when one is banked. `segment`: the segment writing, held to its
        own rate while a key range slows it."""
        while True:
            if self.refused or should_stop():
                return False
            with self._lock:
                wait = self._try_take(segment)
                if wait is None:
                    return True
            if budget is not None:
                left = budget()
                if left <= 0:
                    return False
                wait = min(wait, left)
            # Short naps: a stop request (Ctrl-C, SIGTERM) or a resume is noticed within
            # max_sleep.
            self._sleep(wait)

    def try_acquire(self, segment: int | None = None) -> bool:
        """Take a token if one is due now, never waiting (a caller that keeps its own time: a
        simulation in virtual time)."""
        if self.refused:
            return False
        with self._lock:
            return self._try_take(segment) is None

    def _try_take(self, segment: int | None) -> float | None:
        """Take a token (None) or say how long to wait for one."""
        now = self._clock()
        rate = self.pacer.run_rate()
        self._advance(now, rate)
        if self.paused or self.pacer.paused():
            self._tokens = 0.0  # a resume must not start with a burst
            return self.max_sleep
        own = self.pacer.segment_rate(segment) if segment is not None else None
        if own is not None and segment is not None:
            due = self._segment_next.get(segment, now)
            if due > now + 1e-9:
                return min(due - now, self.max_sleep)
        # The epsilon absorbs float rounding: 0.9999999999 of a token is a token.
        if self._tokens >= 1.0 - 1e-9:
            self._tokens = max(0.0, self._tokens - 1.0)
            if own is not None and segment is not None:
                # A token taken late keeps up to burst_seconds of its lateness, as the run's
                # bucket banks tokens: a late wake-up does not cost the segment its rate.
                due = max(now - self.burst_seconds, self._segment_next.get(segment, now))
                self._segment_next[segment] = due + 1.0 / own
            elif segment is not None:
                self._segment_next.pop(segment, None)
            return None
        return min((1.0 - self._tokens) / rate, self.max_sleep)

    def on_throttle(self, reasons: Iterable[str] = (), *, segment: int | None = None) -> None:
        """A throttled request of `segment` with DynamoDB's ThrottlingReasons (none: unknown)."""
        before = self.pacer.decreases, self.pacer.pauses
        listed = list(reasons)
        self.pacer.observe(listed, segment)
        with self._lock:
            self._tokens = min(self._tokens, 0.0)
        if (self.pacer.decreases, self.pacer.pauses) != before:
            pace = self.pace()
            log.warning(
                "backfill throttled (%s): pace now %s",
                ", ".join(listed) or "no reason given",
                pace.describe(),
                extra={"throttlingReasons": listed, "segment": segment, "pace": pace.to_json()},
            )


def throttle_count(counter: ThrottleCounter | None) -> int:
    return 0 if counter is None else counter.count
