"""The watch window: did the renewal-saga GSI throttle at all? (ADR-0085 "Verification")

Reads DynamoDB's own CloudWatch metrics for the index (namespace AWS/DynamoDB, dimensions
TableName + GlobalSecondaryIndexName) over a window, in hourly sums.

DynamoDB publishes a throttle metric only when something throttles, so "no datapoints" alone
cannot tell a quiet index from a wrong table name or region. The watch therefore also reads the
index's consumed capacity: if the index shows no activity at all in the window, the verdict is
`no-data` (the watch cannot vouch for anything), not `none`.

ThrottledRequests has no index dimension (only TableName + Operation), so it cannot be
attributed to this GSI; it is reported as table-level context and does not decide the verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from saga_index.index import InvalidInputError, SagaIndexError, names

log = logging.getLogger(__name__)

# The index's consumption: no activity in the window is `no-data`, not `none`. The throttle
# metrics read beside it are in saga_index.index.names (the alarms and the dashboard use them too).
INDEX_ACTIVITY_METRICS: tuple[str, ...] = (
    "ConsumedReadCapacityUnits",
    "ConsumedWriteCapacityUnits",
)

DEFAULT_DAYS = 7
# One-hour datapoints are kept 455 days; shorter periods expire sooner.
MAX_DAYS = 455
PERIOD_SECONDS = 3600

VERDICT_NONE, VERDICT_THROTTLED, VERDICT_NO_DATA = "none", "throttled", "no-data"


class MetricReadError(SagaIndexError):
    """CloudWatch did not return complete data for a metric: no verdict from partial data."""


@dataclass(frozen=True)
class ThrottleHour:
    timestamp: datetime
    metric: str
    events: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "metric": self.metric,
            "events": _number(self.events),
        }


@dataclass(frozen=True)
class WatchReport:
    table_name: str
    index_name: str
    start: datetime
    end: datetime
    index_throttles: Mapping[str, float]
    index_activity: Mapping[str, float]
    table_throttled_requests: Mapping[str, float]
    throttle_hours: tuple[ThrottleHour, ...]

    @property
    def throttle_events(self) -> float:
        return sum(self.index_throttles.values())

    @property
    def has_data(self) -> bool:
        return self.throttle_events > 0 or any(v > 0 for v in self.index_activity.values())

    @property
    def verdict(self) -> str:
        if self.throttle_events > 0:
            return VERDICT_THROTTLED
        return VERDICT_NONE if self.has_data else VERDICT_NO_DATA

    @property
    def ok(self) -> bool:
        return self.verdict == VERDICT_NONE

    def to_dict(self) -> dict[str, Any]:
        hours = sorted(self.throttle_hours, key=lambda h: (h.timestamp, h.metric))
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "throttled": self.verdict == VERDICT_THROTTLED,
            "table": self.table_name,
            "index": self.index_name,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "days": round((self.end - self.start).total_seconds() / 86400, 3),
            "throttleEvents": _number(self.throttle_events),
            "indexThrottles": {k: _number(v) for k, v in self.index_throttles.items()},
            "indexActivity": {k: _number(v) for k, v in self.index_activity.items()},
            "tableThrottledRequests": {
                k: _number(v) for k, v in self.table_throttled_requests.items()
            },
            "firstThrottle": _iso(hours[0].timestamp) if hours else None,
            "lastThrottle": _iso(hours[-1].timestamp) if hours else None,
            "throttleHours": [h.to_dict() for h in hours],
        }


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def validate_days(days: object) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise InvalidInputError(f"days must be an integer from 1 to {MAX_DAYS}, got {days!r}")
    return days


def read_throttle_window(
    cloudwatch: Any,
    table_name: str,
    index_name: str,
    *,
    days: int = DEFAULT_DAYS,
    end: datetime | None = None,
) -> WatchReport:
    """Hourly sums of the index's throttle and activity metrics over the last `days` days."""
    validate_days(days)
    if not table_name or not index_name:
        raise InvalidInputError("table and index names are required")
    end = (end or datetime.now(UTC)).astimezone(UTC)
    start = end - timedelta(days=days)
    index_dims = [
        {"Name": names.DYNAMODB_DIMENSION_TABLE, "Value": table_name},
        {"Name": names.DYNAMODB_DIMENSION_INDEX, "Value": index_name},
    ]
    queries: dict[str, tuple[str, str, list[dict[str, str]]]] = {}
    for name in names.INDEX_THROTTLE_METRICS:
        queries[f"t{len(queries)}"] = ("throttle", name, index_dims)
    for name in INDEX_ACTIVITY_METRICS:
        queries[f"a{len(queries)}"] = ("activity", name, index_dims)
    for operation in names.CONTEXT_OPERATIONS:
        dims = [
            {"Name": names.DYNAMODB_DIMENSION_TABLE, "Value": table_name},
            {"Name": names.DYNAMODB_DIMENSION_OPERATION, "Value": operation},
        ]
        queries[f"c{len(queries)}"] = ("context", operation, dims)
    series = _get_metric_data(cloudwatch, queries, start, end)

    throttles: dict[str, float] = {}
    activity: dict[str, float] = {}
    context: dict[str, float] = {}
    hours: list[ThrottleHour] = []
    for query_id, (kind, name, _) in queries.items():
        timestamps, values = series.get(query_id, ([], []))
        total = float(sum(values))
        if kind == "throttle":
            throttles[name] = total
            hours.extend(
                ThrottleHour(ts, name, value)
                for ts, value in zip(timestamps, values, strict=True)
                if value > 0
            )
        elif kind == "activity":
            activity[name] = total
        else:
            context[name] = total
    return WatchReport(
        table_name=table_name,
        index_name=index_name,
        start=start,
        end=end,
        index_throttles=throttles,
        index_activity=activity,
        table_throttled_requests=context,
        throttle_hours=tuple(hours),
    )


