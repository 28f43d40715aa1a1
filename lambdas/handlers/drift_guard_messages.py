"""What the drift guard receives (its schedule's payload), returns and publishes (EMF metrics)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from handlers.runtime import ScheduledPayload, add_index_dimensions, metrics, publish_apart
from handlers.settings import HandlerSettings
from saga_index.index import names
from saga_index.layout_change.checks.drift import DriftCursor, DriftReport


class DriftGuardEvent(ScheduledPayload):
    """The guard's schedule always names its job and time: the time decides whether to scan."""

    job: str
    scheduled_time: AwareDatetime = Field(alias="scheduledTime")

    @field_validator("job")
    @classmethod
    def _this_job(cls, job: str) -> str:
        if job != names.JOB_DRIFT_GUARD:
            raise ValueError(f"this function runs {names.JOB_DRIFT_GUARD!r}, not {job!r}")
        return job


class DriftGuardResult(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    healthy: bool
    findings: list[str]
    scanned: bool
    phase: str
    control_record_missing: bool = Field(alias="controlRecordMissing")
    legacy_rows: int = Field(alias="legacyRows")
    sharded_rows: int = Field(alias="shardedRows")
    unexpected_legacy_rows: int = Field(alias="unexpectedLegacyRows")
    unexpected_sharded_rows: int = Field(alias="unexpectedShardedRows")
    misrouted_rows: int = Field(alias="misroutedRows")
    anomalous_rows: int = Field(alias="anomalousRows")
    unindexed_rows: int | None = Field(alias="unindexedRows")
    stray_rows: int | None = Field(alias="strayRows")
    open_index_missing_rows: int | None = Field(alias="openIndexMissingRows")
    open_index_stray_rows: int | None = Field(alias="openIndexStrayRows")
    open_index_unstamped_rows: int | None = Field(alias="openIndexUnstampedRows")
    rows_per_shard: dict[str, int] = Field(alias="rowsPerShard")
    shard_skew: float = Field(alias="shardSkew")

    @classmethod
    def of(cls, report: DriftReport, summary: dict[str, Any]) -> DriftGuardResult:
        """`summary` is report.to_dict(), already made for the log line."""
        return cls(
            healthy=report.healthy,
            findings=report.findings(),
            scanned=report.scanned,
            phase=report.phase.value,
            control_record_missing=report.control_record_missing,
            legacy_rows=report.legacy_rows,
            sharded_rows=report.sharded_rows,
            unexpected_legacy_rows=report.unexpected_legacy_rows,
            unexpected_sharded_rows=report.unexpected_sharded_rows,
            misrouted_rows=report.misrouted_rows,
            anomalous_rows=report.anomalous_rows,
            unindexed_rows=report.unindexed_rows,
            stray_rows=report.stray_rows,
            open_index_missing_rows=report.open_index_missing_rows,
            open_index_stray_rows=report.open_index_stray_rows,
            open_index_unstamped_rows=report.open_index_unstamped_rows,
            rows_per_shard=summary["rowsPerShard"],
            shard_skew=summary["shardSkew"],
        )


def publish(report: DriftReport, settings: HandlerSettings) -> None:
    """Every-run metrics always, zeros included; the scan's (the open index's among them) only
    from a run that scanned."""
    add_index_dimensions(settings)
    count = MetricUnit.Count
    metrics.add_metric(name=names.METRIC_DRIFT_READ_INCOMPLETE, unit=count, value=0)
    metrics.add_metric(name=names.METRIC_DRIFT_READ_PERCENT, unit=MetricUnit.Percent, value=100)
    metrics.add_metric(name=names.METRIC_LEGACY_ROWS, unit=count, value=report.legacy_rows)
    metrics.add_metric(name=names.METRIC_SHARDED_ROWS, unit=count, value=report.sharded_rows)
    metrics.add_metric(
        name=names.METRIC_UNEXPECTED_LEGACY_ROWS, unit=count, value=report.unexpected_legacy_rows
    )
    metrics.add_metric(
        name=names.METRIC_UNEXPECTED_SHARDED_ROWS, unit=count, value=report.unexpected_sharded_rows
    )
    metrics.add_metric(
        name=names.METRIC_CONTROL_RECORD_MISSING,
        unit=count,
        value=1 if report.control_record_missing else 0,
    )
    metrics.add_metric(name=names.METRIC_MISROUTED_ROWS, unit=count, value=report.misrouted_rows)
    metrics.add_metric(name=names.METRIC_ANOMALOUS_ROWS, unit=count, value=report.anomalous_rows)
    metrics.add_metric(
        name=names.METRIC_SHARD_SKEW, unit=MetricUnit.NoUnit, value=report.shard_skew
    )
    if report.scanned:
        metrics.add_metric(
            name=names.METRIC_UNINDEXED_ROWS, unit=count, value=report.unindexed_rows or 0
        )
        metrics.add_metric(name=names.METRIC_STRAY_ROWS, unit=count, value=report.stray_rows or 0)
        metrics.add_metric(
            name=names.METRIC_SCANNED_SAGA_ROWS, unit=count, value=report.scanned_saga_rows or 0
        )
        metrics.add_metric(
            name=names.METRIC_OPEN_INDEX_MISSING_ROWS,
            unit=count,
            value=report.open_index_missing_rows or 0,
        )
        metrics.add_metric(
            name=names.METRIC_OPEN_INDEX_STRAY_ROWS,
            unit=count,
            value=report.open_index_stray_rows or 0,
        )
        metrics.add_metric(
            name=names.METRIC_OPEN_INDEX_UNSTAMPED_ROWS,
            unit=count,
            value=report.open_index_unstamped_rows or 0,
        )
    for shard_number, rows in sorted(report.rows_per_shard.items()):
        publish_apart(
            settings,
            names.METRIC_ROWS_PER_SHARD,
            count,
            rows,
            **{names.DIMENSION_SHARD: str(shard_number)},
        )


def publish_incomplete(cursor: DriftCursor, settings: HandlerSettings) -> None:
    """A run whose read is not done: DriftReadIncomplete = 1 and how much is read (when the
    last complete read gives a measure); no wrong-now count, which would be a partial one."""
    add_index_dimensions(settings)
    metrics.add_metric(name=names.METRIC_DRIFT_READ_INCOMPLETE, unit=MetricUnit.Count, value=1)
    percent = cursor.percent_read()
    if percent is not None:
        metrics.add_metric(
            name=names.METRIC_DRIFT_READ_PERCENT, unit=MetricUnit.Percent, value=round(percent, 1)
        )
