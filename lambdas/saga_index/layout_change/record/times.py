"""The record's times: UTC ISO-8601 with milliseconds and a "Z", fixed width, so they compare
as strings in a ConditionExpression exactly as they compare as times (docs/control-contract.md,
"The record").
"""

from __future__ import annotations

from datetime import UTC, datetime

from saga_index.index import InvalidInputError
from saga_index.layout_change.record.errors import ControlItemInvalidError, Refusal
from saga_index.layout_change.record.grammar import is_time_text


def to_millis(at: datetime) -> datetime:
    """`at` in UTC truncated to the millisecond: what a record can hold, so values round-trip."""
    if at.tzinfo is None:
        raise InvalidInputError(f"times must be timezone-aware, got {at!r}")
    at = at.astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def format_time(at: datetime) -> str:
    at = to_millis(at)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def parse_time(value: object, attribute: str = "time") -> datetime:
    if not isinstance(value, str) or not is_time_text(value):
        kind = (
            Refusal.MISSING
            if value is None
            else Refusal.INVALID_VALUE
            if isinstance(value, str)
            else Refusal.WRONG_TYPE
        )
        raise ControlItemInvalidError(
            f"{attribute} must be UTC ISO-8601 'YYYY-MM-DDTHH:MM:SS.mmmZ' in ASCII digits from "
            f"year 0001, got {value!r}",
            kind=kind,
            attribute=attribute,
        )
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError as err:
        raise ControlItemInvalidError(
            f"{attribute} is not a time: {value!r}",
            kind=Refusal.INVALID_VALUE,
            attribute=attribute,
        ) from err


def seconds_until(moment: datetime | None, now: datetime) -> float:
    """How long from now until `moment` (0 when it has passed or there is none)."""
    if moment is None:
        return 0.0
    return max(0.0, (moment - now).total_seconds())
