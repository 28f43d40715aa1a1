"""The alarms: every one pages through the pager, in every migration state.

docs/observability.md is the on-call guide: what each alarm means and what to do first. Each alarm
has a stable name, `<stack>-<name>` (`RenewalSagaIndex-LegacyRows`, ...), and a description that
an on-call engineer can act on without a checkout: what is wrong, the first command to run (with
the real table name), the Logs Insights saved query to open (queries.py) and the FULL URL of its
section of the guide (context `runbookBaseUrl`, infra/config.py).

Nothing here depends on the migration state: the drift guard reads the control record and
publishes what is wrong NOW against it, so each alarm watches a count that is 0 whenever all is
well, whatever the phase (the raw LegacyRows / ShardedRows counts, whose meaning depends on the
phase, are on the dashboard only). A phase change is a write to the control record, never a
deploy, and changes no alarm.

  alarm (metric)                          > 0 means
  LegacyRows (UnexpectedLegacyRows)       rows on the legacy key while no layout of the state is
                                          legacy
  ShardedRows (UnexpectedShardedRows)     rows on a shard key no layout of the state reads
  MisroutedRows                           rows on a readable shard key that is not theirs
  UnindexedRows                           saga rows without GSI4PK/GSI4SK (the scan)
  StrayRows                               rows under a GSI4PK that is no legacy or shard key
  OpenIndexMissingRows                    open sagas the open index misses while it is `open`;
                                          in `adding` (settled) only a wrong stamp (the scan's
                                          comparison)
  OpenIndexStrayRows                      rows in the open index (or stamped) that are no open
                                          saga, while it is `open` or `adding` (settled)
  (no alarm: OpenIndexUnstampedRows, the open sagas the open-index backfill has yet to stamp
  while it is `adding`: expected until it has run; on the dashboard's raw counts)
  ControlRecordMissing                    the STATE item is gone while its history exists
  DriftReadIncomplete                     no run of the guard completed its read for 90 minutes
                                          (or the guard published nothing): no verdict
  DriftGuardErrors                        the guard failed
  GsiThrottles                            the index throttled (the watch-window signal)
  <Job>Errors (the sweeps)                a sweep failed
  <Job>DeadLetters                        Scheduler could not deliver a scheduled invocation
  <Job>FailedInvocations                  Lambda gave up on a scheduled invocation
  BackfillExecutionsFailed, ...TimedOut, ...Aborted   a backfill execution ended without success
  BackfillPacePaused (PacePauses)         the backfill paused itself: DynamoDB answered an
                                          account limit or an on-demand maximum

Missing data: a read of the index that does not fit one run finishes across runs (the drift
cursor), and only the run that completes it publishes the wrong-now counts: the every-run
wrong-now alarms page on findings only (5-minute periods, 2 of 3; missing data is NOT breaching).
Every run publishes DriftReadIncomplete (1 while the read is unfinished, 0 with a verdict): its
alarm (Minimum, 18 periods of 18, missing data BREACHING) pages when no run completed a read for
90 minutes, or the guard published nothing for 90 minutes; DriftGuardErrors pages a failing guard
within 15 minutes. UnindexedRows / StrayRows and the OpenIndex* pair come only from the
every-K-th-run scan (the pair 0 while the open index is neither `open` nor settled
`adding`): their period
is TWO scan intervals (Maximum), so every period holds at least one scan even when one is late;
no scan for two intervals pages. Throttle and error metrics exist only when something happens:
missing data is NOT breaching for them.

The scheduled jobs (the sweeps and the drift guard) are idempotent and their next firing repeats
a failed run's work, so ONE failed run that the next repairs must not page: their Errors,
DeadLetters and FailedInvocations alarms use a period of the job's own schedule period (one
firing per period) and alarm on 2 of 3, i.e. on the second failed firing out of three. The
queues' alarms count ARRIVALS (NumberOfMessagesSent, Sum), not the queue depth: the depth stays
up until someone drains the queue, so M-of-N on it would filter nothing; the depth is on the
dashboard.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from constructs import Construct

from infra.backfill import SagaBackfill
from infra.config import StackConfig
from infra.drift import DriftGuard
from infra.observability.descriptions import (
    BACKFILL_OUTCOMES,
    BACKFILL_PACE_PAUSED,
    DRIFT_READ_INCOMPLETE,
    GUARD_ALARMS,
    Runbook,
    alarm_descriptions,
    job_alarm_name,
)
from infra.observability.metrics import GUARD_PERIOD, SagaMetrics
from infra.observability.pager import Pager
from infra.schedules import ScheduledInvocation
from infra.sweeps import SagaSweeps
from saga_index.index.jobs import JOBS_BY_NAME
from saga_index.index.names import (
    ALARM_THROTTLE_METRICS,
    METRIC_DRIFT_READ_INCOMPLETE,
    METRIC_PACE_PAUSES,
    SERVICE_BACKFILL_WORKER,
)

GUARD_EVALUATION_PERIODS = 3
GUARD_DATAPOINTS_TO_ALARM = 2
# Runs (5-minute periods) without a complete drift read before DriftReadIncomplete pages: 90
# minutes, more than the 13 runs without a verdict of a scanning read at 100x rows and history
# on the legacy key (14 runs: its index reads, then the base-table scan, each at its pace;
# bench/layouts_drift.py), so a read that is on its way does not page.
DRIFT_READ_RUNS = 18
# The scheduled jobs' failure alarms: the second failed firing out of three pages.
JOB_EVALUATION_PERIODS = 3
JOB_DATAPOINTS_TO_ALARM = 2


class Alarms:
    """`.alarms` by stable name (`LegacyRows`, ...), added to `scope`; each pages through the
    pager and is named `<stack>-<name>`."""

    def __init__(
        self,
        scope: Construct,
        *,
        config: StackConfig,
        metrics: SagaMetrics,
        pager: Pager,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
        backfill: SagaBackfill,
    ) -> None:
        self._scope = scope
        self._metrics = metrics
        self._prefix = f"{cdk.Stack.of(scope).stack_name}-"
        self._action = cw_actions.SnsAction(pager.topic)
        self.alarms: dict[str, cw.Alarm] = {}
        schedules: dict[str, ScheduledInvocation] = {
            **sweeps.schedules,
            drift_guard.job.name: drift_guard.schedule,
        }
        queues = {
            (job, kind): queue.queue_url
            for job, invocation in schedules.items()
            for kind, queue in (
                ("DeadLetters", invocation.dead_letter_queue),
                ("FailedInvocations", invocation.failure_queue),
            )
        }
        self.descriptions = alarm_descriptions(
            Runbook(config.runbook_base_url, config.table_name),
            sweep_jobs=list(sweeps.functions),
            scheduled_jobs=list(schedules),
            queue_url=lambda job, kind: queues[(job, kind)],
        )

        for spec in GUARD_ALARMS:
            period = (
                cdk.Duration.minutes(drift_guard.scan_interval.to_minutes() * 2)
                if spec.scan_only
                else GUARD_PERIOD
            )
            self._alarm(
                spec.name,
                spec.construct_id,
                metric=metrics.guard(spec.metric_name, period=period),
                # Only a complete read publishes the every-run counts (DriftReadIncomplete
                # watches for a guard that stopped); the scan's come from the scanning runs.
                treat_missing_data=(
                    cw.TreatMissingData.BREACHING
                    if spec.scan_only
                    else cw.TreatMissingData.NOT_BREACHING
                ),
                evaluation_periods=1 if spec.scan_only else GUARD_EVALUATION_PERIODS,
                datapoints_to_alarm=1 if spec.scan_only else GUARD_DATAPOINTS_TO_ALARM,
            )
        self._alarm(
            DRIFT_READ_INCOMPLETE,
            DRIFT_READ_INCOMPLETE,
            # Minimum: one run in the period that completed the read makes it 0.
            metric=metrics.guard(METRIC_DRIFT_READ_INCOMPLETE, statistic="Minimum"),
            treat_missing_data=cw.TreatMissingData.BREACHING,
            evaluation_periods=DRIFT_READ_RUNS,
            datapoints_to_alarm=DRIFT_READ_RUNS,
        )
        self._scheduled_job_alarms(drift_guard, sweeps, schedules)
        self._backfill_alarms(backfill)
        throttles = {f"m{n}": metrics.index(name) for n, name in enumerate(ALARM_THROTTLE_METRICS)}
        self._alarm(
            "GsiThrottles",
            "GsiThrottles",
            metric=cw.MathExpression(
                # SUM over the array ignores a series with no datapoint in the period (DynamoDB
                # publishes a throttle metric only when something throttles).
                expression=f"SUM([{', '.join(throttles)}])",
                using_metrics=throttles,
                label="GSI throttle events",
                period=GUARD_PERIOD,
            ),
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )

    def _alarm(
        self,
        name: str,
        construct_id: str,
        *,
        metric: cw.IMetric,
        treat_missing_data: cw.TreatMissingData,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int = 1,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self._scope,
            f"{construct_id}Alarm",
            alarm_name=f"{self._prefix}{name}",
            metric=metric,
            threshold=0,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            treat_missing_data=treat_missing_data,
            alarm_description=self.descriptions[name],
        )
        alarm.add_alarm_action(self._action)
        alarm.add_ok_action(self._action)
        self.alarms[name] = alarm
        return alarm

    def _scheduled_job_alarms(
        self,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
        schedules: dict[str, ScheduledInvocation],
    ) -> None:
        """A sweep that fails never acts on a partial list, so repeated failures must reach a
        human: the schedule invokes asynchronously, so function errors show in the function's
        Errors metric (and, with no retries, in its failed-invocations queue), and invocations
        Scheduler could not deliver land in the job's dead-letter queue. Each is counted per
        period of the job's schedule; two failed periods of three page."""
        functions = {**sweeps.functions, drift_guard.job.name: drift_guard.function}
        for job_name, function in functions.items():
            period = _job_period(job_name)
            name = job_alarm_name(job_name, "Errors")  # DriftGuardErrors for the guard
            self._alarm(
                name,
                name,
                metric=function.metric_errors(period=period, statistic="Sum"),
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                evaluation_periods=JOB_EVALUATION_PERIODS,
                datapoints_to_alarm=JOB_DATAPOINTS_TO_ALARM,
            )
        for job_name, invocation in schedules.items():
            period = _job_period(job_name)
            for kind, queue in (
                ("DeadLetters", invocation.dead_letter_queue),
                ("FailedInvocations", invocation.failure_queue),
            ):
                name = job_alarm_name(job_name, kind)
                self._alarm(
                    name,
                    name,
                    # Arrivals, not depth: Scheduler and Lambda's on-failure destination both
                    # call SendMessage, which NumberOfMessagesSent counts.
                    metric=queue.metric_number_of_messages_sent(period=period, statistic="Sum"),
                    treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                    evaluation_periods=JOB_EVALUATION_PERIODS,
                    datapoints_to_alarm=JOB_DATAPOINTS_TO_ALARM,
                )

    def _backfill_alarms(self, backfill: SagaBackfill) -> None:
        """An execution that ends without success pages (AWS/States, per state machine ARN).
        Step Functions publishes these only when an execution ends so: missing data is fine."""
        machine = backfill.state_machine
        metrics = {
            "BackfillExecutionsFailed": machine.metric_failed,
            "BackfillExecutionsTimedOut": machine.metric_timed_out,
            "BackfillExecutionsAborted": machine.metric_aborted,
        }
        for name, _ in BACKFILL_OUTCOMES:
            self._alarm(
                name,
                name,
                metric=metrics[name](period=GUARD_PERIOD, statistic="Sum"),
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
        # The worker publishes PacePauses only from invocations that ran: missing data is fine.
        self._alarm(
            BACKFILL_PACE_PAUSED,
            BACKFILL_PACE_PAUSED,
            metric=self._metrics.service(SERVICE_BACKFILL_WORKER, METRIC_PACE_PAUSES),
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )


def _job_period(job_name: str) -> cdk.Duration:
    """One firing of the job per period, so M of N counts failed firings."""
    return cdk.Duration.minutes(JOBS_BY_NAME[job_name].period_minutes)
