"""The four sweep functions: workflow-health-sweep, retry-failed-prepare, stuck-saga-sweep and
agent-metrics-snapshot. Each is invoked by its EventBridge Scheduler schedule (infra/schedules.py)
with {"job", "scheduledTime", "executionId", "attempt"} and runs its row of
handlers.sweep_jobs.JOBS. The job spec (saga_index.index.jobs) names each as its `handler`.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from handlers.runtime import entry_point
from handlers.sweep_jobs import run_sweep
from saga_index.index import names


@entry_point()
def workflow_health_sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_sweep(names.JOB_WORKFLOW_HEALTH_SWEEP, event)


@entry_point()
def retry_failed_prepare(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_sweep(names.JOB_RETRY_FAILED_PREPARE, event)


@entry_point()
def stuck_saga_sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_sweep(names.JOB_STUCK_SAGA_SWEEP, event)


@entry_point()
def agent_metrics_snapshot(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return run_sweep(names.JOB_AGENT_METRICS_SNAPSHOT, event)
