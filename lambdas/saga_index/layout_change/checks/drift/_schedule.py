"""Which scheduled drift runs also scan the base table: every K-th run, decided from the
scheduled time alone (docs/observability.md, "When the scan runs")."""

from __future__ import annotations

import math
from datetime import datetime

from saga_index.index import InvalidInputError, names

DEFAULT_SCAN_EVERY = 12  # with the 5-minute schedule: one base-table scan an hour


def validate_scan_every(value: object) -> int:
    # names.MAX_SCAN_EVERY: the longest interval the unindexed-rows alarm can still watch.
    highest = names.MAX_SCAN_EVERY
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= highest:
        raise InvalidInputError(
            f"scan-every K must be an integer from 1 to {highest}, got {value!r}"
        )
    return value


def scan_due(scheduled_time: datetime, *, every: int, period_minutes: int = 5) -> bool:
    """True when the run scheduled at `scheduled_time` is one of the every-K-th runs that scan.

    Deterministic from the scheduled time alone (no state, and Scheduler retries of the same run
    decide the same): the run's slot is the number of whole periods since the Unix epoch, and
    slots divisible by K scan. Epoch slots have no midnight seam, so scans are exactly K periods
    apart forever (K = 12 at 5 minutes: the top of every hour, UTC).
    """
    validate_scan_every(every)
    if period_minutes < 1:
        raise InvalidInputError(f"period must be at least one minute, got {period_minutes}")
    if scheduled_time.tzinfo is None or scheduled_time.utcoffset() is None:
        raise InvalidInputError(f"scheduled time must carry a time zone, got {scheduled_time!r}")
    slot = math.floor(scheduled_time.timestamp()) // (period_minutes * 60)
    return slot % every == 0
