"""The alarms: what pages (through the pager) and what only shows its state on the dashboard.

docs/observability.md is the on-call guide: what each alarm means and what to do first.

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

from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from constructs import Construct

from infra.config import StackConfig
from infra.drift import DriftGuard
from infra.observability.metrics import GUARD_PERIOD, SagaMetrics
from infra.observability.pager import Pager
from infra.sweeps import SagaSweeps
from saga_index.names import (
    ALARM_THROTTLE_METRICS,
    METRIC_LEGACY_ROWS,
    METRIC_MISROUTED_ROWS,
    METRIC_SHARDED_ROWS,
    METRIC_STRAY_ROWS,
    METRIC_UNINDEXED_ROWS,
    PHASE_NAMES,
)

ALL_PHASES = frozenset(PHASE_NAMES)
GUARD_EVALUATION_PERIODS = 3
GUARD_DATAPOINTS_TO_ALARM = 2


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
        METRIC_LEGACY_ROWS,
        frozenset({"sharded"}),
        False,
        "Saga rows still carry the legacy GSI4PK while readers read only the shards: "
        "those sagas are invisible. docs/observability.md#legacyrows",
    ),
    GuardAlarm(
        "ShardedRows",
        METRIC_SHARDED_ROWS,
        frozenset({"legacy"}),
        False,
        "Saga rows carry a sharded GSI4PK while readers read only the legacy partition: "
        "a writer is ahead of the phase. docs/observability.md#shardedrows",
    ),
    GuardAlarm(
        "MisroutedRows",
        METRIC_MISROUTED_ROWS,
        ALL_PHASES,
        False,
        "Saga rows sit under a shard other than shard(personId): by-person reads miss them. "
        "docs/observability.md#misroutedrows",
    ),
    GuardAlarm(
        "UnindexedRows",
        METRIC_UNINDEXED_ROWS,
        ALL_PHASES,
        True,
        "Saga rows without GSI4PK/GSI4SK are in no index partition: every read misses them. "
        "docs/observability.md#unindexedrows",
    ),
    GuardAlarm(
        "StrayRows",
        METRIC_STRAY_ROWS,
        ALL_PHASES,
        True,
        "Saga rows carry a GSI4PK outside the legacy key and the N shard keys: no enumeration "
        "reads them. docs/observability.md#strayrows",
    ),
)
THROTTLE_PAGES_IN = frozenset({"migrating", "sharded"})
GUARD_ERRORS_PAGES_IN = ALL_PHASES


class Alarms:
    """`.alarms` and `.paging` (does it page in this phase?) by construct id, added to `scope`."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StackConfig,
        metrics: SagaMetrics,
        pager: Pager,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
    ) -> None:
        self._scope = scope
        self._phase = config.phase
        self._topic = pager.topic
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
                metric=metrics.guard(spec.metric_name, period=period),
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
        throttles = {f"m{n}": metrics.index(name) for n, name in enumerate(ALARM_THROTTLE_METRICS)}
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
        mode = "PAGES" if pages else f"informational in phase {self._phase}"
        alarm = cw.Alarm(
            self._scope,
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
            action = cw_actions.SnsAction(self._topic)
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


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids)."""
    return "".join(part.title() for part in job_name.split("-"))
