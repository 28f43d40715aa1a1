"""The synthesised alarms, pager topic, Contributor Insights, dashboard and drift-guard schedule.

Each alarm is asserted by behaviour: its stable name, its metric, threshold, M of N,
missing-data treatment, that it pages, and that its description tells the on-call engineer what
to run first, which saved query to open and where the runbook section is. Every alarm pages in
every migration state: the drift guard publishes what is wrong NOW against the control record,
so no alarm depends on the deploy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match, Template

from infra.config import (
    DEFAULT_RUNBOOK_BASE_URL,
    MAX_RUNBOOK_BASE_URL_CHARS,
    ConfigError,
    PagerConfig,
    StackConfig,
    load_cdk_json_context,
    load_pager_config,
)
from infra.drift import DRIFT_SCAN_ATTRIBUTES, OPEN_RECHECK_ATTRIBUTES
from infra.observability.descriptions import MAX_DESCRIPTION_CHARS, Runbook, alarm_descriptions
from infra.observability.pager import UNSUBSCRIBED_WARNING
from infra.stack import build_app
from saga_index.index.jobs import JOBS_BY_NAME
from saga_index.index.names import INDEX_NAME, OPEN_INDEX_NAME
from tests.infra.conftest import Synthesised, _synthesise, write_pager_config
from tests.infra.template_tools import CONTROL_CONDITION

pytestmark = pytest.mark.infra

ALARM = "AWS::CloudWatch::Alarm"
# metric: (period seconds, evaluation periods, datapoints to alarm)
GUARD_ALARMS: dict[str, tuple[int, int, int]] = {
    "UnexpectedLegacyRows": (300, 3, 2),
    "UnexpectedShardedRows": (300, 3, 2),
    "MisroutedRows": (300, 3, 2),
    "ControlRecordMissing": (300, 3, 2),
    "UnindexedRows": (7200, 1, 1),  # two scan intervals of K=12 x 5 min
    "StrayRows": (7200, 1, 1),
    "OpenIndexMissingRows": (7200, 1, 1),  # the scan's comparison of the open index
    "OpenIndexStrayRows": (7200, 1, 1),
}
# The counts only the every-K-th-run scan publishes (the open index's comparison among them).
SCAN_ONLY_METRICS = {"UnindexedRows", "StrayRows", "OpenIndexMissingRows", "OpenIndexStrayRows"}
# The guard metric each wrong-now alarm watches -> the alarm's stable name after "<stack>-".
GUARD_ALARM_NAMES = {
    "UnexpectedLegacyRows": "LegacyRows",  # short: the metric is the "unexpected" one
    "UnexpectedShardedRows": "ShardedRows",
    "MisroutedRows": "MisroutedRows",
    "ControlRecordMissing": "ControlRecordMissing",
    "UnindexedRows": "UnindexedRows",
    "StrayRows": "StrayRows",
    "OpenIndexMissingRows": "OpenIndexMissingRows",
    "OpenIndexStrayRows": "OpenIndexStrayRows",
}
SCHEDULED_JOBS = (
    "DriftGuard",
    "WorkflowHealthSweep",
    "RetryFailedPrepare",
    "StuckSagaSweep",
    "AgentMetricsSnapshot",
)
# Every alarm's name, exactly (docs/observability.md lists the same).
ALARM_NAMES = {
    *(f"RenewalSagaIndex-{name}" for name in GUARD_ALARM_NAMES.values()),
    "RenewalSagaIndex-GsiThrottles",
    "RenewalSagaIndex-DriftReadIncomplete",
    *(f"RenewalSagaIndex-{job}Errors" for job in SCHEDULED_JOBS),
    *(f"RenewalSagaIndex-{job}DeadLetters" for job in SCHEDULED_JOBS),
    *(f"RenewalSagaIndex-{job}FailedInvocations" for job in SCHEDULED_JOBS),
    "RenewalSagaIndex-BackfillExecutionsFailed",
    "RenewalSagaIndex-BackfillExecutionsTimedOut",
    "RenewalSagaIndex-BackfillExecutionsAborted",
    "RenewalSagaIndex-BackfillPacePaused",
}
RUNBOOK = f"{DEFAULT_RUNBOOK_BASE_URL}/observability.md"
ORG_RUNBOOK_BASE_URL = "https://wiki.example.com/renewal-saga-index/docs"
# The scheduled jobs' failure alarms: one datapoint per firing, the second failure of three pages.
JOB_M_OF_N = (3, 2)
# The raw counts: what they should be depends on the migration state, so they are graphed only.
# The open index's unstamped rows are expected while it is `adding` (the backfill's work left).
RAW_COUNTS = ("LegacyRows", "ShardedRows", "OpenIndexUnstampedRows")
# 8 guard metrics + the guard's errors + GSI throttles + its incomplete read, then 4 sweep errors
# + 5 schedule DLQs, 5 failed-invocation queues, 3 backfill execution outcomes and the backfill
# pausing itself.
ALARM_COUNT = len(GUARD_ALARMS) + 3 + 4 + 5 + 5 + 3 + 1
PAGER_EMAIL = "oncall@example.com"
PAGER_URL = "https://pager.example.com/hooks/renewal-saga"
ORG_TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:org-paging"
MODES = ["owned_synth", "import_mode_synth"]


@pytest.fixture(params=MODES)
def template(request: pytest.FixtureRequest) -> Template:
    synthesised: Synthesised = request.getfixturevalue(request.param)
    return synthesised.template


@pytest.fixture(scope="module")
def subscribed_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """cdk.json as committed, with a pager.json that lists an address and a webhook."""
    outdir = tmp_path_factory.mktemp("cdk-subscribed")
    pager = write_pager_config(outdir, {"email": [PAGER_EMAIL], "https": [PAGER_URL]})
    return _synthesise(outdir, pager_config=pager)


@pytest.fixture(scope="module")
def org_topic_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    """The usual production set-up: the alarms publish to the organisation's paging topic, and
    (context runbookBaseUrl) link the organisation's copy of the on-call guide."""
    return _synthesise(
        tmp_path_factory.mktemp("cdk-org-topic"),
        {"alarmTopicArn": ORG_TOPIC_ARN, "runbookBaseUrl": ORG_RUNBOOK_BASE_URL + "/"},
    )


