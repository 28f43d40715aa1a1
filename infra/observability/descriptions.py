"""What every alarm says: the words of its description, which tell an on-call engineer without a
checkout what is wrong, the first command to run (with the real table name), the saved query to
open and the FULL URL of its section of the guide (docs/observability.md; context
`runbookBaseUrl`). The alarms themselves (metrics, periods, M of N, actions): alarms.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from infra.observability import queries
from saga_index.index.names import (
    JOB_DRIFT_GUARD,
    METRIC_CONTROL_RECORD_MISSING,
    METRIC_MISROUTED_ROWS,
    METRIC_OPEN_INDEX_MISSING_ROWS,
    METRIC_OPEN_INDEX_STRAY_ROWS,
    METRIC_STRAY_ROWS,
    METRIC_UNEXPECTED_LEGACY_ROWS,
    METRIC_UNEXPECTED_SHARDED_ROWS,
    METRIC_UNINDEXED_ROWS,
)

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
    GuardAlarm(
        "OpenIndexMissingRows",
        "OpenIndexMissingRows",
        METRIC_OPEN_INDEX_MISSING_ROWS,
        True,
        "Open sagas are not in the open-saga index under their person's OpenSagaPK (two reads "
        "a GSI lag apart) while the sweeps read it (`open`: getAllOpenSagas misses them; a "
        "writer does not stamp), or carry a wrong key while it is `adding` (unstamped ones do "
        "not page). Repair each row with the repairCommand the report names.",
        "openindexmissingrows",
        "drift --json",
    ),
    GuardAlarm(
        "OpenIndexStrayRows",
        "OpenIndexStrayRows",
        METRIC_OPEN_INDEX_STRAY_ROWS,
        True,
        "Rows that are no open saga are in the open-saga index or carry OpenSagaPK while it is "
        "`open` (the sweeps read them) or `adding` (they would, once it opens): a writer closed "
        "a saga without removing its key, or a wrong re-stamp. Repair each row with the "
        "repairCommand the report names.",
        "openindexstrayrows",
        "drift --json",
    ),
)
DRIFT_READ_INCOMPLETE = "DriftReadIncomplete"
SWEEP_FAILURES_ANCHOR = "sweep-failures"
BACKFILL_ENDED_ANCHOR = "backfill-ended"
BACKFILL_PACE_PAUSED = "BackfillPacePaused"
BACKFILL_PACE_PAUSED_ANCHOR = "backfillpacepaused"
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
    texts[DRIFT_READ_INCOMPLETE] = runbook.describe(
        "No run of the drift guard completed its read of the index (and, on a scanning read, of "
        "the base table) for 90 minutes (each run reads on from where the last stopped; "
        "DriftReadPercent says how far it is), or the guard published nothing: there is no "
        "drift verdict for that time. This is not drift found.",
        anchor="driftreadincomplete",
        first=runbook.cli("drift --json"),
        note="the whole read from your shell, without the guard's time limit",
        query=queries.DRIFT_REPORTS,
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
    texts[BACKFILL_PACE_PAUSED] = runbook.describe(
        "The backfill paused itself: DynamoDB throttled it for an account limit or the table's "
        "on-demand maximum (AccountLimitExceeded, MaxOnDemandThroughputExceeded), which the "
        "application shares. It resumes at half its pace after a minute and pauses again while "
        "the limit holds.",
        anchor=BACKFILL_PACE_PAUSED_ANCHOR,
        first=runbook.cli("status"),
        note="the lease's pace names the reason",
        query=queries.THROTTLES,
    )
    return texts


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids and alarm names)."""
    return "".join(part.title() for part in job_name.split("-"))
