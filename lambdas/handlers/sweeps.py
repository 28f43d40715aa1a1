"""The four sweep functions: workflow-health-sweep, retry-failed-prepare, stuck-saga-sweep and
agent-metrics-snapshot. Each is invoked by its EventBridge Scheduler schedule (infra/schedules.py)
with {"job", "scheduledTime", "executionId", "attempt"}.

Each entry point parses the payload, reads its settings, calls ONE domain function of
saga_index.sweeps.runner with the scheduled time as "now" (the invocation time when the payload
has none), and turns the report into metrics. Exceptions propagate: a failed read or publish
fails the invocation, so Scheduler retries it and its dead-letter queue sees the last failure.

boto3 clients are created on first use and cached for the life of the execution environment;
tests hand in their own with `use_clients(...)` (moto, or one with a fault injected).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging import utils as logging_utils
from aws_lambda_powertools.metrics import MetricUnit, single_metric
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from handlers.settings import HandlerSettings
from saga_index.errors import InvalidInputError
from saga_index.model import OPEN_STATES
from saga_index.sweeps import runner
from saga_index.sweeps.claims import RetryClaims
from saga_index.sweeps.events import EventPublisher, make_events_client
from saga_index.sweeps.rules import (
    DEFAULT_HEARTBEAT_THRESHOLD,
    DEFAULT_MAX_PREPARE_ATTEMPTS,
    DEFAULT_PREPARE_BACKOFF,
    DEFAULT_STUCK_THRESHOLD,
    HealthPolicy,
    RetryPolicy,
    StuckPolicy,
)

logger = Logger()
tracer = Tracer()
metrics = Metrics()
# The domain library logs through stdlib logging; in Lambda, give it the same JSON format and
# context keys. Only there: the copy detaches those loggers from the root logger, which would
# take their records away from any other code sharing the process (a test session).
if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
    logging_utils.copy_config_to_registered_loggers(source_logger=logger, include={"saga_index"})

ENV_EVENT_BUS = "EVENT_BUS_NAME"


def _minutes(duration: timedelta) -> int:
    return int(duration.total_seconds() // 60)


class SweepSettings(HandlerSettings):
    """Thresholds of every sweep, with the issue's defaults; names are environment variables."""

    heartbeat_threshold_minutes: int = Field(
        default=_minutes(DEFAULT_HEARTBEAT_THRESHOLD),
        alias="WORKFLOW_HEARTBEAT_THRESHOLD_MINUTES",
        gt=0,
    )
    prepare_max_attempts: int = Field(
        default=DEFAULT_MAX_PREPARE_ATTEMPTS, alias="PREPARE_RETRY_MAX_ATTEMPTS", ge=1, le=20
    )
    prepare_backoff_minutes: int = Field(
        default=_minutes(DEFAULT_PREPARE_BACKOFF), alias="PREPARE_RETRY_BACKOFF_MINUTES", gt=0
    )
    stuck_threshold_minutes: int = Field(
        default=_minutes(DEFAULT_STUCK_THRESHOLD), alias="STUCK_SAGA_THRESHOLD_MINUTES", gt=0
    )
    # JSON object, e.g. {"PREPARING": 120}: per-state overrides of the stuck threshold.
    stuck_state_thresholds_minutes: dict[str, int] = Field(
        default_factory=dict, alias="STUCK_SAGA_STATE_THRESHOLDS_MINUTES"
    )

    @field_validator("stuck_state_thresholds_minutes", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"STUCK_SAGA_STATE_THRESHOLDS_MINUTES must be a JSON object of state to "
                    f"minutes, got {value!r}: {err}"
                ) from None
        return value

    @field_validator("stuck_state_thresholds_minutes")
    @classmethod
    def _open_states(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(OPEN_STATES))
        if unknown:
            raise ValueError(f"not open states: {unknown}; open states: {list(OPEN_STATES)}")
        bad = {state: m for state, m in value.items() if m <= 0}
        if bad:
            raise ValueError(f"thresholds must be positive minutes, got {bad}")
        return value

    def health_policy(self) -> HealthPolicy:
        return HealthPolicy(threshold=timedelta(minutes=self.heartbeat_threshold_minutes))

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.prepare_max_attempts,
            base_backoff=timedelta(minutes=self.prepare_backoff_minutes),
        )

    def stuck_policy(self) -> StuckPolicy:
        return StuckPolicy(
            default_threshold=timedelta(minutes=self.stuck_threshold_minutes),
            per_state={
                state: timedelta(minutes=m)
                for state, m in self.stuck_state_thresholds_minutes.items()
            },
        )


class EventSweepSettings(SweepSettings):
    """The sweeps that emit events also need their bus."""

    event_bus_name: str = Field(alias=ENV_EVENT_BUS, min_length=1)


