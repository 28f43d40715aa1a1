"""The pace of the re-stamps: a token bucket at the run's cap that backs off on throttles.

Re-stamping a row deletes it from the hot legacy index partition (a GSI key change is a delete
plus a put), so an uncapped backfill would cause the very throttling it exists to end.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from saga_index.index.errors import InvalidInputError, SagaIndexError
from saga_index.store.dynamo.client import ThrottleCounter

log = logging.getLogger(__name__)


class SegmentThrottledError(SagaIndexError):
    """DynamoDB kept throttling after botocore's retries: the segment stops where it is.

    Raised, not swallowed: the Step Functions task retries it with a long backoff (its name is
    part of the state machine's Retry), and the local runner stops and exits 1. Nothing is lost:
    the rows already re-stamped stay re-stamped and the next run's Scan skips them.
    """


class TokenBucket:
    """Paces writes at `rate` per second and backs off on throttles (AIMD).

    It banks at most `burst_seconds` worth of tokens (at least one): enough that a late wake-up
    or a Scan page does not cost its time in writes (with a single token every overshoot of
    sleep() is lost, measured at 9 % of the cap at 100 writes/s), and little enough that any
    1-second window stays within 5 % of the cap; a backfill has no latency goal that a bigger
    burst would serve. On a throttle the rate halves (at most once per
    `decrease_interval`, so one hot moment that throttles several writes halves it once), holds
    for `hold_seconds`, then grows back linearly to the cap over `recovery_seconds`. It never
    falls below `floor_fraction` of the cap, so a run always makes progress.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        floor_fraction: float = 1 / 64,
        hold_seconds: float = 5.0,
        recovery_seconds: float = 10.0,
        decrease_interval: float = 1.0,
        max_sleep: float = 0.25,
        burst_seconds: float = 0.05,
    ) -> None:
        if not rate > 0 or math.isinf(rate):
            raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")
        self.cap = float(rate)
        self.rate = float(rate)
        self.floor_fraction = floor_fraction
        self.recovery_seconds = recovery_seconds
        self.floor = self.cap * floor_fraction
        self.hold_seconds = hold_seconds
        self.increase_per_second = self.cap / recovery_seconds
        self.paused = False
        # Set once the run must stop (its lease is lost): no token is handed out after that.
        self.refused = False
        self.decrease_interval = decrease_interval
        self.max_sleep = max_sleep
        self.burst_seconds = burst_seconds
        self.decreases = 0
        self.lowest_rate = self.rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 1.0
        self._updated = clock()
        self._hold_until = -math.inf
        self._last_decrease = -math.inf

    def _advance(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        if self.rate < self.cap and now >= self._hold_until:
            grow_from = max(self._hold_until, now - elapsed)
            self.rate = min(self.cap, self.rate + self.increase_per_second * (now - grow_from))
        capacity = max(1.0, self.rate * self.burst_seconds)
        self._tokens = min(capacity, self._tokens + elapsed * self.rate)

    def set_cap(self, rate: float) -> None:
        """A new cap (the control record's runtime throttle). A bucket backing off from
        throttles keeps its lower rate (at most the new cap) and recovers toward the new cap."""
        if not rate > 0 or math.isinf(rate):
            raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")
        with self._lock:
            self._advance(self._clock())
            backing_off = self.rate < self.cap
            self.cap = float(rate)
            self.floor = self.cap * self.floor_fraction
            self.increase_per_second = self.cap / self.recovery_seconds
            self.rate = min(self.rate, self.cap) if backing_off else self.cap
            self.lowest_rate = min(self.lowest_rate, self.rate)

    def set_paused(self, paused: bool) -> None:
        """Paused: acquire() hands out no token (and banks none) until resumed."""
        with self._lock:
            self._advance(self._clock())
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
    ) -> bool:
        """Take one token, waiting as long as needed (and as long as the bucket is paused);
        False if should_stop() turned true first, or once the wait would outlast `budget()`
        (the seconds it may still wait: a Lambda's remaining time minus its safety margin).
        At a low cap throttled to its floor one token can take longer than that margin.
        A stop is checked before every token, not only while waiting: a run told to stop gets
        no further token even when one is banked."""
        while True:
            if self.refused or should_stop():
                return False
            with self._lock:
                self._advance(self._clock())
                if self.paused:
                    self._tokens = 0.0  # a resume must not start with a burst
                    wait = self.max_sleep
                # The epsilon absorbs float rounding: 0.9999999999 of a token is a token.
                elif self._tokens >= 1.0 - 1e-9:
                    self._tokens = max(0.0, self._tokens - 1.0)
                    return True
                else:
                    wait = min((1.0 - self._tokens) / self.rate, self.max_sleep)
            if budget is not None:
                left = budget()
                if left <= 0:
                    return False
                wait = min(wait, left)
            # Short naps: a stop request (Ctrl-C, SIGTERM) or a resume is noticed within
            # max_sleep.
            self._sleep(wait)

    def on_throttle(self) -> None:
        with self._lock:
            now = self._clock()
            self._advance(now)
            if now - self._last_decrease < self.decrease_interval:
                return
            self._last_decrease = now
            self.rate = max(self.floor, self.rate / 2)
            self._hold_until = now + self.hold_seconds
            self._tokens = min(self._tokens, 0.0)
            self.decreases += 1
            self.lowest_rate = min(self.lowest_rate, self.rate)
        log.warning(
            "backfill throttled: write rate halved to %.3f/s (cap %.3f/s)",
            self.rate,
            self.cap,
            extra={"writesPerSecond": round(self.rate, 3), "cap": self.cap},
        )


def throttle_count(counter: ThrottleCounter | None) -> int:
    return 0 if counter is None else counter.count
