"""The backfill's state machine pages too: an execution that fails, times out or is aborted
pages through its alarm, and the end of every execution reaches the pager topic as a readable
line (an EventBridge rule on Step Functions' status-change events). Each alarm is named
`RenewalSagaIndex-BackfillExecutions<Outcome>` and its description says what to run first, which
saved query to open and where the runbook section is (context runbookBaseUrl)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.config import DEFAULT_RUNBOOK_BASE_URL
from tests.infra.conftest import Synthesised, _synthesise
from tests.infra.template_tools import resources

pytestmark = pytest.mark.infra

ORG_TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:org-paging"
ORG_RUNBOOK_BASE_URL = "https://wiki.example.com/renewal-saga-index"
STATUS_METRICS = ("ExecutionsFailed", "ExecutionsTimedOut", "ExecutionsAborted")
FINAL_STATUSES = ["SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"]


@pytest.fixture(scope="module")
def org_topic_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesised:
    return _synthesise(
        tmp_path_factory.mktemp("cdk-org-topic-alerts"),
        {"alarmTopicArn": ORG_TOPIC_ARN, "runbookBaseUrl": ORG_RUNBOOK_BASE_URL},
    )


def state_machine_id(template: dict[str, Any]) -> str:
    (machine,) = resources(template, "AWS::StepFunctions::StateMachine")
    return machine


def own_topic(template: dict[str, Any]) -> dict[str, str]:
    (topic,) = resources(template, "AWS::SNS::Topic")
    return {"Ref": topic}


def the_rule(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rules = {
        logical_id: r["Properties"]
        for logical_id, r in resources(template, "AWS::Events::Rule").items()
        if r["Properties"].get("EventPattern", {}).get("source") == ["aws.states"]
    }
    assert len(rules) == 1
    return next(iter(rules.items()))


@pytest.mark.parametrize("metric", STATUS_METRICS)
@pytest.mark.parametrize("synth", ["owned_synth", "import_mode_synth", "org_topic_synth"])
def test_an_execution_that_ends_without_success_pages(
    synth: str, metric: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    pager = ORG_TOPIC_ARN if synth == "org_topic_synth" else own_topic(template)
    alarms = [
        a["Properties"]
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == metric
    ]
    assert len(alarms) == 1
    [alarm] = alarms
    assert alarm["Namespace"] == "AWS/States"
    assert alarm["Dimensions"] == [
        {"Name": "StateMachineArn", "Value": {"Ref": state_machine_id(template)}}
    ]
    assert (alarm["Statistic"], alarm["Period"]) == ("Sum", 300)
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 1)
    # Step Functions publishes these only when an execution ends so.
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [pager]
    assert alarm["OKActions"] == [pager]
    assert alarm["AlarmName"] == f"RenewalSagaIndex-Backfill{metric}"
    description = alarm["AlarmDescription"]
    runbook = ORG_RUNBOOK_BASE_URL if synth == "org_topic_synth" else DEFAULT_RUNBOOK_BASE_URL
    assert f"Runbook: {runbook}/observability.md#backfill-ended" in description
    assert "First run: `saga-index --table propflow-prod status`." in description
    assert "Logs Insights saved query: RenewalSagaIndex/backfill/failed-steps." in description


@pytest.mark.parametrize("synth", ["owned_synth", "import_mode_synth", "org_topic_synth"])
def test_the_end_of_every_execution_of_this_state_machine_reaches_the_pager_topic(
    synth: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(synth).template_json
    pager = ORG_TOPIC_ARN if synth == "org_topic_synth" else own_topic(template)
    _, rule = the_rule(template)

    assert rule["State"] == "ENABLED"
    assert "EventBusName" not in rule  # the default bus: where Step Functions sends its events
    assert rule["EventPattern"] == {
        "source": ["aws.states"],
        "detail-type": ["Step Functions Execution Status Change"],
        "detail": {
            "stateMachineArn": [{"Ref": state_machine_id(template)}],
            "status": FINAL_STATUSES,
        },
    }
    [target] = rule["Targets"]
    assert target["Arn"] == pager
    assert "RoleArn" not in target  # SNS authorises EventBridge by the topic policy
    transformer = target["InputTransformer"]
    assert transformer["InputPathsMap"] == {
        "execution": "$.detail.name",
        "status": "$.detail.status",
        "error": "$.detail.error",
        "stopped": "$.time",
        "arn": "$.detail.executionArn",
    }
    message = json.loads(transformer["InputTemplate"])  # a JSON string: SNS delivers its text
    for variable in transformer["InputPathsMap"]:
        assert f"<{variable}>" in message
    assert "docs/observability.md#backfill-ended" in message


def test_the_stacks_own_topic_lets_exactly_this_rule_publish(owned_synth: Synthesised) -> None:
    template = owned_synth.template_json
    rule_id, _ = the_rule(template)
    topic = own_topic(template)
    [policy] = [
        p["Properties"]
        for p in resources(template, "AWS::SNS::TopicPolicy").values()
        if p["Properties"]["Topics"] == [topic]
    ]
    [statement] = [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s.get("Principal") == {"Service": "events.amazonaws.com"}
    ]
    assert statement == {
        "Sid": "EventBridgeRulesOfThisStack",
        "Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"},
        "Action": "sns:Publish",
        "Resource": topic,
        "Condition": {
            "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
            "ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": [rule_id, "Arn"]}},
        },
    }
    (key,) = resources(template, "AWS::KMS::Key").values()
    [grant] = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Principal") == {"Service": "events.amazonaws.com"}
    ]
    assert grant["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert grant["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}


def test_an_external_topic_gets_no_policy_from_this_stack(org_topic_synth: Synthesised) -> None:
    # Its policy is its owner's: docs/deploy.md says what it must allow.
    template = org_topic_synth.template_json
    assert resources(template, "AWS::SNS::TopicPolicy") == {}
    assert resources(template, "AWS::KMS::Key") == {}
