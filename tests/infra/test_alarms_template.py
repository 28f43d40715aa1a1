"""The synthesised alarms, pager topic, Contributor Insights, dashboard and drift-guard schedule.

Each alarm is asserted by behaviour: its metric, threshold, missing-data treatment and whether it
pages, in every migration phase (the phase flips actions only).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.config import ConfigError, StackConfig, load_cdk_json_context
from infra.stack import build_app
from saga_index.names import INDEX_NAME
from tests.infra.conftest import Synthesised

pytestmark = pytest.mark.infra

ALARM = "AWS::CloudWatch::Alarm"
PHASES = ("legacy", "migrating", "sharded", "rolling-back")
ALL = frozenset(PHASES)
# What pages in which phase: the contract plus the choices in
# infra/observability/alarms.py.
GUARD_ALARMS: dict[str, tuple[frozenset[str], int, int, int]] = {
    # metric: (phases that page, period seconds, evaluation periods, datapoints to alarm)
    "LegacyRows": (frozenset({"sharded"}), 300, 3, 2),
    "ShardedRows": (frozenset({"legacy"}), 300, 3, 2),
    "MisroutedRows": (ALL, 300, 3, 2),
    "UnindexedRows": (ALL, 7200, 1, 1),  # two scan intervals of K=12 x 5 min
    "StrayRows": (ALL, 7200, 1, 1),
}
THROTTLES_PAGE_IN = frozenset({"migrating", "sharded"})
# 5 guard metrics + the guard's errors + GSI throttles, then 4 sweep errors + 5 schedule DLQs.
ALARM_COUNT = len(GUARD_ALARMS) + 2 + 4 + 5
PAGER_EMAIL = "oncall@example.com"
PAGER_URL = "https://pager.example.com/hooks/renewal-saga"
# The sharded synth also proves rows-per-shard widgets are split for large N.
OVERRIDES: dict[str, dict[str, Any]] = {
    "migrating": {"phase": "migrating", "pagerEmail": PAGER_EMAIL, "pagerHttpsUrl": PAGER_URL},
    "sharded": {"phase": "sharded", "shardCount": 128},
    "rolling-back": {"phase": "rolling-back"},
}


@pytest.fixture(scope="module")
def phase_templates(
    default_synth: Synthesised, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Template]:
    templates = {"legacy": default_synth.template}
    for phase, overrides in OVERRIDES.items():
        _app, stack = build_app(overrides, outdir=tmp_path_factory.mktemp(f"cdk-{phase}"))
        # Template.from_stack fails on any cdk-nag finding: each phase is nag-clean too.
        templates[phase] = Template.from_stack(stack)
    return templates


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


def observability_alarms(alarms: dict[str, Any]) -> dict[str, Any]:
    """The alarms infra/observability/alarms.py defines (other constructs may add their own)."""
    return {k: v for k, v in alarms.items() if k.startswith("Observability")}


def topic_ref(template: Template) -> dict[str, str]:
    return {"Ref": only(template, "AWS::SNS::Topic")}


def guard_function(template: Template) -> str:
    return only(template, "AWS::Lambda::Function", {"Handler": "handlers.drift_guard.handler"})


# ---- the alarms ---------------------------------------------------------------------------------


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("metric", sorted(GUARD_ALARMS))
def test_each_guard_alarm_watches_its_metric_treats_missing_data_as_breaching_and_pages_by_phase(
    phase_templates: dict[str, Template], phase: str, metric: str
) -> None:
    template = phase_templates[phase]
    pages_in, period, evaluations, datapoints = GUARD_ALARMS[metric]
    alarm = alarm_for(template, metric)
    table_id = next(iter(template.find_resources("AWS::DynamoDB::Table")))
    assert alarm["Namespace"] == "RenewalSagaIndex"
    assert sorted(alarm["Dimensions"], key=lambda d: d["Name"]) == [
        {"Name": "IndexName", "Value": INDEX_NAME},
        {"Name": "TableName", "Value": {"Ref": table_id}},
        {"Name": "service", "Value": "drift-guard"},
    ]
    assert (alarm["Statistic"], alarm["Period"]) == ("Maximum", period)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (evaluations, datapoints)
    assert alarm["TreatMissingData"] == "breaching"
    if phase in pages_in:
        assert alarm["AlarmActions"] == [topic_ref(template)]
        assert alarm["OKActions"] == [topic_ref(template)]
        assert alarm["AlarmDescription"].startswith("[PAGES]")
    else:
        assert "AlarmActions" not in alarm
        assert "OKActions" not in alarm
        assert alarm["AlarmDescription"].startswith(f"[informational in phase {phase}]")


@pytest.mark.parametrize("phase", PHASES)
def test_the_guard_functions_own_errors_page_in_every_phase(
    phase_templates: dict[str, Template], phase: str
) -> None:
    template = phase_templates[phase]
    dimensions = [{"Name": "FunctionName", "Value": {"Ref": guard_function(template)}}]
    alarm = alarm_for(template, "Errors", dimensions)
    assert alarm["Namespace"] == "AWS/Lambda"
    assert (alarm["Statistic"], alarm["Period"], alarm["Threshold"]) == ("Sum", 300, 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [topic_ref(template)]


SWEEP_HANDLERS = {
    "workflow-health-sweep": "handlers.sweeps.workflow_health_sweep",
    "retry-failed-prepare": "handlers.sweeps.retry_failed_prepare",
    "stuck-saga-sweep": "handlers.sweeps.stuck_saga_sweep",
    "agent-metrics-snapshot": "handlers.sweeps.agent_metrics_snapshot",
}


@pytest.mark.parametrize("phase", PHASES)
def test_a_failing_sweep_pages_in_every_phase(
    phase_templates: dict[str, Template], phase: str
) -> None:
    template = phase_templates[phase]
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
        assert alarm["AlarmActions"] == [topic_ref(template)], job


@pytest.mark.parametrize("phase", PHASES)
def test_every_schedules_dead_letter_queue_pages_when_it_holds_a_message(
    phase_templates: dict[str, Template], phase: str
) -> None:
    template = phase_templates[phase]
    schedules = template.find_resources("AWS::Scheduler::Schedule")
    assert len(schedules) == 5
    for logical_id, schedule in schedules.items():
        dlq_arn = schedule["Properties"]["Target"]["DeadLetterConfig"]["Arn"]
        queue = dlq_arn["Fn::GetAtt"][0]
        alarm = alarm_for(
            template,
            "ApproximateNumberOfMessagesVisible",
            [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}],
        )
        assert (alarm["Namespace"], alarm["Statistic"], alarm["Threshold"]) == (
            "AWS/SQS",
            "Maximum",
            0,
        ), logical_id
        assert alarm["AlarmActions"] == [topic_ref(template)], logical_id


@pytest.mark.parametrize("phase", PHASES)
def test_gsi_throttle_events_alarm_sums_the_index_throttle_metrics(
    phase_templates: dict[str, Template], phase: str
) -> None:
    template = phase_templates[phase]
    found = template.find_resources(
        ALARM, {"Properties": {"Metrics": Match.array_with([Match.object_like({"Id": "m0"})])}}
    )
    (alarm,) = (resource["Properties"] for resource in found.values())
    expression, *stats = alarm["Metrics"]
    assert expression["Expression"] == "SUM([m0, m1, m2, m3])"
    table_id = next(iter(template.find_resources("AWS::DynamoDB::Table")))
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
            {"Name": "TableName", "Value": {"Ref": table_id}},
        ]
        assert (metric["Stat"], metric["Period"]) == ("Sum", 300)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["TreatMissingData"] == "notBreaching"
    if phase in THROTTLES_PAGE_IN:
        assert alarm["AlarmActions"] == [topic_ref(template)]
    else:
        assert "AlarmActions" not in alarm


@pytest.mark.parametrize("phase", PHASES)
def test_every_alarm_action_is_the_one_pager_topic(
    phase_templates: dict[str, Template], phase: str
) -> None:
    template = phase_templates[phase]
    alarms = template.find_resources(ALARM)
    assert len(observability_alarms(alarms)) == ALARM_COUNT
    actions = [
        action
        for alarm in alarms.values()
        for key in ("AlarmActions", "OKActions", "InsufficientDataActions")
        for action in alarm["Properties"].get(key, [])
    ]
    assert actions
    assert all(action == topic_ref(template) for action in actions)


# ---- the pager topic ----------------------------------------------------------------------------


def test_the_pager_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(
    default_template: Template,
) -> None:
    key_id = only(default_template, "AWS::KMS::Key", {"EnableKeyRotation": True})
    default_template.has_resource_properties(
        "AWS::SNS::Topic", {"KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}}
    )
    default_template.has_resource_properties(
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


def test_the_pager_topic_denies_publishing_without_tls(default_template: Template) -> None:
    topic = topic_ref(default_template)
    default_template.has_resource_properties(
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


def test_pager_subscriptions_come_from_context(phase_templates: dict[str, Template]) -> None:
    template = phase_templates["migrating"]
    topic = topic_ref(template)
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": PAGER_EMAIL, "TopicArn": topic}
    )
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "https", "Endpoint": PAGER_URL, "TopicArn": topic}
    )
    assert phase_templates["legacy"].find_resources("AWS::SNS::Subscription") == {}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pagerEmail", "not-an-address"),
        ("pagerEmail", 7),
        ("pagerHttpsUrl", "http://pager.example.com/hook"),
        ("pagerHttpsUrl", "https://"),
    ],
)
def test_a_bad_pager_context_value_fails_synth_naming_it(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        StackConfig.from_context({**load_cdk_json_context(), key: value})
    assert repr(key) in str(raised.value)
    assert repr(value) in str(raised.value)


# ---- Contributor Insights -----------------------------------------------------------------------


def test_contributor_insights_watch_throttled_keys_on_the_table_and_the_gsi(
    default_template: Template,
) -> None:
    insights = {"Enabled": True, "Mode": "THROTTLED_KEYS"}
    default_template.has_resource_properties(
        "AWS::DynamoDB::Table",
        {
            "ContributorInsightsSpecification": insights,
            "GlobalSecondaryIndexes": [
                Match.object_like(
                    {"IndexName": INDEX_NAME, "ContributorInsightsSpecification": insights}
                )
            ],
        },
    )


def test_import_mode_owns_no_table_so_sets_no_contributor_insights_but_still_pages(
    import_mode_template: Template,
) -> None:
    assert import_mode_template.find_resources("AWS::DynamoDB::Table") == {}
    assert len(observability_alarms(import_mode_template.find_resources(ALARM))) == ALARM_COUNT
    alarm = alarm_for(import_mode_template, "LegacyRows")
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
    """Each graphed metric as {namespace, name, dims...}."""
    lines = []
    for entry in properties["metrics"]:
        parts = [p for p in entry if not isinstance(p, dict)]
        namespace, name, *dims = parts
        lines.append(
            {"namespace": namespace, "name": name, **dict(zip(dims[::2], dims[1::2], strict=True))}
        )
    return lines


def test_the_dashboard_shows_drift_shards_throttles_backfill_and_sweeps(
    default_template: Template,
) -> None:
    body = dashboard(default_template)
    drift = metric_lines(widget(body, "Legacy rows"))
    assert [(m["name"], m["service"]) for m in drift] == [
        ("LegacyRows", "drift-guard"),
        ("ShardedRows", "drift-guard"),
    ]
    assert {m["name"] for m in metric_lines(widget(body, "Misrouted"))} == {
        "MisroutedRows",
        "UnindexedRows",
        "StrayRows",
        "AnomalousRows",
    }
    shards = metric_lines(widget(body, "Rows per shard (0..15)"))
    assert [m["Shard"] for m in shards] == [str(n) for n in range(16)]
    assert {m["name"] for m in shards} == {"RowsPerShard"}
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


def test_the_rows_per_shard_graph_is_split_when_n_is_large(
    phase_templates: dict[str, Template],
) -> None:
    body = dashboard(phase_templates["sharded"])
    first = metric_lines(widget(body, "Rows per shard (0..63)"))
    second = metric_lines(widget(body, "Rows per shard (64..127)"))
    assert [m["Shard"] for m in first + second] == [str(n) for n in range(128)]


# ---- the guard's schedule, function and permissions ---------------------------------------------


def test_the_drift_guard_runs_every_5_minutes_on_its_scheduler_row(
    default_template: Template,
) -> None:
    function_id = guard_function(default_template)
    (schedule,) = (
        s["Properties"]
        for s in default_template.find_resources("AWS::Scheduler::Schedule").values()
        if s["Properties"]["Target"]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
    )
    assert schedule["ScheduleExpression"] == "cron(0/5 * * * ? *)"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    payload = json.loads(schedule["Target"]["Input"])
    assert payload["job"] == "drift-guard"
    assert payload["scheduledTime"] == "<aws.scheduler.scheduled-time>"
    assert "DeadLetterConfig" in schedule["Target"]


def test_the_drift_guard_function_is_configured_for_its_schedule(
    default_template: Template,
) -> None:
    default_template.has_resource_properties(
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


def test_the_guard_may_query_the_index_and_scan_the_table_and_nothing_else(
    default_template: Template,
) -> None:
    statements = guard_statements(default_template)
    table_id = next(iter(default_template.find_resources("AWS::DynamoDB::Table")))
    by_action = {json.dumps(s["Action"]): s["Resource"] for s in statements}
    assert by_action == {
        '["xray:PutTelemetryRecords", "xray:PutTraceSegments"]': "*",
        '"dynamodb:Query"': {
            "Fn::Join": ["", [{"Fn::GetAtt": [table_id, "Arn"]}, f"/index/{INDEX_NAME}"]]
        },
        '"dynamodb:Scan"': {"Fn::GetAtt": [table_id, "Arn"]},
    }


def test_in_import_mode_the_guard_grants_point_at_the_named_table(
    import_mode_template: Template,
) -> None:
    rendered = json.dumps(guard_statements(import_mode_template))
    assert f"table/propflow-prod/index/{INDEX_NAME}" in rendered
    assert "dynamodb:Scan" in rendered
    assert "cloudwatch:PutMetricData" not in rendered


def test_template_on_disk_has_the_same_alarms(default_synth: Synthesised) -> None:
    # The file cfn-lint checks is the one these assertions describe.
    document = json.loads(Path(default_synth.template_path).read_text())
    alarms = {k: r for k, r in document["Resources"].items() if r["Type"] == ALARM}
    assert len(observability_alarms(alarms)) == ALARM_COUNT
