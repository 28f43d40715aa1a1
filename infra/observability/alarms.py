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
  ControlRecordMissing                    the STATE item is gone while its history exists
  DriftGuardErrors                        the guard failed
  GsiThrottles                            the index throttled (the watch-window signal)
  <Job>Errors (the sweeps)                a sweep failed
  <Job>DeadLetters                        Scheduler could not deliver a scheduled invocation
  <Job>FailedInvocations                  Lambda gave up on a scheduled invocation
  BackfillExecutionsFailed, ...TimedOut, ...Aborted   a backfill execution ended without success

Missing data: the guard publishes every metric on every run, zeros included, so missing data
means the guard stopped; its alarms treat missing data as BREACHING. The every-run metrics use
5-minute periods, 2 of 3 to alarm: one late or failed run does not page, a stopped guard pages
within 15 minutes. UnindexedRows / StrayRows come only from the every-K-th-run scan: their period
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

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from constructs import Construct

from infra.backfill import SagaBackfill
from infra.config import StackConfig
from infra.drift import DriftGuard
from infra.observability import queries
from infra.observability.metrics import GUARD_PERIOD, SagaMetrics
from infra.observability.pager import Pager
from infra.schedules import JOBS_BY_NAME, ScheduledInvocation
from infra.sweeps import SagaSweeps
from saga_index.index.names import (
    ALARM_THROTTLE_METRICS,
    JOB_DRIFT_GUARD,
    METRIC_CONTROL_RECORD_MISSING,
    METRIC_MISROUTED_ROWS,
    METRIC_STRAY_ROWS,
    METRIC_UNEXPECTED_LEGACY_ROWS,
    METRIC_UNEXPECTED_SHARDED_ROWS,
    METRIC_UNINDEXED_ROWS,
)

GUARD_EVALUATION_PERIODS = 3
GUARD_DATAPOINTS_TO_ALARM = 2
# The scheduled jobs' failure alarms: the second failed firing out of three pages.
JOB_EVALUATION_PERIODS = 3
JOB_DATAPOINTS_TO_ALARM = 2
# CloudWatch's limit on AlarmDescription.
MAX_DESCRIPTION_CHARS = 1024
# The on-call guide's page under runbookBaseUrl.
GUIDE_PAGE = "observability.md"


@dataclass(frozen=True)
class Runbook:
    """Where the guide lives and which table the commands name: the parts of every
    description that come from the configuration."""

    base_url: str
    table_name: str

    def url(self, anchor: str) -> str:
        return f"{self.base_url}/{GUIDE_PAGE}#{anchor}"

    def cli(self, command: str) -> str:
        """A saga-index command line: global options come before the subcommand."""
        return f"saga-index --table {self.table_name} {command}"

    def describe(
        self, what: str, *, anchor: str, first: str, query: str | None, note: str = ""
    ) -> str:
        """`what` is wrong; run `first` (a command, quoted so it copies cleanly; `note` says
        what it shows); open the saved `query` (None: the function never ran, nothing to
        read); the guide's section `anchor`."""
        look = (
            f"Logs Insights saved query: {query}."
            if query is not None
            else "No saved query: the function was never invoked, its log has nothing."
        )
        note = f" ({note})" if note else ""
        return f"{what} First run: `{first}`{note}. {look} Runbook: {self.url(anchor)}"


@dataclass(frozen=True)
class GuardAlarm:
    """An alarm on one of the drift guard's wrong-now metrics: > 0 is wrong in the current
    state, missing data is a stopped guard."""

    name: str  # the alarm's stable name after "<stack>-"
    construct_id: str  # unchanged since before the names: the logical IDs stay
    metric_name: str
    scan_only: bool
    what: str
    anchor: str
    first: str  # the saga-index subcommand (after the global options)


GUARD_ALARMS: tuple[GuardAlarm, ...] = (
    GuardAlarm(
        "LegacyRows",
        "UnexpectedLegacyRows",
        METRIC_UNEXPECTED_LEGACY_ROWS,
        False,
        "Saga rows carry the legacy GSI4PK while no layout of the migration state is legacy: "
        "readers do not read that partition, those sagas are invisible.",
        "unexpectedlegacyrows",
        "status --drift",
    ),
    GuardAlarm(
        "ShardedRows",
        "UnexpectedShardedRows",
        METRIC_UNEXPECTED_SHARDED_ROWS,
        False,
        "Saga rows carry a shard GSI4PK no layout of the migration state reads (any shard key "
        "while legacy; a key outside 0..N-1): a writer does not follow the control record.",
        "unexpectedshardedrows",
        "status --drift",
    ),
    GuardAlarm(
        "MisroutedRows",
        "MisroutedRows",
        METRIC_MISROUTED_ROWS,
        False,
        "Saga rows sit on a shard key that is not their person's in any layout of the state: "
        "by-person reads miss them.",
        "misroutedrows",
        "status --drift",
    ),
    GuardAlarm(
        "ControlRecordMissing",
        "ControlRecordMissing",
        METRIC_CONTROL_RECORD_MISSING,
        False,
        "The control record's STATE item is gone while its history exists: services follow "
        "the newest history item, phase changes and backfills are refused until it is "
        "restored (saga-index phase restore).",
        "controlrecordmissing",
        "status",
    ),
    GuardAlarm(
        "UnindexedRows",
        "UnindexedRows",
        METRIC_UNINDEXED_ROWS,
        True,
        "Saga rows without GSI4PK/GSI4SK are in no index partition: every read misses them.",
        "unindexedrows",
        "drift --json",
    ),
    GuardAlarm(
        "StrayRows",
        "StrayRows",
        METRIC_STRAY_ROWS,
        True,
        "Saga rows carry a GSI4PK outside the legacy key and the shard keys: no enumeration "
        "reads them.",
        "strayrows",
        "drift --json",
    ),
)
SWEEP_FAILURES_ANCHOR = "sweep-failures"
BACKFILL_ENDED_ANCHOR = "backfill-ended"
# name, what it says; the metric is the state machine's metric of the same outcome.
BACKFILL_OUTCOMES: tuple[tuple[str, str], ...] = (
    ("BackfillExecutionsFailed", "failed"),
    ("BackfillExecutionsTimedOut", "timed out"),
    ("BackfillExecutionsAborted", "was aborted (stopped)"),
)


