"""How hard the base-table scan may read (scan.py): its options, the limiter that keeps the
average read rate within them across segments, and what a page cost, from DynamoDB's own
ConsumedCapacity or, on servers that do not report it, an estimate from the page's bytes.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.index import InvalidInputError
from saga_index.store.dynamo.sizing import item_size


class ReadRateLimiter:
    """Paces reads to an average of `units_per_second` read capacity units (thread-safe).

    A page's cost is only known after it returns, so each page pushes the next start time back by
    cost / rate, and every segment waits for that time before its next request: the average
    never exceeds the budget, and a burst is at most one page per segment.
    """

    def __init__(
        self,
        units_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not units_per_second > 0 or math.isinf(units_per_second):
            raise InvalidInputError(
                f"scan rate must be a positive number of read units per second, "
                f"got {units_per_second!r}"
            )
        self.units_per_second = float(units_per_second)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._ready_at = clock()
        self.units_spent = 0.0
        self.seconds_waited = 0.0

    def wait(self) -> None:
        with self._lock:
            delay = self._ready_at - self._clock()
            if delay > 0:
                self.seconds_waited += delay
        if delay > 0:
            self._sleep(delay)

    def spend(self, units: float) -> None:
        with self._lock:
            now = self._clock()
            self._ready_at = max(self._ready_at, now) + units / self.units_per_second
            self.units_spent += units


@dataclass(frozen=True)
class ScanOptions:
    """How hard the base-table scan may read. Defaults suit a 5-minute Lambda run."""

    segments: int = 4
    read_units_per_second: float = 400.0
    page_size: int = 1000
    consistent_read: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.segments, bool) or not 1 <= self.segments <= 64:
            raise InvalidInputError(f"scan segments must be from 1 to 64, got {self.segments!r}")
        if not 1 <= self.page_size <= 10_000:
            raise InvalidInputError(
                f"scan page size must be from 1 to 10000, got {self.page_size!r}"
            )
        if not self.read_units_per_second > 0 or math.isinf(self.read_units_per_second):
            raise InvalidInputError(
                "scan rate must be a positive number of read units per second, "
                f"got {self.read_units_per_second!r}"
            )


def _read_units(response: Mapping[str, Any], *, consistent: bool) -> float:
    """What a page cost. DynamoDB reports it when asked (ReturnConsumedCapacity); servers that do
    not get an estimate: returned bytes plus 1 KB per filtered-out row, per started 4 KB."""
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, Mapping) and consumed.get("CapacityUnits") is not None:
        return float(consumed["CapacityUnits"])
    items = response.get("Items", [])
    size = sum(item_size(raw) for raw in items)
    filtered = max(0, int(response.get("ScannedCount", len(items))) - len(items))
    size += filtered * 1024
    units = max(1, math.ceil(size / 4096))
    return float(units if consistent else units / 2)
