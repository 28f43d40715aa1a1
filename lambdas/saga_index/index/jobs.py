"""Every scheduled job of the stack, in ONE table: what infra schedules and wires, and what the
handlers run, are derived from it.

The stagger: no two jobs may ever fire in the same minute (a sweep that coincides with another
sweep, the drift guard and a page load is exactly the burst ADR-0085 describes). Each job's
firing minutes over one week (UTC) are expanded from its cron and compared; the table below is
checked when this module is imported, so a job placed on a taken minute stops synth and the sweep
functions' import, naming both jobs and the minute.

Pure data and the standard library only: infra imports it without boto3 or the domain code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from saga_index.index.names import (
    FINDING_PREPARE_RETRIES_EXHAUSTED,
    FINDING_PREPARE_RETRY_REQUESTED,
    FINDING_STUCK,
    FINDING_WORKFLOW_UNHEALTHY,
    JOB_AGENT_METRICS_SNAPSHOT,
    JOB_DRIFT_GUARD,
    JOB_RETRY_FAILED_PREPARE,
    JOB_STUCK_SAGA_SWEEP,
    JOB_WORKFLOW_HEALTH_SWEEP,
)

# "guard": the drift guard (infra/drift.py). "sweep": one of the sweeps, which share one handler
# module (handlers/sweeps.py), one construct (infra/sweeps.py) and one run (handlers/sweep_jobs).
JobKind = Literal["guard", "sweep"]

MINUTES_PER_HOUR: Final = 60
MINUTES_PER_WEEK: Final = 7 * 24 * MINUTES_PER_HOUR
_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


class JobSpecError(ValueError):
    """A job that cannot be scheduled as declared, two jobs that fire together, or a table keyed
    by job name that misses a job of the spec or names one it does not have."""


@dataclass(frozen=True)
class ScheduledJob:
    """One scheduled job. `name` is the job name, the schedule's and the payload's `job`, and the
    function's Powertools service name."""

    name: str
    kind: JobKind
    period_minutes: int
    offset_minutes: int
    description: str
    # The function's construct id: its logical ID, and so its deployed resources, derive from it.
    construct_id: str
    # Lambda's handler: "<module>.<function>" under lambdas/.
    handler: str
    # Publishes its findings on the sweeps' event bus (events:PutEvents, EVENT_BUS_NAME).
    emits_events: bool = False
    # Claims retries with a conditional UpdateItem on saga rows.
    claims_retries: bool = False
    # The findings it counts (each an EventBridge detail-type and a metric name of its service).
    findings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Cron's a/p in the minute field fires at a, a+p, ... up to :59 and starts again on the
        # hour: only a period that divides 60 fires every `period_minutes`.
        if self.period_minutes <= 0 or MINUTES_PER_HOUR % self.period_minutes:
            raise JobSpecError(f"{self.name}: period must divide 60, got {self.period_minutes}")
        if not 0 <= self.offset_minutes < self.period_minutes:
            raise JobSpecError(
                f"{self.name}: offset must be in [0, period), got {self.offset_minutes}"
            )
        if self.findings and not self.emits_events:
            raise JobSpecError(f"{self.name}: findings go out as events, but emits_events is off")

    @property
    def expression(self) -> str:
        # Scheduler cron: minutes hours day-of-month month day-of-week year, UTC.
        return f"cron({self.offset_minutes}/{self.period_minutes} * * * ? *)"

    def firing_minutes(self) -> frozenset[int]:
        """The minutes of one week (0 = Monday 00:00 UTC) at which the cron fires."""
        return frozenset(
            hour * MINUTES_PER_HOUR + minute
            for hour in range(MINUTES_PER_WEEK // MINUTES_PER_HOUR)
            for minute in range(self.offset_minutes, MINUTES_PER_HOUR, self.period_minutes)
        )


def minute_of_week(minute: int) -> str:
    """0 -> "Mon 00:00" (UTC)."""
    day, rest = divmod(minute, 24 * MINUTES_PER_HOUR)
    return f"{_DAYS[day]} {rest // MINUTES_PER_HOUR:02d}:{rest % MINUTES_PER_HOUR:02d}"


def check_stagger(jobs: Iterable[ScheduledJob]) -> None:
    """Raise JobSpecError unless every job has a name of its own and no two jobs fire in the
    same minute of the week; the error names both jobs and the first minute they share."""
    taken: dict[int, str] = {}
    seen: set[str] = set()
    for job in jobs:
        if job.name in seen:
            raise JobSpecError(f"two jobs are named {job.name!r}")
        seen.add(job.name)
        for minute in sorted(job.firing_minutes()):
            other = taken.setdefault(minute, job.name)
            if other != job.name:
                raise JobSpecError(
                    f"{other} and {job.name} both fire at {minute_of_week(minute)} UTC: "
                    "move one to a free offset"
                )


def check_covers(keys: Iterable[str], jobs: Iterable[ScheduledJob], *, table: str) -> None:
    """Raise JobSpecError unless `keys` (a table keyed by job name) names exactly `jobs`."""
    have, want = set(keys), {job.name for job in jobs}
    missing, unknown = sorted(want - have), sorted(have - want)
    if missing or unknown:
        raise JobSpecError(
            f"{table} does not match the job spec (saga_index.index.jobs): "
            f"missing {missing or 'none'}, not in the spec {unknown or 'none'}"
        )


SCHEDULED_JOBS: Final[tuple[ScheduledJob, ...]] = (
    ScheduledJob(
        JOB_DRIFT_GUARD,
        "guard",
        period_minutes=5,
        offset_minutes=0,
        description="Drift guard: legacy, misrouted and unindexed saga rows",
        construct_id="DriftGuard",
        handler="handlers.drift_guard.handler",
    ),
    ScheduledJob(
        JOB_WORKFLOW_HEALTH_SWEEP,
        "sweep",
        period_minutes=5,
        offset_minutes=1,
        description="Open sagas whose workflow heartbeat is stale",
        construct_id="WorkflowHealthSweep",
        handler="handlers.sweeps.workflow_health_sweep",
        emits_events=True,
        findings=(FINDING_WORKFLOW_UNHEALTHY,),
    ),
    ScheduledJob(
        JOB_RETRY_FAILED_PREPARE,
        "sweep",
        period_minutes=10,
        offset_minutes=2,
        description="Retry PREPARE_FAILED sagas with backoff",
        construct_id="RetryFailedPrepare",
        handler="handlers.sweeps.retry_failed_prepare",
        emits_events=True,
        claims_retries=True,
        findings=(FINDING_PREPARE_RETRY_REQUESTED, FINDING_PREPARE_RETRIES_EXHAUSTED),
    ),
    ScheduledJob(
        JOB_STUCK_SAGA_SWEEP,
        "sweep",
        period_minutes=15,
        offset_minutes=3,
        description="Open sagas with no update for too long",
        construct_id="StuckSagaSweep",
        handler="handlers.sweeps.stuck_saga_sweep",
        emits_events=True,
        findings=(FINDING_STUCK,),
    ),
    # Publishes CloudWatch metrics through its logs (EMF): no bus, no PutMetricData.
    ScheduledJob(
        JOB_AGENT_METRICS_SNAPSHOT,
        "sweep",
        period_minutes=5,
        offset_minutes=4,
        description="Open sagas by state and oldest age (EMF)",
        construct_id="AgentMetricsSnapshot",
        handler="handlers.sweeps.agent_metrics_snapshot",
    ),
)
check_stagger(SCHEDULED_JOBS)

JOBS_BY_NAME: Final[Mapping[str, ScheduledJob]] = {job.name: job for job in SCHEDULED_JOBS}
DRIFT_GUARD: Final = JOBS_BY_NAME[JOB_DRIFT_GUARD]
SWEEPS: Final[tuple[ScheduledJob, ...]] = tuple(j for j in SCHEDULED_JOBS if j.kind == "sweep")
# What every consumer that needs only the sweeps' names iterates, in the spec's order.
SWEEP_NAMES: Final[tuple[str, ...]] = tuple(job.name for job in SWEEPS)
