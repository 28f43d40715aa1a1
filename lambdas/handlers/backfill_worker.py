"""Backfill segment worker: re-stamps one parallel-Scan segment until it is done or the
Lambda's deadline is near, and returns the cursor the state machine loops on
(saga_index.layout_change.backfill.steps.run_leased_segment).

Input: layout_change.backfill.wire.SegmentRequest (camelCase JSON); output: SegmentResult.
Metrics: names.BACKFILL_WORKER_METRICS, this invocation's own counts (never the carried totals).

Under the run's lease (not for a dry run): the invocation heartbeats when it starts, every few
seconds while it runs and when it ends; each heartbeat returns the record, whose runtime
throttle (this segment's share of it) and pause flag the token bucket follows. Paused, the
worker writes nothing and returns its cursor (not done) near its deadline; the state machine
invokes it again. A lost lease (taken over, released, or the record's state moved on) stops it
after the in-flight write: the invocation publishes its counts, then fails with LeaseLostError.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import add_index_dimensions, clients, entry_point, metrics
from handlers.settings import WorkerSettings
from saga_index.layout_change.backfill import SegmentRequest, run_leased_segment


@entry_point(SegmentRequest)
def handler(event: SegmentRequest, context: LambdaContext) -> dict[str, Any]:
    settings = WorkerSettings.from_env()
    outcome = run_leased_segment(
        clients.dynamodb(settings.max_attempts),
        settings.table_name,
        event,
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        safety_margin_seconds=settings.safety_margin_seconds,
    )
    add_index_dimensions(settings)
    for name, value in outcome.metric_values().items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return outcome.unwrap().to_json()
