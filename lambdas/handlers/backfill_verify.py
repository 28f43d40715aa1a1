"""Backfill verification step: aggregates the segments' counts and reads back what is still on
the source key; the state machine fails the run when a row that should have moved did not.

Input: {"request": BackfillRequest, "segments": [SegmentResult, ...]}; output: BackfillSummary.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict

from handlers.settings import HandlerSettings
from saga_index.backfill import BackfillRequest, BackfillSummary, SegmentResult, finish_backfill
from saga_index.dynamo import make_client

logger = Logger()
metrics = Metrics()
tracer = Tracer()
# The domain library logs through stdlib logging: give it the same JSON format and context.
logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"saga_index"})


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: BackfillRequest
    segments: list[SegmentResult]


@lru_cache(maxsize=4)
def _dynamodb(max_attempts: int) -> Any:
    return make_client(max_attempts=max_attempts)


def _publish(summary: BackfillSummary, settings: HandlerSettings) -> None:
    if summary.verification is None:
        return
    metrics.add_dimension(name="TableName", value=settings.table_name)
    metrics.add_dimension(name="IndexName", value=settings.index_name)
    metrics.add_metric(
        name="SourceKeyRows", unit=MetricUnit.Count, value=summary.verification.remaining
    )
    metrics.add_metric(
        name="UnexpectedSourceKeyRows",
        unit=MetricUnit.Count,
        value=summary.verification.unexpected,
    )


@metrics.log_metrics(raise_on_empty_metrics=False)
@logger.inject_lambda_context
@tracer.capture_lambda_handler
@event_parser(model=VerifyRequest)
def handler(event: VerifyRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    summary = finish_backfill(
        _dynamodb(settings.max_attempts),
        settings.table_name,
        event.request,
        event.segments,
        index_name=settings.index_name,
        shard_count=settings.shard_count,
    )
    _publish(summary, settings)
    logger.info("backfill finished", extra={"summary": summary.to_json()})
    return summary.to_json()
