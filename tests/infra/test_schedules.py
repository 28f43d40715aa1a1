"""Every scheduled job, read from the SYNTHESISED template: never two in the same minute over a
whole week, time window off, retries, an encrypted dead-letter queue and a least-privilege role
per target, and the scheduled time in the payload."""

from __future__ import annotations

import json
from typing import Any

import pytest

from saga_index.index.jobs import JOBS_BY_NAME, SCHEDULED_JOBS, JobSpecError, ScheduledJob
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import (
    MINUTES_PER_WEEK,
    CronError,
    coincidences,
    firing_minutes,
    grants,
    render,
    resources,
    role_statements,
)

pytestmark = pytest.mark.infra

SCHEDULE = "AWS::Scheduler::Schedule"
SWEEP_JOBS = {
    "workflow-health-sweep",
    "retry-failed-prepare",
    "stuck-saga-sweep",
    "agent-metrics-snapshot",
}
DRIFT_GUARD = "drift-guard"
MODES = ["owned_synth", "import_mode_synth"]


def schedules_by_job(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each schedule's properties, keyed by the job its payload names (exactly one per job)."""
    by_job: dict[str, dict[str, Any]] = {}
    for logical_id, resource in resources(template, SCHEDULE).items():
        properties = resource["Properties"]
        job = json.loads(properties["Target"]["Input"])["job"]
        assert job not in by_job, f"two schedules run job {job!r} (second: {logical_id})"
        by_job[job] = properties
    return by_job


@pytest.fixture(params=MODES)
def template(request: pytest.FixtureRequest) -> dict[str, Any]:
    synthesised: Synthesised = request.getfixturevalue(request.param)
    return synthesised.template_json


# ---- which jobs, on which cron ---------------------------------------------------------------


def test_given_the_stack_then_the_four_sweeps_and_the_drift_guard_each_have_one_schedule(
    template: dict[str, Any],
) -> None:
    jobs = set(schedules_by_job(template))
    assert jobs == SWEEP_JOBS | {DRIFT_GUARD} == {job.name for job in SCHEDULED_JOBS}


def test_given_the_declarative_table_then_each_schedule_uses_its_jobs_cron_in_utc(
    template: dict[str, Any],
) -> None:
    for job, schedule in schedules_by_job(template).items():
        assert job in JOBS_BY_NAME, f"schedule for {job!r}, which is not in SCHEDULED_JOBS"
        assert schedule["ScheduleExpression"] == JOBS_BY_NAME[job].expression
        # A zone with a half-hour offset would move minutes; UTC keeps the stagger as written.
        assert schedule.get("ScheduleExpressionTimezone", "UTC") in ("UTC", "Etc/UTC")
        assert schedule.get("State", "ENABLED") == "ENABLED"


def test_given_every_schedule_in_the_template_then_no_two_jobs_ever_fire_in_the_same_minute(
    template: dict[str, Any],
) -> None:
    expressions = {
        job: schedule["ScheduleExpression"] for job, schedule in schedules_by_job(template).items()
    }
    assert len(expressions) >= len(SWEEP_JOBS)

    clashes = list(coincidences(expressions))

    assert clashes == [], f"jobs that fire together (job, job, first minutes): {clashes}"
    for job, expression in expressions.items():
        runs = len(firing_minutes(expression))
        period = JOBS_BY_NAME[job].period_minutes
        assert runs == MINUTES_PER_WEEK // period, f"{job} fires {runs} times a week"


def test_given_two_crons_that_meet_when_checked_then_the_coincidence_is_reported() -> None:
    # Proves the check above can fail: minute 10 of every hour is on both grids.
    clashes = list(coincidences({"a": "cron(0/5 * * * ? *)", "b": "cron(10/15 * * * ? *)"}))
    assert [(a, b) for a, b, _ in clashes] == [("a", "b")]
    assert clashes[0][2][0] == "Mon 00:10"


def test_given_disjoint_offsets_when_checked_then_no_coincidence_is_reported() -> None:
    assert list(coincidences({"a": "cron(0/5 * * * ? *)", "b": "cron(3/15 * * * ? *)"})) == []


@pytest.mark.parametrize(
    "expression", ["rate(5 minutes)", "cron(0/5 * * * *)", "cron(0/5 * * * ? 2027)"]
)
def test_given_an_expression_that_cannot_be_checked_when_expanded_then_it_is_rejected(
    expression: str,
) -> None:
    with pytest.raises(CronError):
        firing_minutes(expression)


@pytest.mark.parametrize(
    ("period", "offset", "message"), [(7, 0, "divide 60"), (10, 10, "offset"), (5, -1, "offset")]
)
def test_given_an_unstaggerable_job_when_declared_then_it_is_rejected(
    period: int, offset: int, message: str
) -> None:
    with pytest.raises(JobSpecError, match=message):
        ScheduledJob(
            "x",
            "sweep",
            period_minutes=period,
            offset_minutes=offset,
            description="x",
            construct_id="X",
            handler="handlers.sweeps.x",
        )


def test_given_the_spec_then_its_own_week_expansion_agrees_with_the_templates_cron() -> None:
    # The spec checks the stagger from its own expansion; this one reads the cron text.
    for job in SCHEDULED_JOBS:
        assert job.firing_minutes() == firing_minutes(job.expression), job.name


# ---- each target -----------------------------------------------------------------------------


def test_given_every_schedule_then_its_time_window_is_off(template: dict[str, Any]) -> None:
    for job, schedule in schedules_by_job(template).items():
        assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}, job


