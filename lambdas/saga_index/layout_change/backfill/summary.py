"""What a run did: the read-back's verification and the summary of all its segments (the
CLI's --json object and the state machine's output)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from saga_index.index import METRIC_SOURCE_KEY_ROWS, METRIC_UNEXPECTED_SOURCE_KEY_ROWS
from saga_index.layout_change.backfill.caps import merge_caps
from saga_index.layout_change.backfill.inputs import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.wire import (
    LayoutSpec,
    OpenCounts,
    Payload,
    SegmentCounts,
    TableKey,
)
from saga_index.layout_change.record import BackfillDirection


class VerificationResult(Payload):
    """What is still on the source key after a run, read back through the index."""

    direction: BackfillDirection
    dry_run: bool
    partitions: list[str]
    remaining: int  # rows still under a source-key partition of the index
    remaining_anomalies: int  # of which saga rows with an unusable personId (left on purpose)
    remaining_other_entities: int  # of which rows that are not sagas (never touched)
    unexpected: int  # saga rows with a usable personId still to move
    unexpected_keys: list[TableKey]
    ok: bool
    message: str

    def metric_values(self) -> dict[str, int]:
        """What the verification step publishes, by metric name."""
        return {
            METRIC_SOURCE_KEY_ROWS: self.remaining,
            METRIC_UNEXPECTED_SOURCE_KEY_ROWS: self.unexpected,
        }


class BackfillSummary(Payload):
    """One run, all segments: the CLI's --json object and the state machine's output."""

    direction: BackfillDirection
    dry_run: bool
    total_segments: int
    max_writes_per_second: float
    scanned: int
    restamped: int
    skipped: int
    anomalies: int
    would_restamp: int
    throttles: int
    anomaly_keys: list[TableKey]
    complete: bool
    verification: VerificationResult | None = None
    # The layouts the record named (absent only in summaries built without a run).
    source: LayoutSpec | None = None
    target: LayoutSpec | None = None
    # The run's total write cap as it ran: the one it started at and every change after
    # (caps.merge_caps of its segments' in the state machine; the run's one keeper locally).
    # Empty, and left out of the JSON, when the run applied none (a dry run follows no record).
    applied_max_writes_per_second: list[float] = Field(default_factory=list)
    # An open-index run's removals and examples (wire.OpenCounts); absent for a layout run.
    open: OpenCounts | None = None

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if not self.applied_max_writes_per_second:
            data.pop("appliedMaxWritesPerSecond")
        if self.open is None:
            data.pop("open")
        return data

    @property
    def anomalies_remain(self) -> bool:
        remaining = self.verification.remaining_anomalies if self.verification else 0
        return self.anomalies > 0 or remaining > 0

    @property
    def verified(self) -> bool:
        return self.verification is not None and self.verification.ok


def summarise(
    request: BackfillRequest,
    results: Sequence[SegmentCounts],
    *,
    complete: bool,
    verification: VerificationResult | None = None,
    throttles: int | None = None,
    move: Move | None = None,
    applied_caps: Sequence[float] | None = None,
) -> BackfillSummary:
    """throttles: the run's total when the segments shared one client (their own counts
    overlap then); None sums the segments' counts (one client per segment, as in Lambda).
    applied_caps: the caps the run ran at when one keeper followed the record for all its
    segments (a local run); None merges the segments' own (caps.merge_caps)."""
    total = SegmentCounts()
    for result in results:
        total.add(result)
    if throttles is not None:
        total.throttles = throttles
    return BackfillSummary(
        direction=request.direction,
        dry_run=request.dry_run,
        total_segments=request.total_segments,
        max_writes_per_second=request.max_writes_per_second,
        scanned=total.scanned,
        restamped=total.restamped,
        skipped=total.skipped,
        anomalies=total.anomalies,
        would_restamp=total.would_restamp,
        throttles=total.throttles,
        anomaly_keys=total.anomaly_keys,
        open=total.open,
        complete=complete,
        verification=verification,
        source=None if move is None else LayoutSpec.of(move.source),
        target=None if move is None else LayoutSpec.of(move.target),
        applied_max_writes_per_second=(
            merge_caps(r.applied_caps for r in results)
            if applied_caps is None
            else list(applied_caps)
        ),
    )
