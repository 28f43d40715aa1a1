"""The four sweeps: their functions, their event bus, their schedules and their permissions.

The job spec (saga_index.index.jobs) lists them; the construct loops over its sweeps. Least
privilege, per function:
  - dynamodb:Query on the saga INDEX only (the enumeration reads nothing else);
  - events:PutEvents on the sweeps' bus, for the sweeps that emit events;
  - dynamodb:UpdateItem on the TABLE, for retry-failed-prepare only (its conditional claim), and
    only on saga rows (dynamodb:LeadingKeys like "RSAGA#*"). No attribute allow-list: the claim
    reads the whole old item back when its condition fails (ReturnValuesOnConditionCheckFailure
    ALL_OLD), which a dynamodb:Attributes restriction exists to forbid.
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
from infra.schedules import ScheduledInvocation
from saga_index.index.jobs import SWEEPS as SWEEP_SPECS
from saga_index.index.jobs import ScheduledJob
from saga_index.index.names import ENV_EVENT_BUS

# Under a throttled enumeration botocore's retries can take well over a minute; a run must still
# end before the next one of the fastest (5-minute) schedule.
SWEEP_TIMEOUT = cdk.Duration.minutes(3)


@dataclass(frozen=True)
class Sweep:
    """One sweep's row of the job spec, as this construct wires it."""

    job: ScheduledJob

    @property
    def job_name(self) -> str:
        return self.job.name

    @property
    def construct_id(self) -> str:
        return self.job.construct_id

    @property
    def handler(self) -> str:
        """The function's name in its handler module (handlers/sweeps.py)."""
        return self.job.handler.rpartition(".")[2]

    @property
    def emits_events(self) -> bool:
        return self.job.emits_events

    @property
    def claims_retries(self) -> bool:
        return self.job.claims_retries


SWEEPS: tuple[Sweep, ...] = tuple(Sweep(job) for job in SWEEP_SPECS)


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
            job = sweep.job
            environment = {ENV_EVENT_BUS: self.bus.event_bus_name} if job.emits_events else {}
            fn = functions.function(
                job.construct_id,
                handler=job.handler,
                description=f"{job.name}: {job.description}",
                service=job.name,
                timeout=SWEEP_TIMEOUT,
                environment=environment,
                reserved_concurrent_executions=1,
            )
            table.grant_index_query(fn)
            table.grant_open_index_query(fn)
            if job.emits_events:
                self.bus.grant_put_events_to(fn)
            if job.claims_retries:
                table.grant_saga_row_update(fn)
            self.functions[job.name] = fn
            self.schedules[job.name] = ScheduledInvocation(
                self, f"{job.construct_id}Schedule", job_name=job.name, function=fn
            )
