"""The CloudWatch Logs Insights saved queries: each alarm's first look needs a console, not a
checkout. Asserted from the synthesised template (names, the log groups they read) and against
the log lines the functions really write: the same Powertools Logger the handlers use, fed the
same messages and extra keys, must produce lines the queries' filters and fields match."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from infra.observability import queries
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.checks.drift import DriftReport, RowRef
from saga_index.layout_change.record.routing import Routing
from tests.infra.template_tools import resources

pytestmark = pytest.mark.infra

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
QUERY = "AWS::Logs::QueryDefinition"
HANDLERS = {
    "drift-guard": "handlers.drift_guard.handler",
    "workflow-health-sweep": "handlers.sweeps.workflow_health_sweep",
    "retry-failed-prepare": "handlers.sweeps.retry_failed_prepare",
    "stuck-saga-sweep": "handlers.sweeps.stuck_saga_sweep",
    "agent-metrics-snapshot": "handlers.sweeps.agent_metrics_snapshot",
    "backfill-plan": "handlers.backfill_plan.handler",
    "backfill-worker": "handlers.backfill_worker.handler",
    "backfill-verify": "handlers.backfill_verify.handler",
}
# Saved query -> the functions whose log groups it reads (None: the state machine's).
EXPECTED: dict[str, tuple[str, ...] | None] = {
    "RenewalSagaIndex/drift-guard/reports": ("drift-guard",),
    "RenewalSagaIndex/drift-guard/failures": ("drift-guard",),
    "RenewalSagaIndex/workflow-health-sweep/failures": ("workflow-health-sweep",),
    "RenewalSagaIndex/retry-failed-prepare/failures": ("retry-failed-prepare",),
    "RenewalSagaIndex/stuck-saga-sweep/failures": ("stuck-saga-sweep",),
    "RenewalSagaIndex/agent-metrics-snapshot/failures": ("agent-metrics-snapshot",),
    "RenewalSagaIndex/throttles": tuple(HANDLERS),
    "RenewalSagaIndex/backfill/anomalies": ("backfill-worker",),
    "RenewalSagaIndex/backfill/function-errors": (
        "backfill-plan",
        "backfill-worker",
        "backfill-verify",
    ),
    "RenewalSagaIndex/backfill/failed-steps": None,
}
MODES = ["owned_synth", "import_mode_synth"]


@pytest.fixture(params=MODES)
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(request.getfixturevalue(request.param).template_json)


def saved(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["Properties"]["Name"]: q["Properties"] for q in resources(template, QUERY).values()}


def function_log_groups(template: dict[str, Any]) -> dict[str, dict[str, str]]:
    """{"Ref": <log group>} of each function, by service, as its LoggingConfig names it."""
    by_handler = {handler: service for service, handler in HANDLERS.items()}
    groups = {}
    for function in resources(template, "AWS::Lambda::Function").values():
        properties = function["Properties"]
        if properties.get("Handler") in by_handler:
            groups[by_handler[properties["Handler"]]] = properties["LoggingConfig"]["LogGroup"]
    assert set(groups) == set(HANDLERS)
    return groups


def test_every_saved_query_reads_the_log_groups_of_its_functions(template: dict[str, Any]) -> None:
    found = saved(template)
    assert set(found) == set(EXPECTED)
    groups = function_log_groups(template)
    (machine,) = resources(template, "AWS::StepFunctions::StateMachine").values()
    machine_group = machine["Properties"]["LoggingConfiguration"]["Destinations"][0][
        "CloudWatchLogsLogGroup"
    ]["LogGroupArn"]
    for name, services in EXPECTED.items():
        read = found[name]["LogGroupNames"]
        if services is None:
            # The state machine's own log group (it logs every execution event: level ALL).
            (group,) = read
            assert machine_group == {"Fn::GetAtt": [group["Ref"], "Arn"]}, name
        else:
            assert read == [groups[service] for service in services], name


def test_the_saved_queries_share_one_folder(template: dict[str, Any]) -> None:
    assert all(name.startswith("RenewalSagaIndex/") for name in saved(template))


# ---- the queries against the lines the functions really write -------------------------------


class LoggedLine:
    """One Powertools JSON line, as Logs Insights sees it: nested keys flattened with dots,
    list items by index (report.findings.0)."""

    def __init__(self, line: str) -> None:
        self.raw = json.loads(line)
        self.fields: dict[str, Any] = {}
        self._flatten("", self.raw)

    def _flatten(self, prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                self._flatten(f"{prefix}{key}.", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._flatten(f"{prefix}{index}.", item)
        else:
            self.fields[prefix[:-1]] = value


def log_line(service: str, level: str, message: str, **extra: Any) -> LoggedLine:
    """What the handlers' Logger (handlers/runtime.py: Powertools, the service from the
    environment) writes for one call."""
    stream = io.StringIO()
    logger = Logger(service=service, stream=stream)
    # Powertools configures the stdlib logger of a service once: a second Logger of the same
    # service keeps the first one's stream, so point its handler at ours, then back.
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    previous = handler.setStream(stream)
    try:
        getattr(logger, level)(message, extra=extra)
    finally:
        if previous is not None:
            handler.setStream(previous)
    return LoggedLine(stream.getvalue().strip())


def query_of(name: str, template: dict[str, Any]) -> str:
    return str(saved(template)[name]["QueryString"])


def regex_filter(query: str) -> tuple[str, re.Pattern[str]]:
    """The `filter <field> like /<regex>/` line of a query."""
    (match,) = re.findall(r"\| filter (\S+) like /(.+)/\n", query)
    return match[0], re.compile(match[1])


def fields(query: str) -> list[str]:
    first = query.splitlines()[0]
    assert first.startswith("fields ")
    return [f.strip() for f in first[len("fields ") :].split(",")]


def source(relative: str) -> str:
    return (LAMBDAS / relative).read_text(encoding="utf-8")


def test_the_drift_reports_query_matches_the_guards_report_line(owned_synth: Any) -> None:
    query = query_of(queries.DRIFT_REPORTS, owned_synth.template_json)
    # Given the report line handlers/drift_guard.py writes (its message and its extra key)
    handler = source("handlers/drift_guard.py")
    assert 'logger.warning("drift report: DRIFT", extra={"report": summary})' in handler
    assert 'logger.info("drift report: healthy", extra={"report": summary})' in handler
    s16 = Layout.sharded(16)
    report = DriftReport(
        table_name="propflow-prod",
        index_name="renewal-saga-person-index",
        routing=Routing.between(s16),
        shard_count=16,
        legacy_rows=2,
        rows_per_shard=dict.fromkeys(range(16), 1),
        misrouted_rows=0,
        anomalous_rows=0,
        unexpected_legacy_rows=2,
        unindexed_rows=0,
        stray_rows=0,
        unexpected_legacy=(RowRef("RSAGA#1", "META", "1", "p", "RenewalSaga"),),
    )
    line = log_line("drift-guard", "warning", "drift report: DRIFT", report=report.to_dict())
    # Then the filter selects it and every field the query shows is in it
    field, pattern = regex_filter(query)
    assert pattern.search(line.fields[field])
    for name in fields(query):
        assert name.startswith("@") or name in line.fields, name
    assert line.fields["report.unexpectedLegacyRows"] == 2
    # And a healthy run's line too (LEGACY routing: nothing wrong)
    healthy = DriftReport(
        table_name="t",
        index_name="i",
        routing=Routing.between(LEGACY),
        shard_count=16,
        legacy_rows=0,
        rows_per_shard={},
        misrouted_rows=0,
        anomalous_rows=0,
    )
    line = log_line("drift-guard", "info", "drift report: healthy", report=healthy.to_dict())
    assert pattern.search(line.fields[field])


def test_the_anomalies_query_matches_the_workers_anomaly_lines(owned_synth: Any) -> None:
    query = query_of(queries.BACKFILL_ANOMALIES, owned_synth.template_json)
    restamp = source("saga_index/layout_change/backfill/row.py")
    # Both anomaly lines of the worker: left on its key, and moved to the legacy key.
    assert '"saga row anomaly, left on its key for a human to repair: %s: %s"' in restamp
    assert '"saga row anomaly moved to %s (its personId still needs a human): %s: %s"' in restamp
    assert 'extra={"key": plain_key(raw), "reason": reason}' in restamp
    assert 'extra={"key": plain_key(raw), "reason": reason, "target": target}' in restamp
    field, pattern = regex_filter(query)
    key = {"PK": "RSAGA#9", "SK": "META"}
    left = log_line(
        "backfill-worker",
        "warning",
        f"saga row anomaly, left on its key for a human to repair: {key}: personId missing",
        key=key,
        reason="personId missing",
    )
    moved = log_line(
        "backfill-worker",
        "warning",
        f"saga row anomaly moved to RenewalSaga (its personId still needs a human): {key}: x",
        key=key,
        reason="x",
        target="RenewalSaga",
    )
    for line in (left, moved):
        assert pattern.search(line.fields[field])
        assert (line.fields["key.PK"], line.fields["key.SK"]) == ("RSAGA#9", "META")
    assert set(fields(query)) - {"@timestamp"} <= set(moved.fields)
    # And the worker's ordinary progress line is not an anomaly
    progress = log_line("backfill-worker", "info", "backfill segment 3 done: 10 scanned")
    assert not pattern.search(progress.fields[field])


def test_the_throttles_query_matches_the_clients_throttle_line(owned_synth: Any) -> None:
    query = query_of(queries.THROTTLES, owned_synth.template_json)
    client = source("saga_index/store/dynamo/client.py")
    assert '"dynamodb throttled: %s %s %s"' in client
    for key in ('"operation": operation', '"errorCode": code', '"throttlingReasons": ['):
        assert key in client, key
    reasons = [{"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": "arn:...:index/x"}]
    line = log_line(
        "workflow-health-sweep",
        "warning",
        f"dynamodb throttled: Query ThrottlingException {reasons}",
        operation="Query",
        errorCode="ThrottlingException",
        throttlingReasons=reasons,
    )
    field, pattern = regex_filter(query)
    assert pattern.search(line.fields[field])
    assert set(fields(query)) - {"@timestamp", "@logStream"} <= set(line.fields)


def failure_filter_matches(fields_of_line: dict[str, Any]) -> bool:
    """queries.FAILURE_FILTER, evaluated as Logs Insights would on one line's fields."""
    level, log_level = fields_of_line.get("level"), fields_of_line.get("log_level")
    status = fields_of_line.get("record.status")
    return (
        level in ("ERROR", "CRITICAL")
        or log_level in ("ERROR", "CRITICAL")
        or "errorType" in fields_of_line
        or (status is not None and status != "success")
    )