def only(template: Template, resource_type: str, props: dict[str, Any] | None = None) -> str:
    found = template.find_resources(
        resource_type, {"Properties": Match.object_like(props)} if props else None
    )
    assert len(found) == 1, f"{len(found)} {resource_type} match {props}"
    return next(iter(found))


def alarm_for(
    template: Template, metric_name: str, dimensions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    props: dict[str, Any] = {"MetricName": metric_name}
    if dimensions is not None:
        props["Dimensions"] = dimensions
    found = template.find_resources(ALARM, {"Properties": props})
    assert len(found) == 1, metric_name
    properties: dict[str, Any] = next(iter(found.values()))["Properties"]
    return properties


def observability_alarms(alarms: Mapping[str, Any]) -> dict[str, Any]:
    """The alarms infra/observability/alarms.py defines (other constructs may add their own)."""
    return {k: v for k, v in alarms.items() if k.startswith("Observability")}


def topic_ref(template: Template) -> dict[str, str]:
    return {"Ref": only(template, "AWS::SNS::Topic")}


def guard_function(template: Template) -> str:
    return only(template, "AWS::Lambda::Function", {"Handler": "handlers.drift_guard.handler"})


# ---- the alarms ---------------------------------------------------------------------------------


def table_dimension(template: Template) -> Any:
    tables = template.find_resources("AWS::DynamoDB::Table")
    return {"Ref": next(iter(tables))} if tables else "propflow-prod"


def pages(template: Template, alarm: dict[str, Any]) -> None:
    assert alarm["AlarmActions"] == [topic_ref(template)], alarm["AlarmDescription"]
    assert alarm["OKActions"] == [topic_ref(template)], alarm["AlarmDescription"]


@pytest.mark.parametrize("metric", sorted(GUARD_ALARMS))
def test_each_wrong_now_guard_alarm_watches_its_metric_pages_on_findings_and_pages(
    template: Template, metric: str
) -> None:
    period, evaluations, datapoints = GUARD_ALARMS[metric]
    alarm = alarm_for(template, metric)
    assert alarm["Namespace"] == "RenewalSagaIndex"
    assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
        {"Name": "IndexName", "Value": INDEX_NAME},
        {"Name": "TableName", "Value": table_dimension(template)},
        {"Name": "service", "Value": "drift-guard"},
    ]
    assert (alarm["Statistic"], alarm["Period"]) == ("Maximum", period)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (evaluations, datapoints)
    # A read finishing across runs publishes the every-run counts only when complete: no data
    # is no finding (DriftReadIncomplete watches for a stopped guard); the scan's counts come
    # only from scanning runs, and none in two intervals pages.
    scan_only = metric in SCAN_ONLY_METRICS
    assert alarm["TreatMissingData"] == ("breaching" if scan_only else "notBreaching")
    pages(template, alarm)
    assert alarm["AlarmName"] == f"RenewalSagaIndex-{GUARD_ALARM_NAMES[metric]}"
    description = alarm["AlarmDescription"]
    assert f"{RUNBOOK}#{metric.lower()}" in description
    assert "Logs Insights saved query: RenewalSagaIndex/drift-guard/reports." in description
    first = {
        **dict.fromkeys(SCAN_ONLY_METRICS, "drift --json"),  # only the scan finds them
        "ControlRecordMissing": "status",
    }.get(metric, "status --drift")
    # The table's real name (the committed tableName in both modes), global option first.
    assert f"First run: `saga-index --table propflow-prod {first}`." in description


@pytest.mark.parametrize("metric", RAW_COUNTS)
def test_the_raw_counts_page_nobody(template: Template, metric: str) -> None:
    # 40 legacy rows are right while migrating and wrong once sharded: only the guard, which
    # reads the control record, can tell; it says so in the Unexpected* metrics.
    assert template.find_resources(ALARM, {"Properties": {"MetricName": metric}}) == {}


def test_an_incomplete_drift_read_has_its_own_alarm_apart_from_drift_found(
    template: Template,
) -> None:
    alarm = alarm_for(template, "DriftReadIncomplete")
    assert alarm["AlarmName"] == "RenewalSagaIndex-DriftReadIncomplete"
    assert alarm["Namespace"] == "RenewalSagaIndex"
    # Minimum over 5 minutes: one run that completed the read in the period makes it 0; 90
    # minutes of incomplete runs (or of no data: a stopped guard) pages.
    assert (alarm["Statistic"], alarm["Period"]) == ("Minimum", 300)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (18, 18)
    assert alarm["TreatMissingData"] == "breaching"
    pages(template, alarm)
    description = alarm["AlarmDescription"]
    assert "This is not drift found." in description
    assert "First run: `saga-index --table propflow-prod drift --json`" in description
    assert f"{RUNBOOK}#driftreadincomplete" in description
    # And no drift alarm watches it, nor it a drift metric
    for metric in GUARD_ALARMS:
        assert alarm_for(template, metric)["AlarmName"] != alarm["AlarmName"]


