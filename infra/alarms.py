"""Alarms that page, through ONE SNS topic, and the dashboard on-call opens first.

docs/observability.md is the on-call guide: what each alarm means and what to do first.

The pager topic is encrypted with a customer-managed KMS key, not the AWS-managed alias/aws/sns:
CloudWatch alarms cannot publish to a topic under the AWS-managed key (its key policy cannot
grant the CloudWatch service), so the alarms would fire into nothing. Its policy denies any
request not made over TLS (enforce_ssl).

Which alarms page depends on the migration phase (context `phase`), decided at synth time. A
phase change flips alarm ACTIONS only; every alarm exists in every phase, so nothing is created
or deleted by a phase change and an informational alarm still shows its state on the dashboard.

  alarm                  pages in                 informational in
  LegacyRows > 0         sharded                  legacy, migrating, rolling-back (expected)
  ShardedRows > 0        legacy                   migrating, sharded, rolling-back (expected)
  MisroutedRows > 0      every phase
  UnindexedRows > 0      every phase
  StrayRows > 0          every phase
  DriftGuardErrors > 0   every phase
  GsiThrottles > 0       migrating, sharded       legacy, rolling-back (the known hot key)

Missing data: the guard publishes every metric on every run, zeros included, so missing data
means the guard stopped; its alarms treat missing data as BREACHING. The every-run metrics use
5-minute periods, 2 of 3 to alarm: one late or failed run does not page, a stopped guard pages
within 15 minutes. UnindexedRows / StrayRows come only from the every-K-th-run scan: their period
is TWO scan intervals (Maximum), so every period holds at least one scan even when one is late;
no scan for two intervals pages. Throttle and error metrics exist only when something happens:
missing data is NOT breaching for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import PHASES, StackConfig
from infra.drift import DriftGuard
from infra.functions import METRICS_NAMESPACE
from infra.sweeps import SagaSweeps
from saga_index import drift
from saga_index.watch import (
    ALARM_THROTTLE_METRICS,
    CONTEXT_OPERATIONS,
    DIMENSION_GSI,
    DYNAMODB_NAMESPACE,
    INDEX_THROTTLE_METRICS,
    TABLE_THROTTLED_REQUESTS,
)

ALL_PHASES = frozenset(PHASES)
GUARD_PERIOD = cdk.Duration.minutes(5)
GUARD_EVALUATION_PERIODS = 3
GUARD_DATAPOINTS_TO_ALARM = 2
SHARDS_PER_WIDGET = 64  # CloudWatch draws at most a few hundred series per graph

# Metrics other functions publish (same namespace, dimensions service + TableName + IndexName).
BACKFILL_SERVICE = "backfill-worker"
BACKFILL_METRICS = ("Restamped", "Skipped", "Anomalies")
SWEEP_SERVICES = (
    "workflow-health-sweep",
    "retry-failed-prepare",
    "stuck-saga-sweep",
    "agent-metrics-snapshot",
)
SWEEP_FINDINGS: tuple[tuple[str, str], ...] = (
    ("workflow-health-sweep", "SagaWorkflowUnhealthy"),
    ("retry-failed-prepare", "SagaPrepareRetryRequested"),
    ("retry-failed-prepare", "SagaPrepareRetriesExhausted"),
    ("stuck-saga-sweep", "SagaStuck"),
)


@dataclass(frozen=True)
class GuardAlarm:
    """An alarm on one drift-guard metric: > 0 is drift, missing data is a stopped guard."""

    construct_id: str
    metric_name: str
    pages_in: frozenset[str]
    scan_only: bool
    description: str


GUARD_ALARMS: tuple[GuardAlarm, ...] = (
    GuardAlarm(
        "LegacyRows",
        drift.METRIC_LEGACY_ROWS,
        frozenset({"sharded"}),
        False,
        "Saga rows still carry the legacy GSI4PK while readers read only the shards: "
        "those sagas are invisible. docs/observability.md#legacyrows",
    ),
    GuardAlarm(
        "ShardedRows",
        drift.METRIC_SHARDED_ROWS,
        frozenset({"legacy"}),
        False,
        "Saga rows carry a sharded GSI4PK while readers read only the legacy partition: "
        "a writer is ahead of the phase. docs/observability.md#shardedrows",
    ),
    GuardAlarm(
        "MisroutedRows",
        drift.METRIC_MISROUTED_ROWS,
        ALL_PHASES,
        False,
        "Saga rows sit under a shard other than shard(personId): by-person reads miss them. "
        "docs/observability.md#misroutedrows",
    ),
    GuardAlarm(
        "UnindexedRows",
        drift.METRIC_UNINDEXED_ROWS,
        ALL_PHASES,
        True,
        "Saga rows without GSI4PK/GSI4SK are in no index partition: every read misses them. "
        "docs/observability.md#unindexedrows",
    ),
    GuardAlarm(
        "StrayRows",
        drift.METRIC_STRAY_ROWS,
        ALL_PHASES,
        True,
        "Saga rows carry a GSI4PK outside the legacy key and the N shard keys: no enumeration "
        "reads them. docs/observability.md#strayrows",
    ),
)
THROTTLE_PAGES_IN = frozenset({"migrating", "sharded"})
GUARD_ERRORS_PAGES_IN = ALL_PHASES


class Observability(Construct):
    """`.topic` (the pager), `.alarms` by construct id, `.dashboard`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: StackConfig,
        table: dynamodb.ITable,
        index_name: str,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
    ) -> None:
        super().__init__(scope, construct_id)
        self.config = config
        self.table = table
        self.index_name = index_name
        self.drift_guard = drift_guard
        self.topic = self._pager_topic(config)
        self.alarms: dict[str, cw.Alarm] = {}
        self.paging: dict[str, bool] = {}

        for spec in GUARD_ALARMS:
            period = (
                cdk.Duration.minutes(drift_guard.scan_interval.to_minutes() * 2)
                if spec.scan_only
                else GUARD_PERIOD
            )
            self._alarm(
                spec.construct_id,
                metric=self.guard_metric(spec.metric_name, period=period),
                pages=config.phase in spec.pages_in,
                description=spec.description,
                treat_missing_data=cw.TreatMissingData.BREACHING,
                evaluation_periods=1 if spec.scan_only else GUARD_EVALUATION_PERIODS,
                datapoints_to_alarm=1 if spec.scan_only else GUARD_DATAPOINTS_TO_ALARM,
            )
        self._alarm(
            "DriftGuardErrors",
            metric=drift_guard.function.metric_errors(period=GUARD_PERIOD, statistic="Sum"),
            pages=config.phase in GUARD_ERRORS_PAGES_IN,
            description="The drift guard failed: a read or the scan could not complete after "
            "retries. docs/observability.md#driftguarderrors",
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self._scheduled_job_alarms(drift_guard, sweeps)
        throttles = {
            f"m{n}": self.index_metric(name) for n, name in enumerate(ALARM_THROTTLE_METRICS)
        }
        self._alarm(
            "GsiThrottles",
            metric=cw.MathExpression(
                # SUM over the array ignores a series with no datapoint in the period (DynamoDB
                # publishes a throttle metric only when something throttles).
                expression=f"SUM([{', '.join(throttles)}])",
                using_metrics=throttles,
                label="GSI throttle events",
                period=GUARD_PERIOD,
            ),
            pages=config.phase in THROTTLE_PAGES_IN,
            description="The renewal-saga GSI throttled (read, write or hot key range): the "
            "watch-window signal. docs/observability.md#gsithrottles",
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.dashboard = self._dashboard()
        cdk.CfnOutput(
            self,
            "PagerTopicArn",
            value=self.topic.topic_arn,
            description="SNS topic every renewal-saga-index alarm pages through",
        )
        cdk.CfnOutput(
            self,
            "DashboardName",
            value=self.dashboard.dashboard_name,
            description="CloudWatch dashboard of the renewal-saga index",
        )

    # ---- metrics -------------------------------------------------------------------------------

    def _service_dimensions(self, service: str) -> dict[str, str]:
        return {
            "service": service,
            drift.DIMENSION_TABLE: self.table.table_name,
            drift.DIMENSION_INDEX: self.index_name,
        }

    def guard_metric(
        self,
        metric_name: str,
        *,
        period: cdk.Duration = GUARD_PERIOD,
        statistic: str = "Maximum",
        extra_dimensions: dict[str, str] | None = None,
    ) -> cw.Metric:
        return self.service_metric(
            drift.DRIFT_GUARD_SERVICE,
            metric_name,
            period=period,
            statistic=statistic,
            extra_dimensions=extra_dimensions,
        )

    def service_metric(
        self,
        service: str,
        metric_name: str,
        *,
        period: cdk.Duration = GUARD_PERIOD,
        statistic: str = "Sum",
        extra_dimensions: dict[str, str] | None = None,
        label: str | None = None,
    ) -> cw.Metric:
        return cw.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={**self._service_dimensions(service), **(extra_dimensions or {})},
            statistic=statistic,
            period=period,
            label=label,
        )

    def index_metric(self, metric_name: str, *, period: cdk.Duration = GUARD_PERIOD) -> cw.Metric:
        return cw.Metric(
            namespace=DYNAMODB_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={
                drift.DIMENSION_TABLE: self.table.table_name,
                DIMENSION_GSI: self.index_name,
            },
            statistic="Sum",
            period=period,
        )

    # ---- the pager -----------------------------------------------------------------------------

    def _pager_topic(self, config: StackConfig) -> sns.Topic:
        stack = cdk.Stack.of(self)
        key = kms.Key(
            self,
            "PagerKey",
            description="Encrypts the renewal-saga-index pager topic (CloudWatch may use it)",
            enable_key_rotation=True,
        )
        cloudwatch = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublishToThePager",
                principals=[cloudwatch],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
            )
        )
        topic = sns.Topic(
            self,
            "Pager",
            display_name="Renewal saga index pager",
            master_key=key,
            enforce_ssl=True,
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsOfThisAccount",
                principals=[cloudwatch],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                },
            )
        )
        if config.pager_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.pager_email))
        if config.pager_https_url:
            topic.add_subscription(
                subscriptions.UrlSubscription(
                    config.pager_https_url, protocol=sns.SubscriptionProtocol.HTTPS
                )
            )
        return topic

    def _alarm(
        self,
        construct_id: str,
        *,
        metric: cw.IMetric,
        pages: bool,
        description: str,
        treat_missing_data: cw.TreatMissingData,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int = 1,
    ) -> cw.Alarm:
        mode = "PAGES" if pages else f"informational in phase {self.config.phase}"
        alarm = cw.Alarm(
            self,
            f"{construct_id}Alarm",
            metric=metric,
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            treat_missing_data=treat_missing_data,
            alarm_description=f"[{mode}] {description}",
        )
        if pages:
            action = cw_actions.SnsAction(self.topic)
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.alarms[construct_id] = alarm
        self.paging[construct_id] = pages
        return alarm

    def _scheduled_job_alarms(self, drift_guard: DriftGuard, sweeps: SagaSweeps) -> None:
        """A sweep that fails never acts on a partial list, so its failure must reach a human:
        the schedule invokes asynchronously, so function errors show in the function's Errors
        metric, and invocations Scheduler could not deliver land in the job's dead-letter queue.
        Both page in every phase."""
        for job_name, function in sweeps.functions.items():
            self._alarm(
                f"{_pascal(job_name)}Errors",
                metric=function.metric_errors(period=GUARD_PERIOD, statistic="Sum"),
                pages=True,
                description=f"The {job_name} failed (it acts on nothing when it cannot read "
                "every saga). docs/observability.md#sweep-failures",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
        schedules = {**sweeps.schedules, drift_guard.job.name: drift_guard.schedule}
        for job_name, invocation in schedules.items():
            queue = invocation.dead_letter_queue
            self._alarm(
                f"{_pascal(job_name)}DeadLetters",
                metric=queue.metric_approximate_number_of_messages_visible(
                    period=GUARD_PERIOD, statistic="Maximum"
                ),
                pages=True,
                description=f"Scheduler could not invoke the {job_name} after its retries; "
                "the undelivered events wait in its dead-letter queue. "
                "docs/observability.md#sweep-failures",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )

    # ---- the dashboard -------------------------------------------------------------------------

    def _dashboard(self) -> cw.Dashboard:
        stack = cdk.Stack.of(self)
        name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{stack.stack_name}-{self.config.table_name}")
        dashboard = cw.Dashboard(
            self,
            "Dashboard",
            dashboard_name=name[:255],
            default_interval=cdk.Duration.days(1),
        )
        shards = self.config.shard_count
        dashboard.add_widgets(
            cw.TextWidget(
                markdown=(
                    f"# Renewal-saga index ({self.config.table_name})\n"
                    f"Phase **{self.config.phase}**, N = **{shards}** shards. "
                    "On-call guide: `docs/observability.md`. Drift metrics come from the "
                    f"`{drift.DRIFT_GUARD_SERVICE}` function every 5 minutes; the base-table scan "
                    f"every {self.drift_guard.scan_every} runs."
                ),
                width=24,
                height=2,
            ),
            cw.AlarmStatusWidget(
                title="Alarms (paging and informational)",
                alarms=list(self.alarms.values()),
                width=24,
                height=3,
            ),
        )
        dashboard.add_widgets(
            self._graph(
                "Legacy rows (GSI4PK = legacy key) and sharded rows",
                [
                    self.guard_metric(drift.METRIC_LEGACY_ROWS),
                    self.guard_metric(drift.METRIC_SHARDED_ROWS),
                ],
            ),
            self._graph(
                "Misrouted, unindexed and stray rows",
                [
                    self.guard_metric(drift.METRIC_MISROUTED_ROWS),
                    self.guard_metric(drift.METRIC_UNINDEXED_ROWS, period=cdk.Duration.hours(1)),
                    self.guard_metric(drift.METRIC_STRAY_ROWS, period=cdk.Duration.hours(1)),
                    self.guard_metric(drift.METRIC_ANOMALOUS_ROWS),
                ],
            ),
        )
        shard_widgets: list[cw.IWidget] = []
        for first in range(0, shards, SHARDS_PER_WIDGET):
            last = min(shards, first + SHARDS_PER_WIDGET) - 1
            shard_widgets.append(
                self._graph(
                    f"Rows per shard ({first}..{last})",
                    [
                        self.guard_metric(
                            drift.METRIC_ROWS_PER_SHARD,
                            extra_dimensions={drift.DIMENSION_SHARD: str(n)},
                        ).with_(label=f"shard {n}")
                        for n in range(first, last + 1)
                    ],
                    stacked=True,
                )
            )
        shard_widgets.append(
            self._graph("Shard skew (max / mean)", [self.guard_metric(drift.METRIC_SHARD_SKEW)])
        )
        dashboard.add_widgets(*shard_widgets)
        dashboard.add_widgets(
            cw.GraphWidget(
                title="GSI throttle events (left) and table ThrottledRequests (right)",
                left=[self.index_metric(name) for name in INDEX_THROTTLE_METRICS],
                right=[
                    cw.Metric(
                        namespace=DYNAMODB_NAMESPACE,
                        metric_name=TABLE_THROTTLED_REQUESTS,
                        dimensions_map={
                            drift.DIMENSION_TABLE: self.table.table_name,
                            "Operation": operation,
                        },
                        statistic="Sum",
                        period=GUARD_PERIOD,
                        label=f"ThrottledRequests {operation}",
                    )
                    for operation in CONTEXT_OPERATIONS
                ],
                width=24,
                height=6,
            ),
        )
        dashboard.add_widgets(
            self._graph(
                "Backfill progress (rows per 5 min)",
                [self.service_metric(BACKFILL_SERVICE, name) for name in BACKFILL_METRICS],
            ),
            self._graph(
                "Sweep findings",
                [
                    self.service_metric(service, name, label=f"{name} ({service})")
                    for service, name in SWEEP_FINDINGS
                ],
            ),
        )
        dashboard.add_widgets(
            self._graph(
                "Sweep duration (max)",
                self._per_sweep("SweepDuration", statistic="Maximum"),
            ),
            self._graph(
                "Sagas read per sweep run (max)",
                self._per_sweep("SagasRead", statistic="Maximum"),
            ),
        )
        return dashboard

    def _per_sweep(self, metric_name: str, *, statistic: str) -> list[cw.IMetric]:
        return [
            self.service_metric(service, metric_name, statistic=statistic, label=service)
            for service in SWEEP_SERVICES
        ]

    @staticmethod
    def _graph(
        title: str, metrics: Sequence[cw.IMetric] | Iterable[cw.IMetric], *, stacked: bool = False
    ) -> cw.GraphWidget:
        return cw.GraphWidget(title=title, left=list(metrics), width=12, height=6, stacked=stacked)


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids)."""
    return "".join(part.title() for part in job_name.split("-"))
