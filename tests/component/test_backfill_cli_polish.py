"""`saga-index backfill` as the runbook uses it, against moto: the runtime throttle can be
cleared and every estimate and report says which cap it is at; --report-file follows the one rule
for files (refused without --overwrite, before any request) and a refused run still writes
its report; a wrong --direction names the flag to give."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run, store

# seed() plants VALID sagas and the contract's anomaly rows: a complete run exits 3.
from tests.support.backfill_contract import CHANGED_AT, VALID, Clock, plant, seed


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-backfill-polish", synthesized_template, endpoint_url=None)


# ---- the runtime throttle ------------------------------------------------------------------


def test_throttle_clear_removes_the_cap_and_records_an_event(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    assert run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "20")[0] == 0
    assert store(dynamo).read().backfill_max_writes_per_second == 20.0

    code, out, err = run(
        capsys, dynamo, "backfill", "throttle", "--clear", "--reason", "re-shard done", "--json"
    )

    assert code == 0, err
    assert json.loads(out)["backfillMaxWritesPerSecond"] is None
    assert store(dynamo).read().backfill_max_writes_per_second is None
    events = store(dynamo).events()
    assert sorted(e["event"] for e in events) == ["throttle", "throttle-cleared"]
    cleared = next(e for e in events if e["event"] == "throttle-cleared")
    assert (cleared["reason"], cleared["changedBy"]) == ("re-shard done", "operator@test")


@pytest.mark.parametrize(
    "argv",
    [
        ["backfill", "throttle"],
        ["backfill", "throttle", "--clear", "--max-writes-per-second", "5"],
    ],
)
def test_throttle_needs_exactly_one_of_a_rate_and_clear(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    plant(dynamo, "migrating")
    code, out, err = run(capsys, dynamo, *argv)
    assert (code, out) == (2, "")
    assert "exactly one of --max-writes-per-second R (set the cap) and --clear" in err
    assert store(dynamo).events() == []


def test_the_dry_run_estimates_at_the_records_throttle_and_says_so(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "20")
    dry_run = ("backfill", "--dry-run", "--max-writes-per-second", "50")

    code, out, err = run(capsys, dynamo, *dry_run, "--json")
    estimate = json.loads(out)["estimate"]
    assert code == 3, err  # the seeded anomalies would remain
    assert (estimate["maxWritesPerSecond"], estimate["capSource"]) == (20.0, "record-throttle")
    assert estimate["seconds"] == pytest.approx(len(VALID) / 20)
    assert "below --max-writes-per-second 50" in err

    # A throttle above the option's cap is no cap at all: the estimate stays at the option's
    run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "500")
    code, out, err = run(capsys, dynamo, *dry_run, "--json")
    estimate = json.loads(out)["estimate"]
    assert (estimate["maxWritesPerSecond"], estimate["capSource"]) == (
        50.0,
        "max-writes-per-second",
    )
    run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "20")

    code, out, _ = run(capsys, dynamo, *dry_run)
    assert "estimate at the cap of 20 writes/s, the record's runtime throttle" in out

    run(capsys, dynamo, "backfill", "throttle", "--clear")
    code, out, _ = run(capsys, dynamo, *dry_run, "--json")
    estimate = json.loads(out)["estimate"]
    assert (estimate["maxWritesPerSecond"], estimate["capSource"]) == (
        50.0,
        "max-writes-per-second",
    )


def test_a_runs_report_names_the_cap_it_ran_at(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    # Both below every other limit a run applies (the fence of the control partition's writes)
    run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "200")

    code, out, err = run(capsys, dynamo, "backfill", "--max-writes-per-second", "300", "--json")

    assert code == 3, err  # complete; the seeded anomalies remain
    report = json.loads(out)
    assert report["maxWritesPerSecond"] == 200.0
    assert report["appliedMaxWritesPerSecond"] == [200.0]
    assert report["requestedMaxWritesPerSecond"] == 300.0


# ---- --report-file--------------------------------------------------------------------------


def test_an_existing_output_file_is_refused_without_overwrite_before_any_request(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    report = tmp_path / "forward.json"
    report.write_text("the last run's report")
    before = dynamo.scan_all()

    code, out, err = run(capsys, dynamo, "backfill", "--report-file", str(report))

    assert (code, out) == (2, "")
    assert f"--report-file {report} already exists and is not this command's own report" in err
    assert report.read_text() == "the last run's report"
    assert dynamo.scan_all() == before  # no lease taken, nothing moved

    code, _, err = run(capsys, dynamo, "backfill", "--report-file", str(report), "--overwrite")
    assert code == 3, err  # complete; the seeded anomalies remain
    assert json.loads(report.read_text())["restamped"] == len(VALID)


def test_overwrite_without_output_is_bad_usage(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    code, _, err = run(capsys, dynamo, "backfill", "--overwrite")
    assert code == 2
    assert "--overwrite applies to --report-file PATH only" in err


def test_a_run_refused_before_effective_at_writes_its_report_and_the_same_command_later_works(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    report = tmp_path / "forward.json"
    command = ("backfill", "--json", "--report-file", str(report))

    code, _, err = run(capsys, dynamo, *command, clock=Clock(CHANGED_AT))

    assert code == 5
    assert "phase show --wait` returns then" in err
    assert "Start the same command again once that time has passed" in err
    written = json.loads(report.read_text())
    assert (written["refused"], written["error"], written["exitCode"]) == (
        True,
        "LeaseNotYetEffectiveError",
        5,
    )
    assert written["completionRecorded"] is False
    assert "takes effect at" in written["message"]
    retry_at = datetime.strptime(written["retryAt"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert retry_at > CHANGED_AT

    # The advice, literally: the same command, at the time it names, replaces its own report
    code, out, err = run(capsys, dynamo, *command, clock=Clock(retry_at))
    assert code == 3, err  # complete; the seeded anomalies remain
    assert json.loads(report.read_text())["restamped"] == len(VALID)
    assert json.loads(out)["completionRecorded"] is True

    # A different command does not replace it
    code, _, err = run(capsys, dynamo, "backfill", "--dry-run", "--report-file", str(report))
    assert code == 2
    assert "is not this command's own report" in err


# ---- --direction ---------------------------------------------------------------------------


def test_a_forward_backfill_while_rolling_back_says_add_direction_rollback(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "rolling-back")
    code, _, err = run(capsys, dynamo, "backfill", "--dry-run")
    assert code == 2
    assert "add --direction rollback" in err