def test_the_guard_functions_own_errors_page(template: Template) -> None:
    dimensions = [{"Name": "FunctionName", "Value": {"Ref": guard_function(template)}}]
    alarm = alarm_for(template, "Errors", dimensions)
    assert alarm["AlarmName"] == "RenewalSagaIndex-DriftGuardErrors"
    assert alarm["Namespace"] == "AWS/Lambda"
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 0)
    # One failed run that the next repairs does not page; two of three do.
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == JOB_M_OF_N
    assert alarm["TreatMissingData"] == "notBreaching"
    pages(template, alarm)
    assert (
        "Logs Insights saved query: RenewalSagaIndex/drift-guard/failures."
        in (alarm["AlarmDescription"])
    )


SWEEP_HANDLERS = {
    "workflow-health-sweep": "handlers.sweeps.workflow_health_sweep",
    "retry-failed-prepare": "handlers.sweeps.retry_failed_prepare",
    "stuck-saga-sweep": "handlers.sweeps.stuck_saga_sweep",
    "agent-metrics-snapshot": "handlers.sweeps.agent_metrics_snapshot",
}


def test_a_failing_sweep_pages(template: Template) -> None:
    for job, handler in SWEEP_HANDLERS.items():
        function = only(template, "AWS::Lambda::Function", {"Handler": handler})
        alarm = alarm_for(
            template, "Errors", [{"Name": "FunctionName", "Value": {"Ref": function}}]
        )
        assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == (
            "AWS/Lambda",
            "Sum",
            0,
        ), job
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        pages(template, alarm)
        # M of N over the job's own period: one datapoint per firing, so a 15-minute sweep's
        # alarm needs two failed firings of three, not two failures in 15 minutes it cannot have.
        assert alarm["Period"] == JOBS_BY_NAME[job].period_minutes * 60, job
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == JOB_M_OF_N, job
        pascal = "".join(part.title() for part in job.split("-"))
        assert alarm["AlarmName"] == f"RenewalSagaIndex-{pascal}Errors"
        description = alarm["AlarmDescription"]
        assert f"Logs Insights saved query: RenewalSagaIndex/{job}/failures." in description
        assert f"{RUNBOOK}#sweep-failures" in description
        assert "First run: `saga-index --table " in description
        assert " sagas open >/dev/null`" in description


def test_every_schedules_dead_letter_queue_pages_on_arrivals_two_periods_of_three(
    template: Template,
) -> None:
    schedules = template.find_resources("AWS::Scheduler::Schedule")
    assert len(schedules) == 5
    for logical_id, schedule in schedules.items():
        dlq_arn = schedule["Properties"]["Target"]["DeadLetterConfig"]["Arn"]
        queue = dlq_arn["Fn::GetAtt"][0]
        job = json.loads(schedule["Properties"]["Target"]["Input"])["job"]
        alarm = alarm_for(
            template,
            "NumberOfMessagesSent",
            [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}],
        )
        # Arrivals, not depth: the depth stays up until someone drains the queue, so M of N on
        # it would page on the first message anyway.
        assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == (
            "AWS/SQS",
            "Sum",
            0,
        ), logical_id
        assert alarm["Period"] == JOBS_BY_NAME[job].period_minutes * 60, job
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == JOB_M_OF_N, job
        assert alarm["TreatMissingData"] == "notBreaching"
        pages(template, alarm)
        # The first command reads the queue the alarm watches (its URL resolved at deploy).
        parts = alarm["AlarmDescription"]["Fn::Join"][1]
        assert {"Ref": queue} in parts, job
        assert "aws sqs receive-message --queue-url " in parts[parts.index({"Ref": queue}) - 1]


def test_gsi_throttle_events_alarm_sums_the_index_throttle_metrics_and_pages(
    template: Template,
) -> None:
    found = template.find_resources(
        ALARM, {"Properties": {"Metrics": Match.array_with([Match.object_like({"Id": "m0"})])}}
    )
    (alarm,) = (resource["Properties"] for resource in found.values())
    expression, *stats = alarm["Metrics"]
    assert expression["Expression"] == "SUM([m0, m1, m2, m3])"
    assert sorted(s["MetricStat"]["Metric"]["MetricName"] for s in stats) == sorted(
        [
            "ReadThrottleEvents",
            "WriteThrottleEvents",
            "ReadKeyRangeThroughputThrottleEvents",
            "WriteKeyRangeThroughputThrottleEvents",
        ]
    )
    for stat in stats:
        metric = stat["MetricStat"]
        assert metric["Metric"]["Namespace"] == "AWS/DynamoDB"
        assert sorted(metric["Metric"]["Dimensions"], key=lambda d: d["Name"]) == [
            {"Name": "GlobalSecondaryIndexName", "Value": INDEX_NAME},
            {"Name": "TableName", "Value": table_dimension(template)},
        ]
        assert (metric["Stat"], metric["Period"]) == ("Sum", 300)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    pages(template, alarm)


