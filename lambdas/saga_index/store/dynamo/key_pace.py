"""Pacing the reads of one index partition key: at most a stated number of read units in any
1-second window on that key, whatever the key holds.

DynamoDB serves at most 3,000 RCU per second from one partition, and a GSI key's rows sit on one
partition until DynamoDB splits it; a reader that pages through a large key unpaced takes the
key's whole ceiling from the traffic the key exists for (the sweeps and by-person reads). A
`KeyReadPacer` holds one bucket per key:

- before each request it takes the most the page can cost (`page_units`: a Query page stops at
  1 MB, 256 units of 4 KB, halved for the eventually consistent reads every GSI read is: 128);
- after the page it gives back what the page did not cost (ConsumedCapacity, which the request
  asks for; a server that does not report it is charged the whole reservation);
- the bucket refills at `units_per_key - page_units` per second and holds at most one page.

Whatever is sent in any window of one second then costs at most one page banked plus a second's
refill: `units_per_key` (as long as no page costs more than `page_units`; one that does puts the
bucket in debt, so the next waits for it). A read that would still be waiting at its deadline
stops before its next request with KeyReadIncompleteError: never a partial count returned as a
whole one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.index import InvalidInputError, SagaIndexError
from saga_index.store.dynamo.pages import paced_pages

PARTITION_READ_UNITS = 3000.0  # what one partition serves per second
# The most one Query page can cost on a GSI: 1 MB in 4 KB units, halved (GSI reads are
# eventually consistent).
PAGE_READ_UNITS = 1024 * 1024 / 4096 / 2
# 10 % of a partition's ceiling: what a background reader may take from one key in any second.
DEFAULT_KEY_READ_UNITS = 0.10 * PARTITION_READ_UNITS


class KeyReadIncompleteError(SagaIndexError):
    """A paced read of an index key could not finish before its deadline: no partial count."""

    def __init__(self, key: str, units_read: float, rate: float, budget_seconds: float) -> None:
        self.key = key
        self.units_read = units_read
        super().__init__(
            f"the paced read of {key!r} did not finish within {budget_seconds:.0f} s: "
            f"{units_read:.0f} read units read at {rate:.0f} RCU/s and the key has more; "
            "the key holds more than one run may read at its pace (no partial count returned)"
        )


@dataclass(frozen=True)
class KeyReadPace:
    """How hard a reader may read one key: `units_per_key` in any 1-second window, with pages
    that cost at most `page_units`."""

    units_per_key: float = DEFAULT_KEY_READ_UNITS
    page_units: float = PAGE_READ_UNITS

    def __post_init__(self) -> None:
        for name in ("units_per_key", "page_units"):
            value = getattr(self, name)
            if isinstance(value, bool) or not value > 0 or math.isinf(value):
                raise InvalidInputError(f"{name} must be a positive number, got {value!r}")
        if self.units_per_key > PARTITION_READ_UNITS:
            raise InvalidInputError(
                f"units_per_key ({self.units_per_key:g}) must be at most a partition's "
                f"{PARTITION_READ_UNITS:g} read units per second"
            )
        if self.units_per_key <= self.page_units:
            raise InvalidInputError(
                f"units_per_key ({self.units_per_key:g}) must exceed the cost of one page "
                f"({self.page_units:g}): one page alone would break the per-key ceiling"
            )

    @property
    def rate(self) -> float:
        """The long-run read units per second on one key: the window's budget less the page
        that may be banked."""
        return self.units_per_key - self.page_units

    def seconds_for(self, units: float) -> float:
        """At most how long reading `units` read units of one key takes at this pace: each page
        waits for what the pages before it cost (the last page's own cost, and the first page,
        which is banked, make the true figure up to two pages shorter)."""
        return units / self.rate

    def seconds_for_keys(self, units_per_key: list[float], workers: int) -> float:
        """How long reading these keys takes with `workers` of them read at once, each paced
        (keys are handed to workers in order, as a pool does: an upper bound)."""
        if workers < 1:
            raise InvalidInputError(f"workers must be >= 1, got {workers}")
        finish = [0.0] * workers
        for units in units_per_key:
            slot = finish.index(min(finish))
            finish[slot] += self.seconds_for(units)
        return max(finish)


class _Bucket:
    def __init__(self, pace: KeyReadPace, now: float) -> None:
        self.tokens = pace.page_units
        self.updated = now
        self.units = 0.0
        self.lock = threading.Lock()


class KeyReadPacer:
    """One bucket per key (thread-safe: keys are read in parallel, each by one worker).

    `units_spent` sums what every key's pages cost; `requests` counts the pages sent.
    """

    def __init__(
        self,
        pace: KeyReadPace | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.pace = pace or KeyReadPace()
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self.units_spent = 0.0
        self.requests = 0

    def pages(
        self,
        send: Callable[..., Mapping[str, Any]],
        request: Mapping[str, Any],
        key: str,
        *,
        deadline: float | None = None,
    ) -> Iterator[Mapping[str, Any]]:
        """Every page of `send(**request)` (a client's query on `key`), each sent only when the
        key's bucket holds a page's worth; KeyReadIncompleteError when a page's turn would come
        at or after `deadline` (a value of the injected clock)."""
        bucket = self._bucket(key)
        started = self._clock()
        paced = {**request, "ReturnConsumedCapacity": "TOTAL"}

        def take() -> None:
            self._take(bucket, key, deadline, started)

        for page in paced_pages(send, paced, before_each=take):
            self._settle(bucket, _page_units(page, self.pace.page_units))
            yield page

    def units_on(self, key: str) -> float:
        """What the pages read from `key` cost so far."""
        return self._bucket(key).units

    def _bucket(self, key: str) -> _Bucket:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(self.pace, self._clock())
            return bucket

    def _take(self, bucket: _Bucket, key: str, deadline: float | None, started: float) -> None:
        pace = self.pace
        while True:
            with bucket.lock:
                now = self._clock()
                bucket.tokens = min(
                    pace.page_units, bucket.tokens + (now - bucket.updated) * pace.rate
                )
                bucket.updated = now
                # The epsilon absorbs float rounding: 127.9999999 of 128 units is a page.
                missing = pace.page_units - bucket.tokens
                wait = missing / pace.rate if missing > 1e-9 else 0.0
                if deadline is not None and now + wait >= deadline:
                    raise KeyReadIncompleteError(key, bucket.units, pace.rate, deadline - started)
                if not wait:
                    bucket.tokens -= pace.page_units
                    return
            self._sleep(wait)

    def _settle(self, bucket: _Bucket, units: float) -> None:
        # The bucket is charged what the page cost: a page cheaper than its reservation gives
        # the rest back (never beyond one page banked); a dearer one (a server's rounding)
        # leaves it in debt, and the next page waits for it.
        with bucket.lock:
            bucket.tokens = min(self.pace.page_units, bucket.tokens + self.pace.page_units - units)
            bucket.units += units
        with self._lock:
            self.units_spent += units
            self.requests += 1


def _page_units(page: Mapping[str, Any], reserved: float) -> float:
    consumed = page.get("ConsumedCapacity")
    if isinstance(consumed, Mapping) and consumed.get("CapacityUnits") is not None:
        return float(consumed["CapacityUnits"])
    return reserved