def job_alarm_name(job_name: str, kind: str) -> str:
    """workflow-health-sweep, Errors -> WorkflowHealthSweepErrors."""
    return f"{_pascal(job_name)}{kind}"


def queue_look(queue_url: str) -> str:
    """The first command for a message in one of a job's queues: read it without taking it
    (visibility timeout 0), with the attributes Scheduler puts on a dead letter."""
    return (
        f"aws sqs receive-message --queue-url {queue_url} --max-number-of-messages 10 "
        "--visibility-timeout 0 --message-attribute-names All"
    )


def alarm_descriptions(
    runbook: Runbook,
    *,
    sweep_jobs: Iterable[str],
    scheduled_jobs: Iterable[str],
    queue_url: Callable[[str, str], str],
) -> dict[str, str]:
    """Every alarm's description by its name. `queue_url(job, "DeadLetters" |
    "FailedInvocations")` is that queue's URL (a deploy-time token in the stack)."""
    texts: dict[str, str] = {}
    for spec in GUARD_ALARMS:
        texts[spec.name] = runbook.describe(
            spec.what,
            anchor=spec.anchor,
            first=runbook.cli(spec.first),
            query=queries.DRIFT_REPORTS,
        )
    texts["DriftGuardErrors"] = runbook.describe(
        "The drift guard failed twice in three runs: a read or the scan could not complete "
        "after retries; the wrong-now alarms follow while it fails.",
        anchor="driftguarderrors",
        first=runbook.cli("status --alarms"),
        query=queries.failures_query_name(JOB_DRIFT_GUARD),
    )
    texts["GsiThrottles"] = runbook.describe(
        "The renewal-saga GSI throttled (read, write or hot key range): the watch-window "
        "signal. Contributor Insights on the index names the hot key.",
        anchor="gsithrottles",
        first=runbook.cli("watch --days 1"),
        query=queries.THROTTLES,
    )
    for job_name in sweep_jobs:
        texts[job_alarm_name(job_name, "Errors")] = runbook.describe(
            f"The {job_name} failed in two of its last three runs (it acts on nothing when it "
            "cannot read every saga; one failure the next run repairs does not page).",
            anchor=SWEEP_FAILURES_ANCHOR,
            first=f"{runbook.cli('sagas open')} >/dev/null",
            note="the sweeps' read: exit 1 and the error name the partition that fails",
            query=queries.failures_query_name(job_name),
        )
    for job_name in scheduled_jobs:
        texts[job_alarm_name(job_name, "DeadLetters")] = runbook.describe(
            f"Scheduler could not invoke the {job_name} after its retries, in two of its last "
            "three periods; the undelivered events wait in its dead-letter queue.",
            anchor=SWEEP_FAILURES_ANCHOR,
            first=queue_look(queue_url(job_name, "DeadLetters")),
            query=None,
        )
        texts[job_alarm_name(job_name, "FailedInvocations")] = runbook.describe(
            f"Lambda gave up on invocations of the {job_name} (failed, no retries, or older "
            "than the job's period) in two of its last three periods; the events wait in its "
            "failed-invocations queue.",
            anchor=SWEEP_FAILURES_ANCHOR,
            first=queue_look(queue_url(job_name, "FailedInvocations")),
            query=queries.failures_query_name(job_name),
        )
    for name, what in BACKFILL_OUTCOMES:
        texts[name] = runbook.describe(
            f"A backfill execution {what}: the move is incomplete and its lease is held until "
            "it expires or is released.",
            anchor=BACKFILL_ENDED_ANCHOR,
            first=runbook.cli("status"),
            query=queries.BACKFILL_FAILED_STEPS,
        )
    return texts


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
                treat_missing_data=cw.TreatMissingData.BREACHING,
                evaluation_periods=1 if spec.scan_only else GUARD_EVALUATION_PERIODS,
                datapoints_to_alarm=1 if spec.scan_only else GUARD_DATAPOINTS_TO_ALARM,
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


def _job_period(job_name: str) -> cdk.Duration:
    """One firing of the job per period, so M of N counts failed firings."""
    return cdk.Duration.minutes(JOBS_BY_NAME[job_name].period_minutes)


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids and alarm names)."""
    return "".join(part.title() for part in job_name.split("-"))
