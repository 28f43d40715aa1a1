"""Backfill segment worker: re-stamps one parallel-Scan segment until it is done or the
Lambda's deadline is near, and returns the cursor the state machine loops on.

Input: saga_index.backfill.SegmentRequest (camelCase JSON); output: SegmentResult. Metrics:
names.BACKFILL_WORKER_METRICS, this invocation's own counts (never the carried totals).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import add_index_dimensions, clients, entry_point, metrics
from handlers.settings import WorkerSettings
from saga_index import names
from saga_index.backfill.direction import check_deployment
from saga_index.backfill.messages import SegmentRequest
from saga_index.backfill.restamp import run_segment
from saga_index.dynamo.client import attach_throttle_observer


@entry_point(SegmentRequest)
def handler(event: SegmentRequest, context: LambdaContext) -> dict[str, Any]:
    settings = WorkerSettings.from_env()
    check_deployment(
        event.direction,
        event.shard_count,
        deployed_shard_count=settings.shard_count,
        phase=settings.phase,
    )
    client = clients.dynamodb(settings.max_attempts)
    result = run_segment(
        client,
        settings.table_name,
        event,
        # One invocation at a time per environment: the counter's increments are this run's.
        throttles=attach_throttle_observer(client),
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        safety_margin_seconds=settings.safety_margin_seconds,
    )
    counts = result.invocation or result
    add_index_dimensions(settings)
    values = (
        counts.scanned,
        counts.restamped,
        counts.skipped,
        counts.anomalies,
        counts.would_restamp,
        counts.throttles,
    )
    for name, value in zip(names.BACKFILL_WORKER_METRICS, values, strict=True):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    return result.to_json()
