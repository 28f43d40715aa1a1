"""The four sweeps: their functions, their event bus, their schedules and their permissions.

One table (SWEEPS) lists them; the construct loops over it. Least privilege, per function:
  - dynamodb:Query on the saga INDEX only (the enumeration reads nothing else);
  - events:PutEvents on the sweeps' bus, for the sweeps that emit events;
  - dynamodb:UpdateItem on the TABLE, for retry-failed-prepare only (its conditional claim), and
    only on saga rows (dynamodb:LeadingKeys like "RSAGA#*"). No attribute allow-list: the claim
    reads the whole old item back when its condition fails (ReturnValuesOnConditionCheckFailure
    ALL_OLD, issue 12), which a dynamodb:Attributes restriction exists to forbid.
Besides these, a function's role carries only what SagaFunctions gives every function (writing
its own log group, X-Ray segments for active tracing, and GetItem/Query of the control record's
partition, which says which index partitions to read).

Every sweep runs at most once at a time (reserved concurrency 1) and is invoked asynchronously
by its schedule; ScheduledInvocation configures that invocation (infra/schedules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.functions import SagaFunctions
from infra.schedules import JOBS_BY_NAME, ScheduledInvocation
from saga_index.index.names import (
    ENV_EVENT_BUS,
    JOB_AGENT_METRICS_SNAPSHOT,
    JOB_RETRY_FAILED_PREPARE,
    JOB_STUCK_SAGA_SWEEP,
    JOB_WORKFLOW_HEALTH_SWEEP,
)

HANDLER_MODULE = "handlers.sweeps"


@dataclass(frozen=True)
class Sweep:
    job_name: str  # a key of infra.schedules.SCHEDULED_JOBS
    construct_id: str
    handler: str  # function name in lambdas/handlers/sweeps.py
    emits_events: bool
    claims_retries: bool = False

    def __post_init__(self) -> None:
        if self.job_name not in JOBS_BY_NAME:
            raise ValueError(f"{self.job_name}: not a job of infra.schedules.SCHEDULED_JOBS")


SWEEPS: tuple[Sweep, ...] = (
    Sweep(JOB_WORKFLOW_HEALTH_SWEEP, "WorkflowHealthSweep", "workflow_health_sweep", True),
    Sweep(
        JOB_RETRY_FAILED_PREPARE,
        "RetryFailedPrepare",
        "retry_failed_prepare",
        True,
        claims_retries=True,
    ),
    Sweep(JOB_STUCK_SAGA_SWEEP, "StuckSagaSweep", "stuck_saga_sweep", True),
    # Publishes CloudWatch metrics through its logs (EMF): no bus, no PutMetricData.
    Sweep(JOB_AGENT_METRICS_SNAPSHOT, "AgentMetricsSnapshot", "agent_metrics_snapshot", False),
)


class SagaSweeps(Construct):
    """`.bus`, and per job name: `.functions[job]`, `.schedules[job]`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: SagaFunctions,
        event_bus_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.bus: events.IEventBus
        if event_bus_name is None:
            self.bus = events.EventBus(
                self, "Bus", description="Renewal-saga sweep findings (propflow.renewal-saga)"
            )
        else:
            self.bus = events.EventBus.from_event_bus_name(self, "Bus", event_bus_name)
        cdk.CfnOutput(
            self,
            "EventBusName",
            value=self.bus.event_bus_name,
            description="EventBridge bus the renewal-saga sweeps publish their findings to",
        )
        table = functions.table
        self.functions: dict[str, lambda_.Function] = {}
        self.schedules: dict[str, ScheduledInvocation] = {}
        for sweep in SWEEPS:
            job = JOBS_BY_NAME[sweep.job_name]
            environment = {ENV_EVENT_BUS: self.bus.event_bus_name} if sweep.emits_events else {}
            fn = functions.function(
                sweep.construct_id,
                handler=f"{HANDLER_MODULE}.{sweep.handler}",
                description=f"{job.name}: {job.description}",
                service=job.name,
                # Under a throttled enumeration botocore's retries can take well over a minute;
                # a run must still end before the next one of the fastest (5-minute) schedule.
                timeout=cdk.Duration.minutes(3),
                environment=environment,
                reserved_concurrent_executions=1,
            )
            table.grant_index_query(fn)
            if sweep.emits_events:
                self.bus.grant_put_events_to(fn)
            if sweep.claims_retries:
                table.grant_saga_row_update(fn)
            self.functions[job.name] = fn
            self.schedules[job.name] = ScheduledInvocation(
                self, f"{sweep.construct_id}Schedule", job_name=job.name, function=fn
            )
