"""The drift guard: runs the drift checks on its schedule, judged against the state the control
record names NOW (read through the execution environment's provider), and publishes every metric,
every run.

Every run that completes its read publishes the raw counts LegacyRows, ShardedRows, ShardSkew and
RowsPerShard (one datapoint per shard, dimension Shard), and the wrong-now counts
UnexpectedLegacyRows, UnexpectedShardedRows, MisroutedRows and ControlRecordMissing (1 when the
STATE item is gone but history exists: the routing then spans every layout that history names),
plus AnomalousRows, zeros included. UnindexedRows, StrayRows and ScannedSagaRows come only from
the runs that scan the base table (every K-th run, decided from the scheduled time); their
alarm's period spans two scan intervals (infra/observability/alarms.py). So do
OpenIndexMissingRows and OpenIndexStrayRows (both page) and OpenIndexUnstampedRows (no alarm):
while the record's open index is `open`, or `adding` once its writers' switch has settled
(effectiveAt plus the in-flight margin of the provider's timing), the open index compared with
the scan's rows (two reads a GSI lag apart); in `adding` an open saga not stamped yet is
unstamped, the backfill's work left, not missing; else all three 0 (checks/drift/_open_check).

A read of the index that cannot reach every key's end within one run (its keys paced), or a
base-table scan that cannot reach every segment's end, finishes across runs: the run saves where
each read and each scan segment stopped in the drift cursor item and publishes only
DriftReadIncomplete = 1 and DriftReadPercent (of the last complete read and scan, when there
are), never a partial count as a verdict; the runs after it go on with the scan whether or not
one is due, and the run that completes it publishes the verdict, the scan's counts and
DriftReadIncomplete = 0. Every run publishes DriftReadIncomplete, so "no data" still means the
guard did not run.

A read that fails after botocore's retries, an open-index read that runs out of time, or a
control record that cannot be read (beyond the provider's stale grace) fails the invocation
(the cursor keeps what the last run saved): no partial numbers are published as if they were
the truth.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.drift_guard_messages import (
    DriftGuardEvent,
    DriftGuardResult,
    publish,
    publish_incomplete,
)
from handlers.runtime import clients, control_provider, entry_point, logger
from handlers.settings import DriftGuardSettings
from saga_index.layout_change.checks.drift import (
    CursorStore,
    DriftChecker,
    DriftReadIncomplete,
    cursor_layout,
    scan_due,
)
from saga_index.store.dynamo import KeyReadPace, ScanOptions

# Leave time to save the cursor, publish the metrics and log the report before Lambda's own
# timeout.
SAFETY_MARGIN_SECONDS = 20.0


@entry_point(DriftGuardEvent)
def handler(event: DriftGuardEvent, context: LambdaContext) -> dict[str, Any]:
    settings = DriftGuardSettings.from_env()
    scan = scan_due(
        event.scheduled_time, every=settings.scan_every, period_minutes=settings.period_minutes
    )
    client = clients.dynamodb(settings.max_attempts)
    # The plain read: a record lost after a migration is drift this guard reports (rows on
    # shard keys under "never migrated"), not a read to refuse.
    provider = control_provider(settings, refuse_lost=False)
    state = provider.state()
    checker = DriftChecker(
        client,
        settings.table_name,
        state=state,
        index_name=settings.index_name,
        scan_options=ScanOptions(
            segments=settings.scan_segments,
            read_units_per_second=settings.scan_read_units_per_second,
        ),
        index_pace=KeyReadPace(units_per_key=settings.index_read_units_per_key),
        clock=time.monotonic,
        sleep=time.sleep,
        open_recheck_seconds=settings.open_recheck_seconds,
        timing=provider.timing,
    )
    store = CursorStore(client, settings.table_name)
    cursor = store.resume(state.version, cursor_layout(checker.routing))
    budget = max(1.0, context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN_SECONDS)
    taken_at = datetime.now(UTC).isoformat()
    try:
        report = checker.check(
            scan_unindexed=scan, deadline=time.monotonic() + budget, cursor=cursor
        )
    except DriftReadIncomplete as incomplete:
        store.save(cursor, taken_at)
        publish_incomplete(cursor, settings)
        percent = cursor.percent_read()
        logger.warning(
            "drift report: INCOMPLETE (no verdict yet)",
            extra={"reason": str(incomplete), "percentRead": percent},
        )
        return {"complete": False, "percentRead": percent}
    cursor.completed(report.index_read_units)
    store.save(cursor, taken_at)
    publish(report, settings)
    summary = report.to_dict()
    if report.healthy:
        logger.info("drift report: healthy", extra={"report": summary})
    else:
        logger.warning("drift report: DRIFT", extra={"report": summary})
    return {"complete": True, **DriftGuardResult.of(report, summary).model_dump(by_alias=True)}
