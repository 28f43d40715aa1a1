"""The demo's pace line says what the backfill's pacer chose: the pace at the end and why, and
whether a throttle slowed it (the re-stamps it kept off a full key instead of resending them)."""

from __future__ import annotations

from typing import Any

from devkit.demo.steps import pace_line
from saga_index.layout_change.backfill import BackfillSummary, TokenBucket
from saga_index.layout_change.record import BackfillDirection


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def _summary(restamped: int, throttles: int) -> BackfillSummary:
    fields: dict[str, Any] = {
        "direction": BackfillDirection.FORWARD,
        "dry_run": False,
        "total_segments": 4,
        "max_writes_per_second": 100.0,
        "scanned": restamped,
        "restamped": restamped,
        "skipped": 0,
        "anomalies": 0,
        "would_restamp": 0,
        "throttles": throttles,
        "anomaly_keys": [],
        "complete": True,
    }
    return BackfillSummary(**fields)


def test_a_run_no_throttle_slowed_says_its_pace_stayed_at_the_cap() -> None:
    bucket = TokenBucket(100.0, clock=_Clock(), segments=4)
    line = pace_line(_summary(200, 0), 2.0, bucket)
    assert line.startswith("pace 100.0 re-stamps/s under a cap of 100/s; 0 throttled request(s)")
    assert "no throttle slowed the pacer: 100/s of 100/s (cap), nothing to avoid" in line


def test_a_run_a_throttle_slowed_says_how_often_how_low_and_why() -> None:
    clock = _Clock()
    bucket = TokenBucket(100.0, clock=clock, segments=4)
    clock.now = 5.0
    bucket.on_throttle(["TableWriteProvisionedThroughputExceeded"])
    line = pace_line(_summary(200, 1), 4.0, bucket)
    assert "1 throttled request(s) met and retried" in line
    assert "the pacer slowed 1 time(s) on DynamoDB's throttles (lowest 90.0/s)" in line
    assert line.endswith("now 90/s of 100/s (TableWriteProvisionedThroughputExceeded)")
