"""What each sweep of the job spec (saga_index.index.jobs) runs: job name -> the settings it
reads and the ONE domain call it makes, checked against the spec's sweeps at import. And the run
every sweep entry point shares: parse the Scheduler payload, call the job with the scheduled
time as "now", turn the report into metrics.

Exceptions propagate: a failed read or publish fails the invocation. Scheduler invokes the
function asynchronously, so that failure is Lambda's to handle (the function's EventInvokeConfig
in infra/schedules.py: its retries and its on-failure destination); Scheduler's own retries and
dead-letter queue see only a delivery that Lambda did not accept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from aws_lambda_powertools.metrics import MetricUnit

from handlers.runtime import (
    ScheduledPayload,
    add_index_dimensions,
    clients,
    current_routing,
    logger,
    metrics,
    publish_apart,
)
from handlers.settings import EventSweepSettings, SweepSettings
from saga_index.index import InvalidInputError, jobs, names
from saga_index.store import SagaRepository
from saga_index.sweeps import EventPublisher, RetryClaims, runner

S = TypeVar("S", bound=SweepSettings)


@dataclass(frozen=True)
class SweepJob(Generic[S]):
    settings: type[S]
    run: Callable[[S, datetime], runner.SweepReport]
    # The retry sweep's "skipped" (due sagas that changed between read and claim) and
    # "republished" (pending claims past the publish timeout, published again).
    reports_skipped: bool = False
    # Metrics beyond the shared ones, from the job's summary.
    publish: Callable[[S, dict[str, Any]], None] | None = None


def _repository(settings: SweepSettings) -> SagaRepository:
    """Along the routing of the control record's state as this invocation reads it."""
    return settings.repository(clients.dynamodb(settings.max_attempts), current_routing(settings))


def _publisher(settings: EventSweepSettings) -> EventPublisher:
    return EventPublisher(clients.events(), settings.event_bus_name)


def _publish_snapshot(settings: SweepSettings, result: dict[str, Any]) -> None:
    """Per-state counts need a State dimension of their own: one EMF document per state."""
    for state, count in result["openByState"].items():
        publish_apart(
            settings,
            names.METRIC_OPEN_SAGAS,
            MetricUnit.Count,
            count,
            **{names.DIMENSION_STATE: state},
        )
    metrics.add_metric(
        name=names.METRIC_OPEN_SAGAS,
        unit=MetricUnit.Count,
        value=sum(result["openByState"].values()),
    )
    # No open saga: the oldest is 0 s old, so the series (and any alarm on it) stays continuous.
    metrics.add_metric(
        name=names.METRIC_OLDEST_OPEN_SAGA_AGE,
        unit=MetricUnit.Seconds,
        value=result["oldestAgeSeconds"] or 0,
    )


JOBS: dict[str, SweepJob[Any]] = {
    names.JOB_WORKFLOW_HEALTH_SWEEP: SweepJob(
        EventSweepSettings,
        lambda settings, now: runner.run_workflow_health_sweep(
            _repository(settings), _publisher(settings), now=now, policy=settings.health_policy()
        ),
    ),
    names.JOB_RETRY_FAILED_PREPARE: SweepJob(
        EventSweepSettings,
        lambda settings, now: runner.run_retry_failed_prepare(
            _repository(settings),
            RetryClaims(clients.dynamodb(settings.max_attempts), settings.table_name),
            _publisher(settings),
            now=now,
            policy=settings.retry_policy(),
            clock=_invocation_time,
        ),
        reports_skipped=True,
    ),
    names.JOB_STUCK_SAGA_SWEEP: SweepJob(
        EventSweepSettings,
        lambda settings, now: runner.run_stuck_saga_sweep(
            _repository(settings), _publisher(settings), now=now, policy=settings.stuck_policy()
        ),
    ),
    names.JOB_AGENT_METRICS_SNAPSHOT: SweepJob(
        SweepSettings,
        lambda settings, now: runner.run_agent_metrics_snapshot(_repository(settings), now=now),
        publish=_publish_snapshot,
    ),
}
# A sweep of the spec without a row here would be scheduled but fail every run; a row without a
# sweep would never run: either stops every sweep function at import, and the unit tests.
jobs.check_covers(JOBS, jobs.SWEEPS, table="handlers.sweep_jobs.JOBS")


def _invocation_time() -> datetime:
    return datetime.now(UTC)


def _payload(job: str, event: dict[str, Any]) -> ScheduledPayload:
    payload = ScheduledPayload.for_invocation(event, invoked_at=_invocation_time())
    if payload.job is not None and payload.job != job:
        raise InvalidInputError(
            f"this function runs the {job!r} sweep but the payload names job {payload.job!r}: "
            "check the schedule's target"
        )
    logger.append_keys(
        job=job,
        scheduledTime=None
        if payload.scheduled_time is None
        else payload.scheduled_time.isoformat(),
        executionId=payload.execution_id,
        attempt=payload.attempt,
    )
    return payload


def run_sweep(job: str, event: dict[str, Any]) -> dict[str, Any]:
    """Runs one row of JOBS for one Scheduler invocation; returns the report's summary."""
    spec = JOBS[job]
    settings = spec.settings.from_env()
    payload = _payload(job, event)
    add_index_dimensions(settings)
    # The scheduled time is the natural "now": a late delivery or a retried invocation then
    # decides exactly what the on-time run would have, and the retry claim is keyed on it.
    now = payload.scheduled_time if payload.scheduled_time is not None else _invocation_time()
    started = time.perf_counter()
    try:
        report = spec.run(settings, now)
    finally:
        metrics.add_metric(
            name=names.METRIC_SWEEP_DURATION,
            unit=MetricUnit.Milliseconds,
            value=(time.perf_counter() - started) * 1000,
        )
    count = MetricUnit.Count
    metrics.add_metric(name=names.METRIC_SAGAS_READ, unit=count, value=report.sagas_read)
    for kind, found in report.findings.items():
        metrics.add_metric(name=kind, unit=count, value=found)
    if spec.reports_skipped:
        metrics.add_metric(
            name=names.METRIC_SAGAS_SKIPPED_CHANGED, unit=count, value=report.skipped
        )
        metrics.add_metric(
            name=names.METRIC_SAGA_EVENTS_REPUBLISHED, unit=count, value=report.republished
        )
    metrics.add_metric(name=names.METRIC_SAGAS_UNEVALUABLE, unit=count, value=report.unevaluable)
    result = runner.summary(report)
    logger.info("sweep finished", extra={"result": result})
    if spec.publish is not None:
        spec.publish(settings, result)
    return result
