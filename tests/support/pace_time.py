"""The write pace's own time, for tests that run a backfill on threads: the token bucket's
clock and sleep (TokenBucket(clock=, sleep=), the bucket handed to backfill_locally).

A sleep moves the time at once by what it was asked, so no test waits for the rate it sets. Two
segments asleep at once both move it: the time runs ahead of the writes, never behind, so "the
run took at least this long at its rate" still holds on it, and a run that took no tokens has
not moved it at all. A sleep then yields the processor for a real millisecond: a paused bucket
asks again and again, and the threads that bring the record's changes (the lease's heartbeats)
and the test itself run on meanwhile.
"""

from __future__ import annotations

import threading
import time

_YIELD_SECONDS = 0.001


class PaceTime:
    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()

    @property
    def now(self) -> float:
        with self._lock:
            return self._now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)
        time.sleep(_YIELD_SECONDS)
