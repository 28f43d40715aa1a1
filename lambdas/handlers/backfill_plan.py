"""Backfill plan step: validates the state machine's input against the deployment (phase,
shard count) and lays out the segments the Map iterates.

Input: saga_index.backfill.BackfillRequest; output: SegmentPlan. A bad input fails here, before
anything is read or written, with every violation named (pydantic ValidationError or
InvalidInputError, which become the execution's error and cause).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.settings import HandlerSettings
from saga_index.backfill import BackfillRequest, plan_segments

logger = Logger()
tracer = Tracer()
# The domain library logs through stdlib logging: give it the same JSON format and context.
logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"saga_index"})


@logger.inject_lambda_context(log_event=True)
@tracer.capture_lambda_handler
@event_parser(model=BackfillRequest)
def handler(event: BackfillRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    return plan_segments(event, shard_count=settings.shard_count, phase=settings.phase).to_json()
