"""T and effectiveAt: how stale a process's view of the record may be, and when a change has
reached every process (docs/control-contract.md, "T and effectiveAt").

  T (cache_seconds)      a process re-reads the record at least every T seconds
  stale grace            when the record cannot be read, the last good state is served for at
                         most this much longer (so a state is never used more than T + grace
                         after it was read)
  in-flight margin       a request that read the state just before it changed may still write
                         with it for a little while (a Lambda invocation, a slow retry), and
                         clocks differ by a few seconds
  effectiveAt            = changedAt + T + stale grace + in-flight margin
  retry after            a failed read is not tried again sooner than this: the record is one
                         item on one partition, and a process whose every request re-read it
                         while it fails (throttled, say) would add load where it hurts most
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from saga_index.index import InvalidInputError

# T: the one staleness bound every reader and writer of the record promises (the contract's T).
CACHE_SECONDS: Final = 30.0
STALE_GRACE_SECONDS: Final = 30.0
IN_FLIGHT_MARGIN_SECONDS: Final = 15.0
RETRY_AFTER_SECONDS: Final = 1.0

WallClock = Callable[[], datetime]
MonotonicClock = Callable[[], float]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class ControlTiming:
    """The bounds above. Tests and the demo inject small values; production keeps the defaults."""

    cache_seconds: float = CACHE_SECONDS
    stale_grace_seconds: float = STALE_GRACE_SECONDS
    in_flight_margin_seconds: float = IN_FLIGHT_MARGIN_SECONDS
    retry_after_seconds: float = RETRY_AFTER_SECONDS

    def __post_init__(self) -> None:
        for name in (
            "cache_seconds",
            "stale_grace_seconds",
            "in_flight_margin_seconds",
            "retry_after_seconds",
        ):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {getattr(self, name)}")

    @property
    def effective_delay(self) -> timedelta:
        """changedAt + this = effectiveAt: every process has then re-read the record or stopped
        serving what it had."""
        return timedelta(
            seconds=self.cache_seconds + self.stale_grace_seconds + self.in_flight_margin_seconds
        )

    @property
    def max_served_age(self) -> float:
        """The oldest a served state can be, in seconds since it was read."""
        return self.cache_seconds + self.stale_grace_seconds


DEFAULT_TIMING: Final = ControlTiming()
