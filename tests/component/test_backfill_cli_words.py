"""What `saga-index backfill` says, in text and JSON, as an operator or a script reads it: text
without Python reprs, no lease holder on a dry run (it takes none), the exit code in every
report, JSON keys in one case, progress lines off a terminal with their total and ETA, and
`--stop` with no lease held saying so (no CloudFormation call) with advice that works."""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from saga_index_cli import progress
from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run
from tests.support.backfill_contract import ANOMALIES, VALID, plant, seed


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-backfill-words", synthesized_template, endpoint_url=None)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def _snake(document: Any) -> set[str]:
    return {key for key in _keys(document) if "_" in key}


def test_the_text_report_has_no_python_reprs_and_a_dry_run_names_no_holder(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")

    code, out, err = run(capsys, dynamo, "backfill", "--dry-run")

    assert code == 3, err
    summary = out.split("anomaly rows,")[0]
    assert not re.search(r"\{'|\['|\bTrue\b|\bFalse\b|\bNone\b", summary), summary
    assert re.search(r"^    segment 0: scanned \d+, re-stamped 0, done$", out, re.MULTILINE)
    assert "holder" not in out
    code, out, _ = run(capsys, dynamo, "backfill", "--dry-run", "--json")
    assert "holder" not in json.loads(out)

    code, out, _ = run(capsys, dynamo, "backfill", "--max-writes-per-second", "1000")
    assert re.search(r"^  holder +\S+@\S+/\d+$", out, re.MULTILINE)  # a real run took the lease
    assert re.search(r"^  completionRecorded +yes$", out, re.MULTILINE)
    assert re.search(r"^  appliedMaxWritesPerSecond +1000$", out, re.MULTILINE)


def test_every_report_names_its_exit_code_and_spells_its_keys_in_camel_case(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    report = tmp_path / "bf.json"
    command = (
        "backfill",
        "--json",
        "--report-file",
        str(report),
        "--max-writes-per-second",
        "1000",
    )

    code, out, err = run(capsys, dynamo, *command)
    assert code == 3, err  # the anomalies remain
    for document in (json.loads(out), json.loads(report.read_text())):
        assert document["exitCode"] == 3
        assert _snake(document) == set(), _snake(document)
    assert json.loads(report.read_text())["command"]["options"]["maxWritesPerSecond"] == 1000

    for saga_id in ANOMALIES:  # no anomaly left: a clean run's report says 0, not null
        dynamo.client.delete_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": f"RSAGA#{saga_id}"}, "SK": {"S": "META"}},
        )
    code, out, err = run(capsys, dynamo, *command)
    assert code == 0, err
    assert json.loads(report.read_text())["exitCode"] == 0
    assert json.loads(out)["exitCode"] == 0


def test_other_commands_json_keys_are_camel_case(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    for argv in (
        ("status", "--json", "--drift"),
        ("phase", "show", "--json", "--history"),
        ("drift", "--json"),
        ("backfill", "pause", "--json"),
        ("backfill", "--stop", "--json"),
    ):
        code, out, err = run(capsys, dynamo, *argv)
        assert code in (0, 1), (argv, err)
        assert _snake(json.loads(out)) == set(), argv


def test_progress_lines_off_a_terminal_carry_the_total_and_an_eta(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.0)
    seed(dynamo, VALID)
    plant(dynamo, "migrating")

    code, _, err = run(capsys, dynamo, "backfill", "--max-writes-per-second", "1000")

    assert code == 3, err
    lines = [line for line in err.splitlines() if "forward: rows moved:" in line]
    assert lines, err
    to_move = len(VALID)
    assert all(f" of {to_move} rows (" in line for line in lines), lines
    assert any(re.search(r", ETA \d+:\d\d:\d\d", line) for line in lines), lines


def test_stop_with_no_lease_held_says_so_without_cloudformation_and_its_advice_works(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    plant(dynamo, "migrating")
    caplog.set_level(logging.DEBUG, logger="botocore")

    code, out, err = run(capsys, dynamo, "backfill", "--stop")

    assert code == 0, err
    assert "no backfill lease is held" in out
    assert "DescribeStacks" not in caplog.text
    advice = re.search(r"`([^`]*status)` shows the last run", out)
    assert advice is not None
    words = shlex.split(advice.group(1))
    assert words[0] == "saga-index"
    code, out, err = run(capsys, None, *words[1:])
    assert code == 0, err
    assert "migrating" in out
