"""The drift guard: runs the drift checks on its schedule, judged against the state the control
record names NOW (read through the execution environment's provider), and publishes every metric,
every run.

Every run publishes the raw counts LegacyRows, ShardedRows, ShardSkew and RowsPerShard (one
datapoint per shard, dimension Shard), and the wrong-now counts UnexpectedLegacyRows,
UnexpectedShardedRows, MisroutedRows and ControlRecordMissing (1 when the STATE item is gone but
history exists: the routing then spans every layout that history names), plus AnomalousRows,
zeros included, so "no data" can only mean the guard did not run: the alarms treat missing data as
breaching. UnindexedRows, StrayRows and ScannedSagaRows come only from the runs that scan the base
table (every K-th run, decided from the scheduled time); their alarm's period spans two scan
intervals (infra/observability/alarms.py).

A read that fails after botocore's retries, a scan that runs out of time, or a control record
that cannot be read (beyond the provider's stale grace) fails the invocation: no partial numbers
are published as if they were the truth, and the missing datapoints breach the alarms.
"""

from __future__ import annotations

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.drift_guard_messages import DriftGuardEvent, DriftGuardResult, publish
from handlers.runtime import clients, control_provider, entry_point, logger
from handlers.settings import DriftGuardSettings
from saga_index.layout_change.checks.drift import DriftChecker, scan_due
from saga_index.store.dynamo import KeyReadPace, ScanOptions

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
        # The plain read: a record lost after a migration is drift this guard reports (rows on
        # shard keys under "never migrated"), not a read to refuse.
        state=control_provider(settings, refuse_lost=False).state(),
        index_name=settings.index_name,
        scan_options=ScanOptions(
            segments=settings.scan_segments,
            read_units_per_second=settings.scan_read_units_per_second,
        ),
        index_pace=KeyReadPace(units_per_key=settings.index_read_units_per_key),
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