def test_the_backfill_pausing_itself_on_an_account_or_on_demand_maximum_pages(
    template: Template,
) -> None:
    # the worker's PacePauses, which its pacer counts when DynamoDB answers an account limit
    # or an on-demand maximum
    found = template.find_resources(
        ALARM, {"Properties": {"AlarmName": "RenewalSagaIndex-BackfillPacePaused"}}
    )
    (alarm,) = (resource["Properties"] for resource in found.values())
    assert alarm["MetricName"] == "PacePauses"
    assert alarm["Namespace"] == "RenewalSagaIndex"
    assert {"Name": "service", "Value": "backfill-worker"} in alarm["Dimensions"]
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 300)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert "status" in alarm["AlarmDescription"]
    pages(template, alarm)


def test_every_alarm_has_its_stable_name(template: Template) -> None:
    alarms = observability_alarms(template.find_resources(ALARM))
    assert {a["Properties"]["AlarmName"] for a in alarms.values()} == ALARM_NAMES
    # The construct IDs, and so the logical IDs, are the ones from before the names
    # (test_the_alarms_dashboard_and_pager_keep_their_logical_ids pins them all).
    # `saga-index status --alarms` lists the alarms by this prefix.
    assert all(name.startswith("RenewalSagaIndex-") for name in ALARM_NAMES)


# The logical IDs of the stack's own named and stateful observability resources. A new logical ID
# for an alarm or the dashboard (whose names stay) makes CloudFormation create a resource under a
# name that already exists before it deletes the old one; a new one for the topic replaces it
# and every subscriber confirms again. Measured when cdk-monitoring-constructs was evaluated: its
# facade names each alarm construct after the alarm name, which changed all 25
# (docs/observability.md, "What stays hand-written, and why").
KEPT_LOGICAL_IDS = {
    "ObservabilityUnexpectedLegacyRowsAlarm2FE6E466",
    "ObservabilityUnexpectedShardedRowsAlarm5BF8A902",
    "ObservabilityMisroutedRowsAlarm4265D5AD",
    "ObservabilityControlRecordMissingAlarm3487D4D2",
    "ObservabilityUnindexedRowsAlarm51BA4DF9",
    "ObservabilityStrayRowsAlarmDE10B303",
    "ObservabilityOpenIndexMissingRowsAlarmB5450AB9",
    "ObservabilityOpenIndexStrayRowsAlarmFF479FF6",
    "ObservabilityGsiThrottlesAlarmCCEA1FBB",
    "ObservabilityDriftGuardErrorsAlarm3F3630C5",
    "ObservabilityDriftReadIncompleteAlarm3FBEADB9",
    "ObservabilityWorkflowHealthSweepErrorsAlarm4878292F",
    "ObservabilityRetryFailedPrepareErrorsAlarm8B4B8F9A",
    "ObservabilityStuckSagaSweepErrorsAlarm5AEC0D61",
    "ObservabilityAgentMetricsSnapshotErrorsAlarmC5715AD5",
    "ObservabilityDriftGuardDeadLettersAlarm6F06AD56",
    "ObservabilityWorkflowHealthSweepDeadLettersAlarmA557C432",
    "ObservabilityRetryFailedPrepareDeadLettersAlarm9FE14E53",
    "ObservabilityStuckSagaSweepDeadLettersAlarm19BED99C",
    "ObservabilityAgentMetricsSnapshotDeadLettersAlarmB2E56791",
    "ObservabilityDriftGuardFailedInvocationsAlarmFC24C5A8",
    "ObservabilityWorkflowHealthSweepFailedInvocationsAlarm6D62CDAE",
    "ObservabilityRetryFailedPrepareFailedInvocationsAlarmD884BAE0",
    "ObservabilityStuckSagaSweepFailedInvocationsAlarm5CB6E7CF",
    "ObservabilityAgentMetricsSnapshotFailedInvocationsAlarmF5D4EB21",
    "ObservabilityBackfillExecutionsFailedAlarm7E155696",
    "ObservabilityBackfillExecutionsTimedOutAlarm0BDF2BAD",
    "ObservabilityBackfillExecutionsAbortedAlarmA7F31AEC",
    "ObservabilityBackfillPacePausedAlarmE0F5ED5A",
    "ObservabilityDashboard9A1D08B3",
    "ObservabilityPager0629C20C",
    "ObservabilityPagerKey39BF971A",
}


def test_the_alarms_dashboard_and_pager_keep_their_logical_ids(owned_template: Template) -> None:
    resources = owned_template.to_json()["Resources"]
    assert not KEPT_LOGICAL_IDS - set(resources)
    alarms = observability_alarms(owned_template.find_resources(ALARM))
    assert set(alarms) == {i for i in KEPT_LOGICAL_IDS if "Alarm" in i}


def test_the_subscriptions_stay_under_the_pager_topics_construct(
    subscribed_synth: Synthesised,
) -> None:
    # A subscription's logical ID is the topic's path plus its endpoint: it stays while both do.
    subscriptions = subscribed_synth.template.find_resources("AWS::SNS::Subscription")
    assert {i[:-8] for i in subscriptions} == {  # less CDK's 8-character path hash
        "ObservabilityPager" + re.sub(r"[^A-Za-z0-9]", "", endpoint)
        for endpoint in (PAGER_EMAIL, PAGER_URL)
    }


def description_texts(template: Template) -> dict[str, str]:
    """Each alarm's description as CloudWatch will hold it, every deploy-time token (a queue
    URL) replaced by the longest value it can take: https://sqs.<region>.amazonaws.com/
    <account>/<queue name of at most 80 characters>."""
    longest_queue_url = "https://sqs.ap-southeast-5.amazonaws.com/123456789012/" + "q" * 80
    texts = {}
    for alarm in observability_alarms(template.find_resources(ALARM)).values():
        properties = alarm["Properties"]
        description = properties["AlarmDescription"]
        if isinstance(description, dict):
            description = "".join(
                part if isinstance(part, str) else longest_queue_url
                for part in description["Fn::Join"][1]
            )
        texts[properties["AlarmName"]] = description
    return texts


