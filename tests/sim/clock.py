"""The virtual clock: one global time that only the scheduler advances, and per-process clocks
skewed from it (wall) or offset (monotonic). No real sleep anywhere."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# The simulated world starts here (any fixed instant: the trace prints offsets from it).
EPOCH = datetime(2026, 3, 1, 9, 0, 0, tzinfo=UTC)


class VirtualTime:
    """Seconds since EPOCH, advanced by the scheduler only."""

    def __init__(self) -> None:
        self.now = 0.0

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time never runs backwards, got {seconds}")
        self.now += seconds


@dataclass(frozen=True)
class ProcessClock:
    """A process's clocks: its wall clock is `skew` seconds off the true time (within the bound
    the contract states), its monotonic clock counts from an arbitrary origin."""

    time: VirtualTime
    skew: float
    origin: float

    def wall(self) -> datetime:
        return EPOCH + timedelta(seconds=self.time.now + self.skew)

    def monotonic(self) -> float:
        return self.origin + self.time.now


def true_wall(time: VirtualTime) -> datetime:
    return EPOCH + timedelta(seconds=time.now)