class ScheduledPayload(BaseModel):
    """What infra/schedules.py's ScheduledInvocation sends; every field optional so a manual
    test invocation with {} still runs (at the invocation time)."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    job: str | None = None
    scheduled_time: AwareDatetime | None = Field(default=None, alias="scheduledTime")
    execution_id: str | None = Field(default=None, alias="executionId")
    attempt: int | None = Field(default=None, ge=0)


class _Clients:
    """boto3 clients made on first use (never at import) and reused across invocations."""

    def __init__(self) -> None:
        self.dynamodb: Any = None
        self.events: Any = None

    def dynamodb_for(self, settings: HandlerSettings) -> Any:
        if self.dynamodb is None:
            self.dynamodb = settings.dynamodb_client()
        return self.dynamodb

    def events_client(self) -> Any:
        if self.events is None:
            self.events = make_events_client()
        return self.events


_clients = _Clients()


def use_clients(*, dynamodb: Any = None, events: Any = None) -> None:
    """Replace the cached clients (tests; None drops the cache so the next call makes one)."""
    _clients.dynamodb = dynamodb
    _clients.events = events


def _invocation_time() -> datetime:
    return datetime.now(UTC)


def _now(payload: ScheduledPayload) -> datetime:
    # The scheduled time is the natural "now": a late delivery or a Scheduler retry then decides
    # exactly what the on-time run would have, and the retry claim is keyed on it.
    return payload.scheduled_time if payload.scheduled_time is not None else _invocation_time()


def _payload(job: str, event: dict[str, Any]) -> ScheduledPayload:
    payload = parse(event=event, model=ScheduledPayload)
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


def _sweep(
    job: str,
    event: dict[str, Any],
    settings: HandlerSettings,
    run: Callable[[datetime], runner.SweepReport],
) -> dict[str, Any]:
    payload = _payload(job, event)
    metrics.add_dimension(name="TableName", value=settings.table_name)
    metrics.add_dimension(name="IndexName", value=settings.index_name)
    started = time.perf_counter()
    try:
        report = run(_now(payload))
    finally:
        metrics.add_metric(
            name="SweepDuration",
            unit=MetricUnit.Milliseconds,
            value=(time.perf_counter() - started) * 1000,
        )
    metrics.add_metric(name="SagasRead", unit=MetricUnit.Count, value=report.sagas_read)
    for kind, count in report.findings.items():
        metrics.add_metric(name=kind, unit=MetricUnit.Count, value=count)
    if job == runner.RETRY_FAILED_PREPARE:
        metrics.add_metric(name="SagasSkippedChanged", unit=MetricUnit.Count, value=report.skipped)
    metrics.add_metric(name="SagasUnevaluable", unit=MetricUnit.Count, value=report.unevaluable)
    result = runner.summary(report)
    logger.info("sweep finished", extra={"result": result})
    return result


def _publisher(settings: EventSweepSettings) -> EventPublisher:
    return EventPublisher(_clients.events_client(), settings.event_bus_name)


@logger.inject_lambda_context
@metrics.log_metrics(raise_on_empty_metrics=False)
@tracer.capture_lambda_handler
def workflow_health_sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = EventSweepSettings.from_env()
    return _sweep(
        runner.WORKFLOW_HEALTH_SWEEP,
        event,
        settings,
        lambda now: runner.run_workflow_health_sweep(
            settings.repository(_clients.dynamodb_for(settings)),
            _publisher(settings),
            now=now,
            policy=settings.health_policy(),
        ),
    )


@logger.inject_lambda_context
@metrics.log_metrics(raise_on_empty_metrics=False)
@tracer.capture_lambda_handler
def retry_failed_prepare(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = EventSweepSettings.from_env()
    return _sweep(
        runner.RETRY_FAILED_PREPARE,
        event,
        settings,
        lambda now: runner.run_retry_failed_prepare(
            settings.repository(_clients.dynamodb_for(settings)),
            RetryClaims(_clients.dynamodb_for(settings), settings.table_name),
            _publisher(settings),
            now=now,
            policy=settings.retry_policy(),
        ),
    )


@logger.inject_lambda_context
@metrics.log_metrics(raise_on_empty_metrics=False)
@tracer.capture_lambda_handler
def stuck_saga_sweep(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = EventSweepSettings.from_env()
    return _sweep(
        runner.STUCK_SAGA_SWEEP,
        event,
        settings,
        lambda now: runner.run_stuck_saga_sweep(
            settings.repository(_clients.dynamodb_for(settings)),
            _publisher(settings),
            now=now,
            policy=settings.stuck_policy(),
        ),
    )


@logger.inject_lambda_context
@metrics.log_metrics(raise_on_empty_metrics=False)
@tracer.capture_lambda_handler
def agent_metrics_snapshot(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    settings = SweepSettings.from_env()
    result = _sweep(
        runner.AGENT_METRICS_SNAPSHOT,
        event,
        settings,
        lambda now: runner.run_agent_metrics_snapshot(
            settings.repository(_clients.dynamodb_for(settings)), now=now
        ),
    )
    _snapshot_metrics(settings, result)
    return result


def _snapshot_metrics(settings: HandlerSettings, result: dict[str, Any]) -> None:
    """Per-state counts need a State dimension of their own: one EMF document per state."""
    dimensions = {
        "service": metrics.service or "agent-metrics-snapshot",
        "TableName": settings.table_name,
        "IndexName": settings.index_name,
    }
    for state, count in result["openByState"].items():
        with single_metric(
            name="OpenSagas",
            unit=MetricUnit.Count,
            value=count,
            namespace=metrics.namespace,
            default_dimensions=dimensions,
        ) as metric:
            metric.add_dimension(name="State", value=state)
    metrics.add_metric(
        name="OpenSagas", unit=MetricUnit.Count, value=sum(result["openByState"].values())
    )
    # No open saga: the oldest is 0 s old, so the series (and any alarm on it) stays continuous.
    metrics.add_metric(
        name="OldestOpenSagaAgeSeconds",
        unit=MetricUnit.Seconds,
        value=result["oldestAgeSeconds"] or 0,
    )