def test_every_description_carries_the_full_runbook_url_a_command_and_fits_cloudwatch(
    template: Template,
) -> None:
    texts = description_texts(template)
    assert set(texts) == ALARM_NAMES
    for name, text in texts.items():
        assert len(text) <= MAX_DESCRIPTION_CHARS, name
        assert f"Runbook: {RUNBOOK}#" in text, name
        assert "First run: `" in text, name
        assert "Logs Insights saved query: RenewalSagaIndex/" in text or (
            "DeadLetters" in name and "No saved query" in text
        ), name


def test_the_descriptions_name_the_configured_runbook_and_the_real_table(
    org_topic_synth: Synthesised,
) -> None:
    texts = description_texts(org_topic_synth.template)
    for name, text in texts.items():
        # The trailing slash given in context is dropped: no "//" before the page.
        assert f"Runbook: {ORG_RUNBOOK_BASE_URL}/observability.md#" in text, name
        assert DEFAULT_RUNBOOK_BASE_URL not in text, name
    assert (
        "First run: `saga-index --table propflow-prod status --drift`"
        in (texts["RenewalSagaIndex-LegacyRows"])
    )
    assert (
        "First run: `saga-index --table propflow-prod watch --days 1`"
        in (texts["RenewalSagaIndex-GsiThrottles"])
    )


def test_every_description_fits_with_the_longest_runbook_url_and_table_name() -> None:
    # Given the longest values the configuration accepts
    runbook = Runbook("https://" + "d" * (MAX_RUNBOOK_BASE_URL_CHARS - 8), "t" * 255)
    longest_queue_url = "https://sqs.ap-southeast-5.amazonaws.com/123456789012/" + "q" * 80
    jobs = [job.name for job in JOBS_BY_NAME.values()]
    # When every description is written
    texts = alarm_descriptions(
        runbook,
        sweep_jobs=[job for job in jobs if job != "drift-guard"],
        scheduled_jobs=jobs,
        queue_url=lambda job, kind: longest_queue_url,
    )
    # Then each still fits CloudWatch's limit and names both
    assert len(texts) == len(ALARM_NAMES)
    for name, text in texts.items():
        assert len(text) <= MAX_DESCRIPTION_CHARS, (name, len(text))
        assert runbook.base_url + "/observability.md#" in text, name


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, DEFAULT_RUNBOOK_BASE_URL),
        ("", DEFAULT_RUNBOOK_BASE_URL),
        ("https://wiki.example.com/docs", "https://wiki.example.com/docs"),
        ("https://wiki.example.com/docs/", "https://wiki.example.com/docs"),
        ("https://git.example.com:8443/a/b-c/d_e", "https://git.example.com:8443/a/b-c/d_e"),
    ],
)
def test_runbook_base_url_defaults_to_the_repositorys_docs_and_drops_a_trailing_slash(
    value: Any, expected: str
) -> None:
    context = {**load_cdk_json_context(), "runbookBaseUrl": value}
    assert StackConfig.from_context(context).runbook_base_url == expected


@pytest.mark.parametrize(
    "value",
    [
        "http://wiki.example.com/docs",
        "wiki.example.com/docs",
        "https://",
        "https://wiki.example.com/docs?page=1",
        "https://wiki.example.com/docs#top",
        "https://wiki.example.com//docs",
        "https://wiki.example.com/my docs",
        "https://wiki.example.com/" + "d" * MAX_RUNBOOK_BASE_URL_CHARS,
        42,
    ],
)
def test_a_bad_runbook_base_url_stops_synth_naming_the_key(value: Any) -> None:
    with pytest.raises(ConfigError, match="runbookBaseUrl") as raised:
        build_app(context_overrides={"runbookBaseUrl": value})
    assert repr(value) in str(raised.value)


def test_every_alarm_pages_through_the_one_pager_topic(template: Template) -> None:
    alarms = observability_alarms(template.find_resources(ALARM))
    assert len(alarms) == ALARM_COUNT
    for logical_id, alarm in alarms.items():
        properties = alarm["Properties"]
        assert properties["AlarmActions"] == [topic_ref(template)], logical_id
        assert properties["OKActions"] == [topic_ref(template)], logical_id
        assert "InsufficientDataActions" not in properties, logical_id


# ---- the pager topic ----------------------------------------------------------------------------


def test_the_pager_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(
    owned_template: Template,
) -> None:
    key_id = only(owned_template, "AWS::KMS::Key", {"EnableKeyRotation": True})
    owned_template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}}
    )
    owned_template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "KeyPolicy": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                            }
                        )
                    ]
                )
            }
        },
    )


def test_the_pager_topic_denies_publishing_without_tls(owned_template: Template) -> None:
    topic = topic_ref(owned_template)
    owned_template.has_resource_properties(
        "AWS::SNS::TopicPolicy",
        {
            "Topics": [topic],
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Principal": "*",
                                "Action": "sns:Publish",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                "Resource": topic,
                            }
                        ),
                        Match.object_like(
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                                "Action": "sns:Publish",
                            }
                        ),
                    ]
                )
            },
        },
    )