def test_the_failures_queries_select_error_lines_and_uncaught_exceptions(
    owned_synth: Any,
) -> None:
    template = owned_synth.template_json
    for name in (
        queries.failures_query_name("drift-guard"),
        queries.failures_query_name("stuck-saga-sweep"),
        queries.BACKFILL_FUNCTION_ERRORS,
    ):
        query = query_of(name, template)
        assert f"| filter {queries.FAILURE_FILTER}\n" in query, name
        assert {"errorType", "errorMessage", "level", "message"} <= set(fields(query)), name
    # The domain library's failed-partition line (saga_index/store/repository.py: logger.error)
    failed_read = log_line(
        "stuck-saga-sweep",
        "error",
        "saga enumeration failed on RenewalSaga#3: ClientError: throttled",
        partition="RenewalSaga#3",
        error="ClientError: throttled",
    )
    assert failure_filter_matches(failed_read.fields)
    assert failed_read.fields["partition"] == "RenewalSaga#3"
    # The runtime's line for an exception that ends the invocation (Lambda's JSON log format:
    # aws-lambda-python-runtime-interface-client's log_error; older clients say log_level)
    for level_key in ("level", "log_level"):
        uncaught = {
            "timestamp": "2026-12-01T10:00:00Z",
            level_key: "ERROR",
            "errorMessage": "could not enumerate 1 partition(s) after retries",
            "errorType": "EnumerationError",
            "requestId": "r-1",
            "stackTrace": ["  File ..."],
        }
        assert failure_filter_matches(LoggedLine(json.dumps(uncaught)).fields)
    # A timeout, as Lambda's platform record says it
    timeout = {"type": "platform.runtimeDone", "record": {"requestId": "r", "status": "timeout"}}
    assert failure_filter_matches(LoggedLine(json.dumps(timeout)).fields)
    # And not the ordinary lines: a sweep's summary, a warning, a successful platform record
    for quiet in (
        log_line("stuck-saga-sweep", "info", "sweep finished", result={"sagasRead": 3}).fields,
        log_line("stuck-saga-sweep", "warning", "dynamodb throttled: Query").fields,
        LoggedLine(json.dumps({"type": "platform.report", "record": {"status": "success"}})).fields,
    ):
        assert not failure_filter_matches(quiet)


def test_the_failed_steps_query_selects_step_functions_failure_events(owned_synth: Any) -> None:
    query = query_of(queries.BACKFILL_FAILED_STEPS, owned_synth.template_json)
    field, pattern = regex_filter(query)
    assert field == "type"
    for event in (
        "ExecutionFailed",
        "ExecutionTimedOut",
        "ExecutionAborted",
        "TaskFailed",
        "LambdaFunctionFailed",
        "MapRunFailed",
    ):
        assert pattern.search(event), event
    for event in ("ExecutionSucceeded", "TaskSucceeded", "TaskScheduled", "MapRunStarted"):
        assert not pattern.search(event), event
    assert {"type", "execution_arn", "details.error", "details.cause"} <= set(fields(query))
