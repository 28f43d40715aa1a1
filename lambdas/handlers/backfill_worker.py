"""Backfill segment worker: re-stamps one parallel-Scan segment until it is done or the
Lambda's deadline is near, and returns the cursor the state machine loops on.

Input: saga_index.backfill.SegmentRequest (camelCase JSON); output: SegmentResult.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import Field

from handlers.settings import HandlerSettings
from saga_index.backfill import (
    DEFAULT_SAFETY_MARGIN_SECONDS,
    SegmentCounts,
    SegmentRequest,
    check_deployment,
    run_segment,
)
from saga_index.dynamo import ThrottleCounter, attach_throttle_observer, make_client

logger = Logger()
metrics = Metrics()
tracer = Tracer()
# The domain library logs through stdlib logging: give it the same JSON format and context.
logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"saga_index"})


class WorkerSettings(HandlerSettings):
    # Time kept back from the Lambda timeout: one write with botocore's backoff must fit in it.
    safety_margin_seconds: float = Field(
        default=DEFAULT_SAFETY_MARGIN_SECONDS, alias="BACKFILL_SAFETY_MARGIN_SECONDS", gt=0
    )


@lru_cache(maxsize=4)
def _dynamodb(max_attempts: int) -> tuple[Any, ThrottleCounter]:
    """One client per execution environment, reused by warm invocations, with its throttle
    counter (one invocation at a time per environment, so its increments are this run's)."""
    client = make_client(max_attempts=max_attempts)
    return client, attach_throttle_observer(client)


# Metric name -> the count it publishes (this invocation's own, never the carried totals).
# infra/alarms.py's dashboard graphs Restamped, Skipped and Anomalies of this service.
WORKER_METRICS = ("Scanned", "Restamped", "Skipped", "Anomalies", "WouldRestamp", "Throttles")


def _publish(counts: SegmentCounts, settings: WorkerSettings) -> None:
    metrics.add_dimension(name="TableName", value=settings.table_name)
    metrics.add_dimension(name="IndexName", value=settings.index_name)
    values = (
        counts.scanned,
        counts.restamped,
        counts.skipped,
        counts.anomalies,
        counts.would_restamp,
        counts.throttles,
    )
    for name, value in zip(WORKER_METRICS, values, strict=True):
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)


@metrics.log_metrics(raise_on_empty_metrics=False)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@event_parser(model=SegmentRequest)
def handler(event: SegmentRequest, context: LambdaContext) -> dict[str, Any]:
    settings = WorkerSettings.from_env()
    check_deployment(
        event.direction,
        event.shard_count,
        deployed_shard_count=settings.shard_count,
        phase=settings.phase,
    )
    client, throttles = _dynamodb(settings.max_attempts)
    result = run_segment(
        client,
        settings.table_name,
        event,
        throttles=throttles,
        remaining_seconds=lambda: context.get_remaining_time_in_millis() / 1000,
        safety_margin_seconds=settings.safety_margin_seconds,
    )
    _publish(result.invocation or result, settings)
    return result.to_json()