def test_pager_subscriptions_come_from_the_committed_pager_json(
    subscribed_synth: Synthesised,
) -> None:
    template = subscribed_synth.template
    topic = topic_ref(template)
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": PAGER_EMAIL, "TopicArn": topic}
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "https", "Endpoint": PAGER_URL, "TopicArn": topic}
    )
    assert len(template.find_resources("AWS::SNS::Subscription")) == 2
    Annotations.from_stack(subscribed_synth.stack).has_no_warning(
        "*", Match.string_like_regexp("nobody subscribes")
    )


def test_a_topic_nobody_subscribes_to_is_a_synth_warning(owned_synth: Synthesised) -> None:
    assert owned_synth.template.find_resources("AWS::SNS::Subscription") == {}
    Annotations.from_stack(owned_synth.stack).has_warning(
        "/RenewalSagaIndex/Observability/Pager",
        Match.string_like_regexp(f"nobody subscribes.*{UNSUBSCRIBED_WARNING}"),
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pagerEmail", PAGER_EMAIL),
        ("pagerEmail", ""),
        ("pagerHttpsUrl", PAGER_URL),
    ],
)
def test_no_deploy_line_can_set_or_drop_a_pager_subscription(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        build_app(context_overrides={key: value})
    assert repr(key) in str(raised.value)
    assert "pager.json" in str(raised.value)


def test_the_organisations_topic_replaces_the_stacks_own(org_topic_synth: Synthesised) -> None:
    template = org_topic_synth.template
    assert template.find_resources("AWS::SNS::Topic") == {}
    assert template.find_resources("AWS::SNS::Subscription") == {}
    assert template.find_resources("AWS::KMS::Key") == {}
    alarms = observability_alarms(template.find_resources(ALARM))
    assert len(alarms) == ALARM_COUNT
    for logical_id, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [ORG_TOPIC_ARN], logical_id
        assert alarm["Properties"]["OKActions"] == [ORG_TOPIC_ARN], logical_id
    (output,) = [o for name, o in template.find_outputs("*").items() if "PagerTopicArn" in name]
    assert output["Value"] == ORG_TOPIC_ARN
    Annotations.from_stack(org_topic_synth.stack).has_no_warning(
        "*", Match.string_like_regexp("nobody subscribes")
    )


def test_the_organisations_topic_and_subscriptions_of_our_own_contradict() -> None:
    pager = PagerConfig(emails=(PAGER_EMAIL,))
    context = {**load_cdk_json_context(), "alarmTopicArn": ORG_TOPIC_ARN}
    with pytest.raises(ConfigError, match=r"alarmTopicArn.*pager\.json"):
        StackConfig.from_context(context, pager)


@pytest.mark.parametrize(
    "document",
    [
        {"email": "oncall@example.com"},
        {"email": ["not-an-address"]},
        {"email": [7]},
        {"https": ["http://pager.example.com/hook"]},
        {"https": ["https://"]},
        {"email": [PAGER_EMAIL, PAGER_EMAIL]},
        {"emails": [PAGER_EMAIL]},
        ["oncall@example.com"],
    ],
)
def test_a_bad_pager_json_fails_synth_naming_it(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "pager.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pager\.json"):
        load_pager_config(path)


def test_a_missing_pager_json_fails_synth(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pager\.json is missing"):
        load_pager_config(tmp_path / "pager.json")


def test_the_committed_pager_json_and_cdk_json_parse() -> None:
    StackConfig.from_context(load_cdk_json_context(), load_pager_config())


# ---- Contributor Insights -----------------------------------------------------------------------


def test_contributor_insights_watch_throttled_keys_on_the_table_and_the_gsi(
    owned_template: Template,
) -> None:
    insights = {"Enabled": True, "Mode": "THROTTLED_KEYS"}
    owned_template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "ContributorInsightsSpecification": insights,
            "GlobalSecondaryIndexes": [
                Match.object_like(
                    {"IndexName": INDEX_NAME, "ContributorInsightsSpecification": insights}
                ),
                # The open index is added as the production table's owning stack adds it
                # (infra/open_index.py), where this stack sets no Contributor Insights.
                Match.object_like({"IndexName": OPEN_INDEX_NAME}),
            ],
        },
    )


def test_import_mode_owns_no_table_so_sets_no_contributor_insights_but_still_pages(
    import_mode_template: Template,
) -> None:
    assert import_mode_template.find_resources("AWS::DynamoDB::Table") == {}
    assert len(observability_alarms(import_mode_template.find_resources(ALARM))) == ALARM_COUNT
    alarm = alarm_for(import_mode_template, "UnexpectedLegacyRows")
    assert {"Name": "TableName", "Value": "propflow-prod"} in alarm["Dimensions"]


# ---- the dashboard ------------------------------------------------------------------------------


def dashboard(template: Template) -> dict[str, Any]:
    (resource,) = template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = resource["Properties"]["DashboardBody"]
    text = (
        "".join(part if isinstance(part, str) else "TOKEN" for part in body["Fn::Join"][1])
        if isinstance(body, dict)
        else body
    )
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def widget(body: dict[str, Any], title: str) -> dict[str, Any]:
    matches = [w for w in body["widgets"] if w["properties"].get("title", "").startswith(title)]
    assert len(matches) == 1, title
    return matches[0]["properties"]


def metric_lines(properties: dict[str, Any]) -> list[dict[str, Any]]:
    """Each graphed metric as {namespace, name, dims...} (expressions are left out)."""
    lines = []
    for entry in properties["metrics"]:
        parts = [p for p in entry if not isinstance(p, dict)]
        if not parts:
            continue
        namespace, name, *dims = parts
        lines.append(
            {"namespace": namespace, "name": name, **dict(zip(dims[::2], dims[1::2], strict=True))}
        )
    return lines


