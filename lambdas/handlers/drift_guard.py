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
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.drift_guard_messages import DriftGuardEvent, DriftGuardResult, publish
from handlers.runtime import clients, entry_point, logger
from handlers.settings import DriftGuardSettings
from saga_index.drift import DriftChecker, scan_due
from saga_index.dynamo.scan import ScanOptions

# Leave time to publish the metrics and log the report before Lambda's own timeout.
SAFETY_MARGIN_SECONDS = 20.0


@entry_point(DriftGuardEvent)
def handler(event: DriftGuardEvent, context: LambdaContext) -> dict[str, Any]:
    settings = DriftGuardSettings.from_env()
    scan = scan_due(
        event.scheduled_time, every=settings.scan_every, period_minutes=settings.period_minutes
    )
    checker = DriftChecker(
        clients.dynamodb(settings.max_attempts),
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
    publish(report, settings)
    summary = report.to_dict()
    if report.healthy:
        logger.info("drift report: healthy", extra={"report": summary})
    else:
        logger.warning("drift report: DRIFT", extra={"report": summary})
    return DriftGuardResult.of(report, summary).model_dump(by_alias=True)
