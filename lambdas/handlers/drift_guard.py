"""The drift guard: runs the drift checks on its schedule and publishes every metric, every run.

Every run publishes LegacyRows, ShardedRows, MisroutedRows, AnomalousRows, ShardSkew and
RowsPerShard (one datapoint per shard, dimension Shard), zeros included, so "no data" can only
mean the guard did not run: the alarms treat missing data as breaching. UnindexedRows, StrayRows
and ScannedSagaRows come only from the runs that scan the base table (every K-th run, decided from
the scheduled time); their alarm's period spans two scan intervals (infra/alarms.py).

A read that fails after botocore's retries, or a scan that runs out of time, fails the
invocation: no partial numbers are published as if they were the truth.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from handlers.settings import HandlerSettings
from saga_index import drift
from saga_index.drift import DriftChecker, DriftReport, ScanOptions, scan_due

logger = Logger()
tracer = Tracer()
metrics = Metrics()

# Leave time to publish the metrics and log the report before Lambda's own timeout.
SAFETY_MARGIN_SECONDS = 20.0


class DriftGuardSettings(HandlerSettings):
    scan_every: int = Field(
        default=drift.DEFAULT_SCAN_EVERY, alias="DRIFT_SCAN_EVERY", ge=1, le=drift.MAX_SCAN_EVERY
    )
    period_minutes: int = Field(default=5, alias="DRIFT_GUARD_PERIOD_MINUTES", ge=1, le=60)
    scan_segments: int = Field(default=4, alias="DRIFT_SCAN_SEGMENTS", ge=1, le=64)
    scan_read_units_per_second: float = Field(
        default=400.0, alias="DRIFT_SCAN_READ_UNITS_PER_SECOND", gt=0, le=40_000
    )


class DriftGuardEvent(BaseModel):
    """The payload infra/schedules.py's ScheduledInvocation sends."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    job: Literal["drift-guard"]
    scheduled_time: AwareDatetime = Field(alias="scheduledTime")
    execution_id: str | None = Field(default=None, alias="executionId")
    attempt: int | None = None


class DriftGuardResult(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    healthy: bool
    findings: list[str]
    scanned: bool
    legacy_rows: int = Field(alias="legacyRows")
    sharded_rows: int = Field(alias="shardedRows")
    misrouted_rows: int = Field(alias="misroutedRows")
    anomalous_rows: int = Field(alias="anomalousRows")
    unindexed_rows: int | None = Field(alias="unindexedRows")
    stray_rows: int | None = Field(alias="strayRows")
    rows_per_shard: dict[str, int] = Field(alias="rowsPerShard")
    shard_skew: float = Field(alias="shardSkew")


@logger.inject_lambda_context
@metrics.log_metrics(raise_on_empty_metrics=False)
@tracer.capture_lambda_handler
@event_parser(model=DriftGuardEvent)
def handler(event: DriftGuardEvent, context: LambdaContext) -> dict[str, Any]:
    settings = DriftGuardSettings.from_env()
    scan = scan_due(
        event.scheduled_time, every=settings.scan_every, period_minutes=settings.period_minutes
    )
    checker = DriftChecker(
        settings.dynamodb_client(),
        settings.table_name,
        phase=settings.phase,
        shard_count=settings.shard_count,
        index_name=settings.index_name,
        scan_options=ScanOptions(
            segments=settings.scan_segments,
            read_units_per_second=settings.scan_read_units_per_second,
        ),
    )
    budget = max(1.0, context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN_SECONDS)
    report = checker.check(scan_unindexed=scan, deadline=time.monotonic() + budget)
    _publish(report)
    summary = report.to_dict()
    if report.healthy:
        logger.info("drift report: healthy", extra={"report": summary})
    else:
        logger.warning("drift report: DRIFT", extra={"report": summary})
    return DriftGuardResult(
        healthy=report.healthy,
        findings=report.findings(),
        scanned=report.scanned,
        legacy_rows=report.legacy_rows,
        sharded_rows=report.sharded_rows,
        misrouted_rows=report.misrouted_rows,
        anomalous_rows=report.anomalous_rows,
        unindexed_rows=report.unindexed_rows,
        stray_rows=report.stray_rows,
        rows_per_shard=summary["rowsPerShard"],
        shard_skew=summary["shardSkew"],
    ).model_dump(by_alias=True)


def _publish(report: DriftReport) -> None:
    dimensions = {
        drift.DIMENSION_TABLE: report.table_name,
        drift.DIMENSION_INDEX: report.index_name,
    }
    # Per invocation, not default dimensions: a flush clears them, so nothing stale carries over.
    for name, value in dimensions.items():
        metrics.add_dimension(name=name, value=value)
    count = MetricUnit.Count
    metrics.add_metric(name=drift.METRIC_LEGACY_ROWS, unit=count, value=report.legacy_rows)
    metrics.add_metric(name=drift.METRIC_SHARDED_ROWS, unit=count, value=report.sharded_rows)
    metrics.add_metric(name=drift.METRIC_MISROUTED_ROWS, unit=count, value=report.misrouted_rows)
    metrics.add_metric(name=drift.METRIC_ANOMALOUS_ROWS, unit=count, value=report.anomalous_rows)
    metrics.add_metric(
        name=drift.METRIC_SHARD_SKEW, unit=MetricUnit.NoUnit, value=report.shard_skew
    )
    if report.scanned:
        metrics.add_metric(
            name=drift.METRIC_UNINDEXED_ROWS, unit=count, value=report.unindexed_rows or 0
        )
        metrics.add_metric(name=drift.METRIC_STRAY_ROWS, unit=count, value=report.stray_rows or 0)
        metrics.add_metric(
            name=drift.METRIC_SCANNED_SAGA_ROWS, unit=count, value=report.scanned_saga_rows or 0
        )
    # EMF gives all metrics of one document the same dimensions, so each shard's datapoint is
    # its own document (service is added from POWERTOOLS_SERVICE_NAME, as for `metrics`).
    for shard_number, rows in sorted(report.rows_per_shard.items()):
        with single_metric(
            name=drift.METRIC_ROWS_PER_SHARD,
            unit=count,
            value=rows,
            namespace=metrics.namespace,
            default_dimensions={**dimensions, drift.DIMENSION_SHARD: str(shard_number)},
        ):
            pass
