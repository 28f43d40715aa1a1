"""Backfill verification step: aggregates the segments' counts, reads back what is still to
move on the source keys, and releases the run's lease with its completion (counts, complete,
verified: what `phase set` checks), through layout_change.backfill.steps.verify_run. The state
machine then fails the run when a row that should have moved did not. A run of kind open-index
compares the table with the open index instead and releases the lease recording no completion
(the state machine fails it when a row differs); it publishes no source-key metrics.

Input: saga_index.layout_change.backfill.wire.VerifyRequest, {"request": BackfillRequest, "run":
RunTicket, "segments": [SegmentResult, ...]}; output: BackfillSummary. Metrics: SourceKeyRows
and UnexpectedSourceKeyRows. The lease is heartbeated before the read-back (LeaseLostError when
it is gone: nothing is recorded); a dry run has none. A retry after the release landed re-reads
and returns the summary without recording it again.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import add_index_dimensions, clients, entry_point, logger, metrics
from handlers.settings import HandlerSettings
from saga_index.layout_change.backfill import VerifyRequest, verify_run
from saga_index.layout_change.record import BackfillKind


@entry_point(VerifyRequest)
def handler(event: VerifyRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    summary = verify_run(
        clients.dynamodb(settings.max_attempts),
        settings.table_name,
        event,
        index_name=settings.index_name,
    )
    # Rows left on a layout move's source keys: an open-index run has none to count.
    if summary.verification is not None and event.run.kind is BackfillKind.LAYOUT:
        add_index_dimensions(settings)
        for name, value in summary.verification.metric_values().items():
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    logger.info("backfill finished", extra={"summary": summary.to_json()})
    return summary.to_json()
