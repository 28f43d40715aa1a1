"""Time as the rules read it: an injected aware "now", the rows' ISO-8601 timestamps, ages.

The rules keep no clock of their own: the handlers pass the schedule's scheduledTime as `now`,
so a rule gives the same answer for the same inputs and its boundaries can be tested exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from saga_index.index import InvalidInputError


def require_aware(now: datetime) -> datetime:
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"now must be a timezone-aware datetime, got {now!r}")
    return now.astimezone(UTC)


def parse_timestamp(item: Mapping[str, Any], attribute: str) -> datetime:
    """The attribute as an aware UTC datetime; ValueError naming the attribute otherwise."""
    value = item.get(attribute)
    if value is None:
        raise ValueError(f"{attribute} is missing")
    if not isinstance(value, str):
        raise ValueError(f"{attribute} is not a string: {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{attribute} is not an ISO-8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"{attribute} has no time zone: {value!r}")
    return parsed.astimezone(UTC)


def format_age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours}h{minutes:02d}m{secs:02d}s"


def iso_utc(moment: datetime) -> str:
    """A finding's timestamp: UTC, milliseconds, "Z"."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