def expressions(properties: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        entry[0] for entry in properties["metrics"] if len(entry) == 1 and "expression" in entry[0]
    ]


def test_the_dashboard_shows_wrong_now_and_raw_drift_shards_throttles_backfill_and_sweeps(
    owned_template: Template,
) -> None:
    body = dashboard(owned_template)
    header = next(w for w in body["widgets"] if w["type"] == "text")["properties"]["markdown"]
    assert "`saga-index --table propflow-prod status`" in header
    wrong_now = metric_lines(widget(body, "Wrong now"))
    assert {m["name"] for m in wrong_now} == set(GUARD_ALARMS)
    assert {m["service"] for m in wrong_now} == {"drift-guard"}
    raw = metric_lines(widget(body, "Raw counts"))
    assert [(m["name"], m["service"]) for m in raw] == [
        ("LegacyRows", "drift-guard"),
        ("ShardedRows", "drift-guard"),
        ("AnomalousRows", "drift-guard"),
        ("OpenIndexUnstampedRows", "drift-guard"),
    ]
    # Every shard the guard reports, whatever N the control record says: a SEARCH, not N lines.
    (search,) = expressions(widget(body, "Rows per shard"))
    assert search["expression"] == (
        "SEARCH('{RenewalSagaIndex,IndexName,Shard,TableName,service} "
        'MetricName="RowsPerShard" service="drift-guard" TableName="TOKEN" '
        f'IndexName="{INDEX_NAME}"'
        "', 'Maximum', 300)"
    )
    assert metric_lines(widget(body, "Rows per shard")) == []
    assert [m["name"] for m in metric_lines(widget(body, "Shard skew"))] == ["ShardSkew"]
    throttles = widget(body, "GSI throttle events")
    index_lines = [m for m in metric_lines(throttles) if "GlobalSecondaryIndexName" in m]
    assert {
        "ReadKeyRangeThroughputThrottleEvents",
        "WriteKeyRangeThroughputThrottleEvents",
        "ReadThrottleEvents",
        "WriteThrottleEvents",
    } <= {m["name"] for m in index_lines}
    assert all(m["GlobalSecondaryIndexName"] == INDEX_NAME for m in index_lines)
    assert "ThrottledRequests" in {m["name"] for m in metric_lines(throttles)}
    backfill = metric_lines(widget(body, "Backfill progress"))
    assert [(m["name"], m["service"]) for m in backfill] == [
        ("Restamped", "backfill-worker"),
        ("Skipped", "backfill-worker"),
        ("Anomalies", "backfill-worker"),
    ]
    assert {(m["name"], m["service"]) for m in metric_lines(widget(body, "Sweep findings"))} == {
        ("SagaWorkflowUnhealthy", "workflow-health-sweep"),
        ("SagaPrepareRetryRequested", "retry-failed-prepare"),
        ("SagaPrepareRetriesExhausted", "retry-failed-prepare"),
        ("SagaStuck", "stuck-saga-sweep"),
    }
    sweeps = {
        "workflow-health-sweep",
        "retry-failed-prepare",
        "stuck-saga-sweep",
        "agent-metrics-snapshot",
    }
    for title, name in (("Sweep duration", "SweepDuration"), ("Sagas read", "SagasRead")):
        lines = metric_lines(widget(body, title))
        assert {m["service"] for m in lines} == sweeps
        assert {m["name"] for m in lines} == {name}
        assert all(m["namespace"] == "RenewalSagaIndex" for m in lines)
        assert all({"TableName", "IndexName"} <= set(m) for m in lines)
    alarms = widget(body, "Alarms")
    assert len(alarms["alarms"]) == ALARM_COUNT


def test_the_dashboard_links_the_runbook_and_the_saved_queries(owned_template: Template) -> None:
    (resource,) = owned_template.find_resources("AWS::CloudWatch::Dashboard").values()
    parts = resource["Properties"]["DashboardBody"]["Fn::Join"][1]
    # The Logs Insights console of the stack's own region (resolved at deploy).
    at = parts.index({"Ref": "AWS::Region"})
    assert parts[at - 1].endswith("(https://")
    assert parts[at + 1] == ".console.aws.amazon.com/cloudwatch/home?region="
    assert parts[at + 2] == {"Ref": "AWS::Region"}
    assert parts[at + 3].startswith("#logsV2:logs-insights)")
    widgets = dashboard(owned_template)["widgets"]
    texts = [w["properties"]["markdown"] for w in widgets if w["type"] == "text"]
    (links,) = [t for t in texts if "On-call guide" in t]
    assert f"[observability.md]({RUNBOOK})" in links
    saved = owned_template.find_resources("AWS::Logs::QueryDefinition")
    assert saved
    for query in saved.values():
        assert f"`{query['Properties']['Name']}`" in links


def test_the_dashboard_keeps_the_depth_of_every_scheduled_jobs_queue(
    owned_template: Template,
) -> None:
    lines = metric_lines(widget(dashboard(owned_template), "Scheduled jobs' queues"))
    assert {m["name"] for m in lines} == {"ApproximateNumberOfMessagesVisible"}
    # A dead-letter queue and a failed-invocations queue per scheduled job.
    assert len(lines) == 2 * len(SCHEDULED_JOBS)


def test_in_import_mode_the_rows_per_shard_search_names_the_table(
    import_mode_template: Template,
) -> None:
    (search,) = expressions(widget(dashboard(import_mode_template), "Rows per shard"))
    assert 'TableName="propflow-prod"' in search["expression"]


