"""Backfill verification step: aggregates the segments' counts and reads back what is still on
the source key; the state machine fails the run when a row that should have moved did not.

Input: {"request": BackfillRequest, "segments": [SegmentResult, ...]}; output: BackfillSummary.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict

from handlers.runtime import add_index_dimensions, clients, entry_point, logger, metrics
from handlers.settings import HandlerSettings
from saga_index import names
from saga_index.backfill.messages import BackfillRequest, SegmentResult
from saga_index.backfill.readback import finish_backfill


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request: BackfillRequest
    segments: list[SegmentResult]


@entry_point(VerifyRequest)
def handler(event: VerifyRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    summary = finish_backfill(
        clients.dynamodb(settings.max_attempts),
        settings.table_name,
        event.request,
        event.segments,
        index_name=settings.index_name,
        shard_count=settings.shard_count,
    )
    if summary.verification is not None:
        add_index_dimensions(settings)
        remaining, unexpected = summary.verification.remaining, summary.verification.unexpected
        metrics.add_metric(
            name=names.METRIC_SOURCE_KEY_ROWS, unit=MetricUnit.Count, value=remaining
        )
        metrics.add_metric(
            name=names.METRIC_UNEXPECTED_SOURCE_KEY_ROWS, unit=MetricUnit.Count, value=unexpected
        )
    logger.info("backfill finished", extra={"summary": summary.to_json()})
    return summary.to_json()