def test_given_every_schedule_then_its_target_has_a_bounded_retry_policy(
    template: dict[str, Any],
) -> None:
    for job, schedule in schedules_by_job(template).items():
        policy = schedule["Target"]["RetryPolicy"]
        assert 1 <= policy["MaximumRetryAttempts"] <= 185, job
        # A retry older than the job's own period would overlap the next run.
        assert 60 <= policy["MaximumEventAgeInSeconds"] <= JOBS_BY_NAME[job].period_minutes * 60


def test_given_every_schedule_then_its_dead_letter_queue_is_its_own_and_encrypted(
    template: dict[str, Any],
) -> None:
    queues = resources(template, "AWS::SQS::Queue")
    seen: set[str] = set()
    for job, schedule in schedules_by_job(template).items():
        arn = render(schedule["Target"]["DeadLetterConfig"]["Arn"])
        queue_id = arn.removeprefix("${").removesuffix(".Arn}")
        assert queue_id in queues, f"{job}: dead-letter target {arn} is not a queue of the stack"
        assert queue_id not in seen, f"{job} shares its dead-letter queue"
        seen.add(queue_id)
        properties = queues[queue_id].get("Properties", {})
        assert properties.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in properties
        assert properties.get("MessageRetentionPeriod", 0) >= 7 * 24 * 3600


def test_given_every_schedule_then_the_payload_carries_job_and_scheduled_time(
    template: dict[str, Any],
) -> None:
    for job, schedule in schedules_by_job(template).items():
        body = json.loads(schedule["Target"]["Input"])
        assert body["job"] == job
        assert body["scheduledTime"] == "<aws.scheduler.scheduled-time>"
        assert body["executionId"] == "<aws.scheduler.execution-id>"
        assert body["attempt"] == "<aws.scheduler.attempt-number>"


def test_given_every_schedule_then_its_role_can_only_invoke_its_function_and_dead_letter(
    template: dict[str, Any],
) -> None:
    roles = resources(template, "AWS::IAM::Role")
    for job, schedule in schedules_by_job(template).items():
        target = schedule["Target"]
        role_id = render(schedule["Target"]["RoleArn"]).removeprefix("${").removesuffix(".Arn}")
        trust = roles[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}], job
        assert "aws:SourceAccount" in json.dumps(trust), job
        assert "ManagedPolicyArns" not in roles[role_id]["Properties"], job
        function_arn = render(target["Arn"])
        assert grants(role_statements(template, role_id)) == {
            ("lambda:InvokeFunction", function_arn),
            ("lambda:InvokeFunction", function_arn + ":*"),
            ("sqs:SendMessage", render(target["DeadLetterConfig"]["Arn"])),
        }, job