# ---- the guard's schedule, function and permissions ---------------------------------------------


def test_the_drift_guard_runs_every_5_minutes_on_its_scheduler_row(
    owned_template: Template,
) -> None:
    function_id = guard_function(owned_template)
    (schedule,) = (
        s["Properties"]
        for s in owned_template.find_resources("AWS::Scheduler::Schedule").values()
        if s["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    )
    assert schedule["ScheduleExpression"] == "cron(0/5 * * * ? *)"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    payload = json.loads(schedule["Target"]["Input"])
    assert payload["job"] == "drift-guard"
    assert payload["scheduledTime"] == "<aws.scheduler.scheduled-time>"
    assert "DeadLetterConfig" in schedule["Target"]


def test_the_drift_guard_function_is_configured_for_its_schedule(
    owned_template: Template,
) -> None:
    owned_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "handlers.drift_guard.handler",
            "Timeout": 240,
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "POWERTOOLS_SERVICE_NAME": "drift-guard",
                        "POWERTOOLS_METRICS_NAMESPACE": "RenewalSagaIndex",
                        "DRIFT_SCAN_EVERY": "12",
                        "DRIFT_GUARD_PERIOD_MINUTES": "5",
                    }
                )
            },
        },
    )


def guard_statements(template: Template) -> list[dict[str, Any]]:
    function = template.find_resources("AWS::Lambda::Function")[guard_function(template)]
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in template.find_resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    return [statement for statements in policies for statement in statements]


def test_the_guard_may_query_the_index_scan_the_table_read_the_control_record_and_no_more(
    owned_template: Template,
) -> None:
    statements = guard_statements(owned_template)
    table_id = next(iter(owned_template.find_resources("AWS::DynamoDB::Table")))
    by_action = {json.dumps(s["Action"]): (s["Resource"], s.get("Condition")) for s in statements}
    table = {"Fn::GetAtt": [table_id, "Arn"]}
    function = owned_template.find_resources("AWS::Lambda::Function")[
        guard_function(owned_template)
    ]
    log_group = {"Fn::GetAtt": [function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"], "Arn"]}
    [invoke_config] = [
        c["Properties"]
        for c in owned_template.find_resources("AWS::Lambda::EventInvokeConfig").values()
        if c["Properties"]["FunctionName"] == {"Ref": guard_function(owned_template)}
    ]
    assert by_action == {
        '["xray:PutTelemetryRecords", "xray:PutTraceSegments"]': ("*", None),
        # Query on GSI4 and on the open-saga index (one statement), nothing else of them.
        '"dynamodb:Query"': (
            [
                {"Fn::Join": ["", [table, f"/index/{OPEN_INDEX_NAME}"]]},
                {"Fn::Join": ["", [table, f"/index/{INDEX_NAME}"]]},
            ],
            None,
        ),
        # Only projected scans of the attributes the checks judge, never whole items.
        '"dynamodb:Scan"': (
            table,
            {
                "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
                "ForAllValues:StringEquals": {"dynamodb:Attributes": list(DRIFT_SCAN_ATTRIBUTES)},
            },
        ),
        # The open index's differences re-read: saga rows only, only what its rule reads.
        '"dynamodb:GetItem"': (
            table,
            {
                "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["RSAGA#*"]},
                "ForAllValues:StringEquals": {"dynamodb:Attributes": list(OPEN_RECHECK_ATTRIBUTES)},
                "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
            },
        ),
        # What is wrong now is judged against the control record: read it, never write it.
        '["dynamodb:GetItem", "dynamodb:Query"]': (table, CONTROL_CONDITION),
        # Its cursor, read and overwritten whole, on exactly its own partition key.
        '["dynamodb:GetItem", "dynamodb:PutItem"]': (
            table,
            {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": ["RSAGA_INDEX#DRIFT#CURSOR"]}},
        ),
        # Its own log group only, and its own failed-invocations queue.
        '["logs:CreateLogStream", "logs:PutLogEvents"]': (log_group, None),
        '"sqs:SendMessage"': (
            invoke_config["DestinationConfig"]["OnFailure"]["Destination"],
            None,
        ),
    }


def test_in_import_mode_the_guard_grants_point_at_the_named_table(
    import_mode_template: Template,
) -> None:
    rendered = json.dumps(guard_statements(import_mode_template))
    assert f"table/propflow-prod/index/{INDEX_NAME}" in rendered
    assert "dynamodb:Scan" in rendered
    assert "cloudwatch:PutMetricData" not in rendered


def test_template_on_disk_has_the_same_alarms(owned_synth: Synthesised) -> None:
    # The file cfn-lint checks is the one these assertions describe.
    document = json.loads(Path(owned_synth.template_path).read_text())
    alarms = {k: r for k, r in document["Resources"].items() if r["Type"] == ALARM}
    assert len(observability_alarms(alarms)) == ALARM_COUNT


def _github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to
    hyphens (`### Sweep failures` -> `sweep-failures`)."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_runbook_link_in_a_description_lands_on_a_heading_of_the_guide(
    owned_template: Template,
) -> None:
    guide = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
    anchors = {
        _github_anchor(line.lstrip("#"))
        for line in guide.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    for name, text in description_texts(owned_template).items():
        linked = re.findall(r"observability\.md#([\w-]+)", text)
        assert linked, name
        missing = [anchor for anchor in linked if anchor not in anchors]
        assert not missing, f"{name} links #{missing} which is no heading of observability.md"
