"""CloudWatch Logs Insights saved queries: each alarm's first look, in the console, with no
checkout. docs/observability.md lists them; every alarm description names its query.

They read what the functions really write. Every function logs JSON (infra/functions.py: Lambda's
JSON log format, Powertools Logger, the domain library's loggers given the same format by
handlers/runtime.py), so Logs Insights discovers the fields itself:
  - Powertools lines: `level` (INFO, WARNING, ERROR, ...), `message`, `service`, `location`,
    `function_request_id`, plus each call's extra keys (`report` of the drift guard, `key` and
    `reason` of a backfill anomaly, `partition` and `error` of a failed read, `operation`,
    `errorCode` and `throttlingReasons` of a throttle);
  - the runtime's line for an exception that ends the invocation: `errorType`, `errorMessage`,
    `stackTrace`, `requestId`, and its level under `level` (or `log_level` in older runtime
    interface clients);
  - Lambda's own platform records (`type` platform.*, `record.status`), as far as the function's
    system log level (WARN) lets them through.
The backfill state machine logs every execution event (level ALL) to its own log group: `type`
(e.g. TaskFailed, ExecutionFailed, MapRunFailed), `execution_arn`, `details.error`,
`details.cause`.

Names share the folder-like prefix QUERY_PREFIX, so the console groups them in one folder.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.backfill import SagaBackfill
from infra.drift import DriftGuard
from infra.sweeps import SagaSweeps

QUERY_PREFIX = "RenewalSagaIndex/"
# The drift guard's one line per run (handlers/drift_guard.py): "drift report: healthy" or
# "drift report: DRIFT", with the whole report under `report`, or "drift report: INCOMPLETE"
# (a read that finishes across runs) with `reason` and `percentRead`.
DRIFT_REPORT_MESSAGE = "drift report"
# The worker's line per anomaly row (layout_change/backfill/row.py), with `key` and `reason`.
ANOMALY_MESSAGE = "saga row anomaly"
# saga_index/store/dynamo/client.py's line per throttled request, after which botocore retries.
THROTTLE_MESSAGE = "dynamodb throttled"
# A line that says an invocation failed or something in it went wrong: an ERROR/CRITICAL line
# (Powertools, or the runtime's uncaught-exception line under either level key), any line with
# an errorType (the runtime's), or a platform record whose status is not success (a timeout).
FAILURE_FILTER = (
    'level in ["ERROR", "CRITICAL"] or log_level in ["ERROR", "CRITICAL"] '
    'or ispresent(errorType) or (ispresent(record.status) and record.status != "success")'
)
FAILURE_FIELDS = (
    "@timestamp",
    "level",
    "message",
    "errorType",
    "errorMessage",
    "partition",
    "error",
    "record.status",
    "function_request_id",
    "requestId",
    "@logStream",
)
# Step Functions history event types that end something without success.
FAILED_STEP_FILTER = "type like /(Failed|TimedOut|Aborted)$/"


def failures_query_name(job_name: str) -> str:
    return f"{QUERY_PREFIX}{job_name}/failures"


DRIFT_REPORTS = f"{QUERY_PREFIX}drift-guard/reports"
THROTTLES = f"{QUERY_PREFIX}throttles"
BACKFILL_ANOMALIES = f"{QUERY_PREFIX}backfill/anomalies"
BACKFILL_FUNCTION_ERRORS = f"{QUERY_PREFIX}backfill/function-errors"
BACKFILL_FAILED_STEPS = f"{QUERY_PREFIX}backfill/failed-steps"


class SavedQueries:
    """`.definitions` by query name, added to `scope`."""

    def __init__(
        self,
        scope: Construct,
        *,
        drift_guard: DriftGuard,
        sweeps: SagaSweeps,
        backfill: SagaBackfill,
    ) -> None:
        self._scope = scope
        self.definitions: dict[str, logs.QueryDefinition] = {}
        self._add(
            "DriftGuardReportsQuery",
            DRIFT_REPORTS,
            [_log_group(drift_guard.function)],
            _drift_reports_query(),
        )
        jobs = {**sweeps.functions, drift_guard.job.name: drift_guard.function}
        for job_name, function in jobs.items():
            self._add(
                f"{_pascal(job_name)}FailuresQuery",
                failures_query_name(job_name),
                [_log_group(function)],
                _failures(),
            )
        every_function = [
            drift_guard.function,
            *sweeps.functions.values(),
            backfill.plan_function,
            backfill.worker_function,
            backfill.verify_function,
        ]
        self._add(
            "ThrottlesQuery",
            THROTTLES,
            [_log_group(fn) for fn in every_function],
            _throttles_query(),
        )
        self._add(
            "BackfillAnomaliesQuery",
            BACKFILL_ANOMALIES,
            [_log_group(backfill.worker_function)],
            logs.QueryString(
                fields=["@timestamp", "key.PK", "key.SK", "reason", "target", "message"],
                filter_statements=[f"message like /^{ANOMALY_MESSAGE}/"],
                sort="@timestamp desc",
                limit=1000,
            ),
        )
        self._add(
            "BackfillFunctionErrorsQuery",
            BACKFILL_FUNCTION_ERRORS,
            [
                _log_group(fn)
                for fn in (
                    backfill.plan_function,
                    backfill.worker_function,
                    backfill.verify_function,
                )
            ],
            _failures(extra_fields=("service", "segment")),
        )
        self._add(
            "BackfillFailedStepsQuery",
            BACKFILL_FAILED_STEPS,
            [backfill.log_group],
            logs.QueryString(
                fields=["@timestamp", "type", "execution_arn", "details.error", "details.cause"],
                filter_statements=[FAILED_STEP_FILTER],
                sort="@timestamp desc",
                limit=100,
            ),
        )

    def _add(
        self,
        construct_id: str,
        name: str,
        log_groups: Sequence[logs.ILogGroup],
        query: logs.QueryString,
    ) -> None:
        self.definitions[name] = logs.QueryDefinition(
            self._scope,
            construct_id,
            query_definition_name=name,
            query_string=query,
            log_groups=list(log_groups),
        )


def _failures(extra_fields: Sequence[str] = ()) -> logs.QueryString:
    return logs.QueryString(
        fields=[*FAILURE_FIELDS[:1], *extra_fields, *FAILURE_FIELDS[1:]],
        filter_statements=[FAILURE_FILTER],
        sort="@timestamp desc",
        limit=100,
    )


def _log_group(function: lambda_.Function) -> logs.ILogGroup:
    # infra/functions.py gives every function a log group of its own; Function.log_group
    # returns that one (the group the function's LoggingConfig names).
    return function.log_group


def _pascal(job_name: str) -> str:
    """workflow-health-sweep -> WorkflowHealthSweep (construct ids)."""
    return "".join(part.title() for part in job_name.split("-"))


def _drift_reports_query() -> logs.QueryString:
    """The drift guard's reports, newest first: phase, verdict and every count."""
    return logs.QueryString(
        fields=[
            "@timestamp",
            "level",
            "report.phase",
            "report.shardCount",
            "report.healthy",
            "report.findings.0",
            "report.legacyRows",
            "report.unexpectedLegacyRows",
            "report.unexpectedShardedRows",
            "report.misroutedRows",
            "report.controlRecordMissing",
            "report.unindexedRows",
            "report.strayRows",
            "report.scanned",
            # The open index compared ("adding(16)", "open(16)"; null when none is) and its
            # counts: what runbook O3 reads before reads switch (unstamped 0, stray 0).
            "report.openIndex",
            "report.openIndexUnstampedRows",
            "report.openIndexStrayRows",
            "report.openIndexMissingRows",
        ],
        filter_statements=[f"message like /^{DRIFT_REPORT_MESSAGE}/"],
        sort="@timestamp desc",
        limit=24,
    )


def _throttles_query() -> logs.QueryString:
    """Every throttled request any of the functions logged, newest first."""
    return logs.QueryString(
        fields=[
            "@timestamp",
            "service",
            "operation",
            "errorCode",
            "throttlingReasons.0.reason",
            "throttlingReasons.0.resource",
            "@logStream",
        ],
        filter_statements=[f"message like /^{THROTTLE_MESSAGE}/"],
        sort="@timestamp desc",
        limit=200,
    )
