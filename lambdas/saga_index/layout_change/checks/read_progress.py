"""How a progress display hears of the reads of a check (drift's index reads, parity's
repository reads). Listening changes nothing that is read or reported."""

from __future__ import annotations

import threading
from collections.abc import Callable

# Hears (reads finished, reads in all) each time one read of a step finishes, one call at a
# time; for a progress display. It must not raise.
ReadsDone = Callable[[int, int], None]


class ReadCounter:
    """Counts the reads of one step and tells `listener` (if any), one call at a time."""

    def __init__(self, listener: ReadsDone | None, *, total: int) -> None:
        self._listener = listener
        self._total = total
        self._done = 0
        self._lock = threading.Lock()

    def finished(self) -> None:
        if self._listener is None:
            return
        with self._lock:
            self._done += 1
            self._listener(self._done, self._total)
