"""How Lambda handles the asynchronous invocations of the five scheduled functions (the four
sweeps and the drift guard): no retries, events no older than the job's period, an encrypted
on-failure queue of their own that pages, and at most one run at a time."""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index.jobs import JOBS_BY_NAME, SCHEDULED_JOBS
from tests.infra.template_tools import render, resources

pytestmark = pytest.mark.infra

# Every job of the spec, found in the template by its handler.
HANDLERS = {job.name: job.handler for job in SCHEDULED_JOBS}
# The next firing repeats all of a failed run's (idempotent) work: Lambda retries nothing.
RETRY_ATTEMPTS = 0
MODES = ["owned_synth", "import_mode_synth"]


@pytest.fixture(params=MODES)
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    return dict(request.getfixturevalue(request.param).template_json)


def scheduled_functions(template: dict[str, Any]) -> dict[str, str]:
    """Logical id by job name."""
    by_handler = {handler: job for job, handler in HANDLERS.items()}
    found = {
        by_handler[r["Properties"]["Handler"]]: logical_id
        for logical_id, r in resources(template, "AWS::Lambda::Function").items()
        if r["Properties"]["Handler"] in by_handler
    }
    assert set(found) == set(HANDLERS)
    return found


def invoke_config(template: dict[str, Any], function_id: str) -> dict[str, Any]:
    configs = [
        r["Properties"]
        for r in resources(template, "AWS::Lambda::EventInvokeConfig").values()
        if r["Properties"]["FunctionName"] == {"Ref": function_id}
    ]
    assert len(configs) == 1, function_id
    return configs[0]


def failure_queue_id(template: dict[str, Any], function_id: str) -> str:
    destination = invoke_config(template, function_id)["DestinationConfig"]["OnFailure"]
    return str(render(destination["Destination"])).removeprefix("${").removesuffix(".Arn}")


def test_given_each_scheduled_function_then_its_async_invocation_is_configured_exactly(
    template: dict[str, Any],
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    for job, function_id in scheduled_functions(template).items():
        config = invoke_config(template, function_id)
        queue_id = failure_queue_id(template, function_id)
        assert queue_id in queues, job
        assert config == {
            "FunctionName": {"Ref": function_id},
            "Qualifier": "$LATEST",
            "MaximumRetryAttempts": RETRY_ATTEMPTS,
            # no older than the job's period: by then the next firing is due
            "MaximumEventAgeInSeconds": JOBS_BY_NAME[job].period_minutes * 60,
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_id, "Arn"]}}},
        }, job


def test_given_each_scheduled_function_then_two_firings_never_overlap(
    template: dict[str, Any],
) -> None:
    functions = resources(template, "AWS::Lambda::Function")
    for job, function_id in scheduled_functions(template).items():
        assert functions[function_id]["Properties"]["ReservedConcurrentExecutions"] == 1, job


def test_given_the_backfill_functions_then_they_keep_their_concurrency_unreserved(
    template: dict[str, Any],
) -> None:
    # The Map runs up to MAX_CONCURRENT_SEGMENTS workers at once: 1 would serialise them.
    scheduled = set(scheduled_functions(template).values())
    for logical_id, function in resources(template, "AWS::Lambda::Function").items():
        if logical_id not in scheduled:
            assert "ReservedConcurrentExecutions" not in function["Properties"], logical_id


def test_given_each_failure_queue_then_it_is_its_own_encrypted_tls_only_and_retained(
    template: dict[str, Any],
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    schedule_dlqs = {
        str(render(s["Properties"]["Target"]["DeadLetterConfig"]["Arn"]))
        for s in resources(template, "AWS::Scheduler::Schedule").values()
    }
    seen: set[str] = set()
    for job, function_id in scheduled_functions(template).items():
        queue_id = failure_queue_id(template, function_id)
        assert queue_id not in seen, f"{job} shares its failure queue"
        assert "${" + queue_id + ".Arn}" not in schedule_dlqs, job
        seen.add(queue_id)
        properties = queues[queue_id]["Properties"]
        assert properties["SqsManagedSseEnabled"] is True, job
        assert properties["MessageRetentionPeriod"] == 14 * 24 * 3600, job
        [policy] = [
            p["Properties"]["PolicyDocument"]
            for p in resources(template, "AWS::SQS::QueuePolicy").values()
            if {"Ref": queue_id} in p["Properties"]["Queues"]
        ]
        assert {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
        } in policy["Statement"], job


def test_given_each_failure_queue_then_messages_arriving_in_two_periods_of_three_page(
    template: dict[str, Any],
) -> None:
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    topics = resources(template, "AWS::SNS::Topic")
    pager: Any = {"Ref": next(iter(topics))} if topics else None
    for job, function_id in scheduled_functions(template).items():
        queue_id = failure_queue_id(template, function_id)
        dimension = [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
        [alarm] = [
            a["Properties"]
            for a in alarms.values()
            if a["Properties"].get("Dimensions") == dimension
        ]
        # Arrivals (Lambda's on-failure destination calls SendMessage), counted per period of
        # the job's schedule; the second failed firing out of three pages.
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "NumberOfMessagesSent"), job
        period = JOBS_BY_NAME[job].period_minutes * 60
        assert (alarm["Statistic"], alarm["Period"]) == ("Sum", period), job
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 2), job
        assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)
        assert alarm["TreatMissingData"] == "notBreaching", job
        if pager is not None:
            assert alarm["AlarmActions"] == [pager], job
            assert alarm["OKActions"] == [pager], job
        assert "docs/observability.md#sweep-failures" in str(render(alarm["AlarmDescription"])), job


def test_given_each_failure_queue_then_the_config_waits_for_the_grant_to_send_to_it(
    template: dict[str, Any],
) -> None:
    # Lambda refuses a destination the function's role cannot send to at creation time.
    for job, function_id in scheduled_functions(template).items():
        [config] = [
            r
            for r in resources(template, "AWS::Lambda::EventInvokeConfig").values()
            if r["Properties"]["FunctionName"] == {"Ref": function_id}
        ]
        role_id = str(render(template["Resources"][function_id]["Properties"]["Role"]))
        role_id = role_id.removeprefix("${").removesuffix(".Arn}")
        [policy_id] = [
            pid
            for pid, p in resources(template, "AWS::IAM::Policy").items()
            if {"Ref": role_id} in p["Properties"]["Roles"]
        ]
        assert policy_id in config.get("DependsOn", []), job
