"""The replay's virtual clock."""

from __future__ import annotations

import threading


class VirtualClock:
    """The replay's clock: a second counter the driver advances; the meter reads it."""

    def __init__(self, start: int = 0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return float(self._now)

    def set(self, second: int) -> None:
        with self._lock:
            self._now = second
