"""Backfill plan step: takes the run's lease in the control record and lays out the segments
the Map iterates (saga_index.layout_change.backfill.steps.plan_run).

Input: layout_change.backfill.wire.PlanRequest, {"request": BackfillRequest, "holder": the
execution's id ($$.Execution.Id)}; output: SegmentPlan, whose `run` ticket (the record's source
and target layouts, the lease token) every later step carries. The token is derived from the
execution id, so a retried plan step finds its own lease.

Refused here, before anything is written: a bad input (pydantic ValidationError, every
violation named), a direction the record's writers would undo (LeaseDirectionError), a missing
record, a state younger than its effectiveAt (LeaseNotYetEffectiveError) and another run's live
lease (LeaseHeldError). A dry run takes no lease: it writes nothing.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import clients, entry_point
from handlers.settings import HandlerSettings
from saga_index.layout_change.backfill import PlanRequest, plan_run


@entry_point(PlanRequest, log_event=True, publishes_metrics=False)
def handler(event: PlanRequest, context: LambdaContext) -> dict[str, Any]:
    settings = HandlerSettings.from_env()
    plan = plan_run(clients.dynamodb(settings.max_attempts), settings.table_name, event)
    return plan.to_json()
