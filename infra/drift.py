"""The drift guard: its function, its schedule (the "drift-guard" row of SCHEDULED_JOBS), and
exactly the permissions its checks need.

Least privilege:
  - dynamodb:Query on the saga INDEX (the legacy COUNT query and the N shard reads);
  - dynamodb:Scan on the TABLE (the every-K-th-run scan for rows missing from the index).
Metrics leave through the function's log (EMF), so no cloudwatch:PutMetricData. Besides these,
the role carries only what SagaFunctions gives every function (its own log group, X-Ray).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.functions import SagaFunctions
from infra.schedules import JOBS_BY_NAME, ScheduledInvocation
from infra.table import index_arn
from saga_index.drift import DEFAULT_SCAN_EVERY, DRIFT_GUARD_SERVICE, validate_scan_every

JOB_NAME = DRIFT_GUARD_SERVICE  # the schedule row and the Powertools service are one name
HANDLER = "handlers.drift_guard.handler"
# Environment names read by lambdas/handlers/drift_guard.py (DriftGuardSettings).
ENV_SCAN_EVERY = "DRIFT_SCAN_EVERY"
ENV_PERIOD_MINUTES = "DRIFT_GUARD_PERIOD_MINUTES"
ENV_SCAN_SEGMENTS = "DRIFT_SCAN_SEGMENTS"
ENV_SCAN_RATE = "DRIFT_SCAN_READ_UNITS_PER_SECOND"


class DriftGuard(Construct):
    """`.function`, `.schedule`, `.job`, and `.scan_every` (K) for the alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: SagaFunctions,
        table: dynamodb.ITable,
        index_name: str,
        scan_every: int = DEFAULT_SCAN_EVERY,
        scan_segments: int = 4,
        scan_read_units_per_second: int = 400,
    ) -> None:
        super().__init__(scope, construct_id)
        self.job = JOBS_BY_NAME[JOB_NAME]
        self.scan_every = validate_scan_every(scan_every)
        # A run must end before the next one starts: the period is 5 minutes.
        timeout = cdk.Duration.minutes(max(1, self.job.period_minutes - 1))
        self.function = functions.function(
            "DriftGuard",
            handler=HANDLER,
            description=f"{self.job.name}: {self.job.description}",
            service=self.job.name,
            timeout=timeout,
            memory_size=512,
            environment={
                ENV_SCAN_EVERY: str(self.scan_every),
                ENV_PERIOD_MINUTES: str(self.job.period_minutes),
                ENV_SCAN_SEGMENTS: str(scan_segments),
                ENV_SCAN_RATE: str(scan_read_units_per_second),
            },
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Query"], resources=[index_arn(table, index_name)]
            )
        )
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:Scan"], resources=[table.table_arn])
        )
        self.schedule = ScheduledInvocation(
            self, "Schedule", job_name=self.job.name, function=self.function
        )

    @property
    def scan_interval(self) -> cdk.Duration:
        """Time between two base-table scans (K runs of the schedule)."""
        return cdk.Duration.minutes(self.job.period_minutes * self.scan_every)
