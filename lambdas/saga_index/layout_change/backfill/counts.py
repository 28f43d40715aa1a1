"""What a segment did: its counts, and the worker's result (counts, cursor, done)."""

from __future__ import annotations

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from saga_index.index.names import (
    METRIC_ANOMALIES,
    METRIC_RESTAMPED,
    METRIC_SCANNED,
    METRIC_SKIPPED,
    METRIC_THROTTLES,
    METRIC_WOULD_RESTAMP,
)
from saga_index.layout_change.backfill.budget import MAX_ANOMALY_KEYS
from saga_index.layout_change.backfill.payload import Cursor, Payload, TableKey


class SegmentCounts(Payload):
    """What a segment did (cumulative when `totals` were handed in)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=False
    )

    scanned: int = Field(default=0, ge=0)
    restamped: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    anomalies: int = Field(default=0, ge=0)
    would_restamp: int = Field(default=0, ge=0)
    throttles: int = Field(default=0, ge=0)
    anomaly_keys: list[TableKey] = Field(default_factory=list)
    # The run's total write cap, each time this segment's lease keeper changed it, in order
    # (caps.extend_caps: first and latest within the budget). Empty for a dry run (no lease,
    # no control record followed) and in a local run, whose one keeper reports the run's.
    applied_caps: list[float] = Field(default_factory=list)

    @property
    def handled(self) -> int:
        """Source-key rows dealt with, one way or another (drives the progress bar)."""
        return self.restamped + self.skipped + self.anomalies + self.would_restamp

    def metric_values(self) -> dict[str, int]:
        """These counts by worker metric name, in names.BACKFILL_WORKER_METRICS' order."""
        return {
            METRIC_SCANNED: self.scanned,
            METRIC_RESTAMPED: self.restamped,
            METRIC_SKIPPED: self.skipped,
            METRIC_ANOMALIES: self.anomalies,
            METRIC_WOULD_RESTAMP: self.would_restamp,
            METRIC_THROTTLES: self.throttles,
        }

    def add(self, other: SegmentCounts, *, key_limit: int = MAX_ANOMALY_KEYS) -> None:
        """Add `other`'s counts and anomaly keys (not its caps: how caps add up depends on
        whether the two ran one after the other or side by side; caps.py has both)."""
        self.scanned += other.scanned
        self.restamped += other.restamped
        self.skipped += other.skipped
        self.anomalies += other.anomalies
        self.would_restamp += other.would_restamp
        self.throttles += other.throttles
        room = max(0, key_limit - len(self.anomaly_keys))
        self.anomaly_keys.extend(other.anomaly_keys[:room])


class SegmentResult(SegmentCounts):
    """The worker's output: counts, the cursor to resume from, and whether the segment's Scan
    reached its end (`done`; a paused worker can return with no cursor yet and not be done)."""

    segment: int
    cursor: Cursor | None = None
    done: bool = False
    # Local runner only: the stop event ended the run; the cursor is where it stopped.
    interrupted: bool = Field(default=False, exclude=True)
    # This invocation's own counts, without the totals handed in (what its metrics publish).
    invocation: SegmentCounts | None = Field(default=None, exclude=True)
