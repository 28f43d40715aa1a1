"""The job spec: the stagger rule over a whole week, and the tables keyed by job name."""

from __future__ import annotations

import ast
import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from saga_index.index import jobs, names
from saga_index.index.jobs import (
    SCHEDULED_JOBS,
    SWEEPS,
    JobSpecError,
    ScheduledJob,
    check_covers,
    check_stagger,
)

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"


def sixth(period: int, offset: int, name: str = "hypothetical-sweep") -> ScheduledJob:
    return ScheduledJob(
        name,
        "sweep",
        period_minutes=period,
        offset_minutes=offset,
        description="a job that does not exist",
        construct_id="HypotheticalSweep",
        handler="handlers.sweeps.hypothetical_sweep",
    )


def test_given_the_spec_then_no_two_jobs_fire_in_the_same_minute_of_the_week() -> None:
    check_stagger(SCHEDULED_JOBS)
    fired = [minute for job in SCHEDULED_JOBS for minute in job.firing_minutes()]
    assert len(fired) == len(set(fired))


def test_given_a_job_then_it_fires_once_per_period_all_week() -> None:
    for job in SCHEDULED_JOBS:
        minutes = sorted(job.firing_minutes())
        assert len(minutes) == jobs.MINUTES_PER_WEEK // job.period_minutes, job.name
        assert minutes[0] == job.offset_minutes, job.name
        assert {b - a for a, b in itertools.pairwise(minutes)} == {job.period_minutes}, job.name


@pytest.mark.parametrize(("period", "offset"), [(30, 7), (15, 8), (10, 7), (60, 58)])
def test_given_a_sixth_job_at_a_free_offset_then_it_fits(period: int, offset: int) -> None:
    # Five jobs already cover offsets 0-4 modulo 5; a sixth still fits between them.
    check_stagger((*SCHEDULED_JOBS, sixth(period, offset)))


@pytest.mark.parametrize(
    ("period", "offset", "other", "minute"),
    [
        (30, 12, names.JOB_RETRY_FAILED_PREPARE, "Mon 00:12"),
        (15, 10, names.JOB_DRIFT_GUARD, "Mon 00:10"),
        (60, 33, names.JOB_STUCK_SAGA_SWEEP, "Mon 00:33"),
        (30, 24, names.JOB_AGENT_METRICS_SNAPSHOT, "Mon 00:24"),
    ],
)
def test_given_a_sixth_job_on_a_taken_minute_then_the_check_names_both_jobs_and_the_minute(
    period: int, offset: int, other: str, minute: str
) -> None:
    with pytest.raises(JobSpecError) as raised:
        check_stagger((*SCHEDULED_JOBS, sixth(period, offset)))
    assert str(raised.value).startswith(f"{other} and hypothetical-sweep both fire at {minute} UTC")


def test_given_two_jobs_with_one_name_then_the_check_refuses_them() -> None:
    drift = SCHEDULED_JOBS[0]
    with pytest.raises(JobSpecError, match="two jobs are named"):
        check_stagger((drift, replace(drift, offset_minutes=2)))


@pytest.mark.parametrize(
    ("period", "offset", "message"),
    [(7, 0, "divide 60"), (45, 0, "divide 60"), (0, 0, "divide 60"), (10, 10, "offset")],
)
def test_given_a_job_that_cannot_be_staggered_then_it_is_refused(
    period: int, offset: int, message: str
) -> None:
    with pytest.raises(JobSpecError, match=message):
        sixth(period, offset)


def test_given_findings_without_events_then_the_job_is_refused() -> None:
    with pytest.raises(JobSpecError, match="emits_events"):
        replace(sixth(30, 7), findings=(names.FINDING_STUCK,))


def test_given_the_minute_of_the_week_then_it_reads_as_day_and_utc_time() -> None:
    assert jobs.minute_of_week(0) == "Mon 00:00"
    assert jobs.minute_of_week(jobs.MINUTES_PER_WEEK - 1) == "Sun 23:59"


# ---- tables keyed by job name ----------------------------------------------------------------


def test_given_a_table_missing_a_job_or_naming_another_then_it_is_refused() -> None:
    sweeps = [job.name for job in SWEEPS]
    check_covers(sweeps, SWEEPS, table="t")
    with pytest.raises(JobSpecError, match=r"missing \['stuck-saga-sweep'\]"):
        check_covers([s for s in sweeps if s != names.JOB_STUCK_SAGA_SWEEP], SWEEPS, table="t")
    with pytest.raises(JobSpecError, match=r"not in the spec \['extra'\]"):
        check_covers([*sweeps, "extra"], SWEEPS, table="t")


def test_given_the_handlers_table_then_it_runs_exactly_the_specs_sweeps() -> None:
    from handlers.sweep_jobs import JOBS

    assert set(JOBS) == {job.name for job in SWEEPS}


def test_given_the_spec_then_the_sweeps_are_the_four_sweep_jobs_in_order() -> None:
    assert jobs.SWEEP_NAMES == (
        names.JOB_WORKFLOW_HEALTH_SWEEP,
        names.JOB_RETRY_FAILED_PREPARE,
        names.JOB_STUCK_SAGA_SWEEP,
        names.JOB_AGENT_METRICS_SNAPSHOT,
    )
    assert jobs.DRIFT_GUARD.name == names.JOB_DRIFT_GUARD
    assert {job.kind for job in SCHEDULED_JOBS} == {"guard", "sweep"}


def test_given_each_jobs_handler_then_its_module_defines_that_function() -> None:
    # Read, not imported: importing a handler module initialises Powertools.
    for job in SCHEDULED_JOBS:
        module, _, function = job.handler.rpartition(".")
        source = LAMBDAS.joinpath(*module.split(".")).with_suffix(".py")
        tree = ast.parse(source.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert function in defined, job.name


def test_given_the_sweeps_then_their_finding_kinds_come_from_the_spec() -> None:
    from saga_index.sweeps.findings import FindingKind
    from saga_index.sweeps.runner import SWEEP_FINDING_KINDS

    from_spec = {job.name: tuple(FindingKind(f) for f in job.findings) for job in SWEEPS}
    assert from_spec == SWEEP_FINDING_KINDS
    assert SWEEP_FINDING_KINDS[names.JOB_RETRY_FAILED_PREPARE] == (
        FindingKind.PREPARE_RETRY_REQUESTED,
        FindingKind.PREPARE_RETRIES_EXHAUSTED,
    )
