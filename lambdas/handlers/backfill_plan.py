"""Backfill plan step: validates the state machine's input against the deployment (phase,
shard count) and lays out the segments the Map iterates.

Input: saga_index.backfill.BackfillRequest; output: SegmentPlan. A bad input fails here, before
anything is read or written, with every violation named (pydantic ValidationError or
InvalidInputError, which become the execution's error and cause).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import entry_point
from handlers.settings import HandlerSettings
from saga_index.backfill.messages import BackfillRequest, plan_segments


@entry_point(BackfillRequest, log_event=True, publishes_metrics=False)
def handler(event: BackfillRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    return plan_segments(event, shard_count=settings.shard_count, phase=settings.phase).to_json()