def _get_metric_data(
    cloudwatch: Any,
    queries: Mapping[str, tuple[str, str, Sequence[Mapping[str, str]]]],
    start: datetime,
    end: datetime,
) -> dict[str, tuple[list[datetime], list[float]]]:
    """Every page of GetMetricData; a query whose data stays incomplete is an error."""
    request: dict[str, Any] = {
        "MetricDataQueries": [
            {
                "Id": query_id,
                "MetricStat": {
                    "Metric": {
                        "Namespace": names.DYNAMODB_NAMESPACE,
                        "MetricName": names.TABLE_THROTTLED_REQUESTS if kind == "context" else name,
                        "Dimensions": list(dims),
                    },
                    "Period": PERIOD_SECONDS,
                    "Stat": "Sum",
                },
                "ReturnData": True,
            }
            for query_id, (kind, name, dims) in queries.items()
        ],
        "StartTime": start,
        "EndTime": end,
        "ScanBy": "TimestampAscending",
    }
    out: dict[str, tuple[list[datetime], list[float]]] = {q: ([], []) for q in queries}
    status: dict[str, str] = {}
    while True:
        response = cloudwatch.get_metric_data(**request)
        for result in response.get("MetricDataResults", []):
            timestamps, values = out.setdefault(result["Id"], ([], []))
            timestamps.extend(result.get("Timestamps", []))
            values.extend(float(v) for v in result.get("Values", []))
            status[result["Id"]] = str(result.get("StatusCode", "Complete"))
        token = response.get("NextToken")
        if not token:
            break
        request["NextToken"] = token
    bad = {q: s for q, s in status.items() if s != "Complete"}
    if bad:
        metrics = ", ".join(f"{queries[q][1]} ({s})" for q, s in sorted(bad.items()))
        raise MetricReadError(f"CloudWatch returned incomplete data for: {metrics}")
    return out
