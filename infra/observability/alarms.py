"""The alarms: every one pages through the pager, in every migration state.

docs/observability.md is the on-call guide: what each alarm means and what to do first.

Nothing here depends on the migration state: the drift guard reads the control record and
publishes what is wrong NOW against it, so each alarm watches a count that is 0 whenever all is
well, whatever the phase (the raw LegacyRows / ShardedRows counts, whose meaning depends on the
phase, are on the dashboard only). A phase change is a write to the control record, never a
deploy, and changes no alarm.

  alarm                   > 0 means
  UnexpectedLegacyRows    rows on the legacy key while no layout of the state is legacy
  UnexpectedShardedRows   rows on a shard key no layout of the state reads
  MisroutedRows           rows on a readable shard key that is not theirs in any layout
  UnindexedRows           saga rows without GSI4PK/GSI4SK (the scan)
  StrayRows               rows under a GSI4PK that is no legacy or shard key (the scan)
  ControlRecordMissing    the STATE item is gone while its history exists
  DriftGuardErrors        the guard failed
  GsiThrottles            the index throttled (the watch-window signal)
  <sweep>Errors, <job>DeadLetters   a sweep failed / a scheduled invocation was not delivered
  <job>FailedInvocations  Lambda gave up on a scheduled invocation (failed or too old)
  BackfillExecutionsFailed, ...TimedOut, ...Aborted   a backfill execution ended without success

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

from infra.backfill import SagaBackfill
from infra.drift import DriftGuard
from infra.observability.metrics import GUARD_PERIOD, SagaMetrics
from infra.observability.pager import Pager
from infra.sweeps import SagaSweeps
from saga_index.names import (
    ALARM_THROTTLE_METRICS,
    METRIC_CONTROL_RECORD_MISSING,
    METRIC_MISROUTED_ROWS,
    METRIC_STRAY_ROWS,
    METRIC_UNEXPECTED_LEGACY_ROWS,
    METRIC_UNEXPECTED_SHARDED_ROWS,
    METRIC_UNINDEXED_ROWS,
)

GUARD_EVALUATION_PERIODS = 3
GUARD_DATAPOINTS_TO_ALARM = 2


@dataclass(frozen=True)
class GuardAlarm:
    """An alarm on one of the drift guard's wrong-now metrics: > 0 is wrong in the current
    state, missing data is a stopped guard."""

    construct_id: str
    metric_name: str
    scan_only: bool
    description: str


GUARD_ALARMS: tuple[GuardAlarm, ...] = (
    GuardAlarm(
        "UnexpectedLegacyRows",
        METRIC_UNEXPECTED_LEGACY_ROWS,
        False,
        "Saga rows carry the legacy GSI4PK while no layout of the migration state is legacy: "
        "readers do not read that partition, those sagas are invisible. "
        "docs/observability.md#unexpectedlegacyrows",
    ),
    GuardAlarm(
        "UnexpectedShardedRows",
        METRIC_UNEXPECTED_SHARDED_ROWS,
        False,
        "Saga rows carry a shard GSI4PK no layout of the migration state reads (any shard key "
        "while legacy; a key outside 0..N-1): a writer does not follow the control record. "
        "docs/observability.md#unexpectedshardedrows",
    ),
    GuardAlarm(
        "MisroutedRows",
        METRIC_MISROUTED_ROWS,
        False,
        "Saga rows sit on a shard key that is not their person's in any layout of the state: "
        "by-person reads miss them. docs/observability.md#misroutedrows",
    ),
    GuardAlarm(
        "ControlRecordMissing",
        METRIC_CONTROL_RECORD_MISSING,
        False,
        "The control record's STATE item is gone while its history exists: services follow "
        "the newest history item, phase changes and backfills are refused until it is "
        "restored. "
        "docs/observability.md#controlrecordmissing",
    ),
    GuardAlarm(
        "UnindexedRows",
        METRIC_UNINDEXED_ROWS,
        True,
        "Saga rows without GSI4PK/GSI4SK are in no index partition: every read misses them. "
        "docs/observability.md#unindexedrows",
    ),
    GuardAlarm(
        "StrayRows",
        METRIC_STRAY_ROWS,
        True,
        "Saga rows carry a GSI4PK outside the legacy key and the shard keys: no enumeration "
        "reads them. docs/observability.md#strayrows",
    ),
)


class Alarms:
    """`.alarms` by construct id, added to `scope`; each pages through the pager."""

    def __init__(
        self,
        scope: Construct,
        *,
        metrics: SagaMetrics,
        pager: Pager,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
        backfill: SagaBackfill,
    ) -> None:
        self._scope = scope
        self._action = cw_actions.SnsAction(pager.topic)
        self.alarms: dict[str, cw.Alarm] = {}

        for spec in GUARD_ALARMS:
            period = (
                cdk.Duration.minutes(drift_guard.scan_interval.to_minutes() * 2)
                if spec.scan_only
                else GUARD_PERIOD
            )
            self._alarm(
                spec.construct_id,
                metric=metrics.guard(spec.metric_name, period=period),
                description=spec.description,
                treat_missing_data=cw.TreatMissingData.BREACHING,
                evaluation_periods=1 if spec.scan_only else GUARD_EVALUATION_PERIODS,
                datapoints_to_alarm=1 if spec.scan_only else GUARD_DATAPOINTS_TO_ALARM,
            )
        self._alarm(
            "DriftGuardErrors",
            metric=drift_guard.function.metric_errors(period=GUARD_PERIOD, statistic="Sum"),
            description="The drift guard failed: a read or the scan could not complete after "
            "retries. docs/observability.md#driftguarderrors",
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self._scheduled_job_alarms(drift_guard, sweeps)
        self._backfill_alarms(backfill)
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
            description="The renewal-saga GSI throttled (read, write or hot key range): the "
            "watch-window signal. docs/observability.md#gsithrottles",
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _alarm(
        self,
        construct_id: str,
        *,
        metric: cw.IMetric,
        description: str,
        treat_missing_data: cw.TreatMissingData,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int = 1,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self._scope,
            f"{construct_id}Alarm",
            metric=metric,
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            treat_missing_data=treat_missing_data,
            alarm_description=description,
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms[construct_id] = alarm
        return alarm

    def _scheduled_job_alarms(self, drift_guard: DriftGuard, sweeps: SagaSweeps) -> None:
        """A sweep that fails never acts on a partial list, so its failure must reach a human:
        the schedule invokes asynchronously, so function errors show in the function's Errors
        metric, and invocations Scheduler could not deliver land in the job's dead-letter queue."""
        for job_name, function in sweeps.functions.items():
            self._alarm(
                f"{_pascal(job_name)}Errors",
                metric=function.metric_errors(period=GUARD_PERIOD, statistic="Sum"),
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
                description=f"Scheduler could not invoke the {job_name} after its retries; "
                "the undelivered events wait in its dead-letter queue. "
                "docs/observability.md#sweep-failures",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            self._alarm(
                f"{_pascal(job_name)}FailedInvocations",
                metric=invocation.failure_queue.metric_approximate_number_of_messages_visible(
                    period=GUARD_PERIOD, statistic="Maximum"
                ),
                description=f"Lambda gave up on an invocation of the {job_name}: it failed "
                "(no retries: the next firing repeats the work) or waited longer than the "
                "job's period; the event waits in the job's failed-invocations queue. "
                "docs/observability.md#sweep-failures",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )

    def _backfill_alarms(self, backfill: SagaBackfill) -> None:
        """An execution that ends without success pages (AWS/States, per state machine ARN).
        Step Functions publishes these only when an execution ends so: missing data is fine."""
        machine = backfill.state_machine
        for construct_id, metric, what in (
            ("BackfillExecutionsFailed", machine.metric_failed, "failed"),
            ("BackfillExecutionsTimedOut", machine.metric_timed_out, "timed out"),
            ("BackfillExecutionsAborted", machine.metric_aborted, "was aborted (stopped)"),
        ):
            self._alarm(
                construct_id,
                metric=metric(period=GUARD_PERIOD, statistic="Sum"),
                description=f"A backfill execution {what}: the move is incomplete and its lease "
                "is held until it expires or is released. docs/observability.md#backfill-ended",
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids)."""
    return "".join(part.title() for part in job_name.split("-"))
