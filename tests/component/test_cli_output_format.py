"""The AWS CLI's convention on every command: `--output` is the format of standard output
(`text` | `json`), `--json` its alias, the backfill's report file a separate `--report-file`; an
old-style `--output FILE` is refused (exit 2, before any call) naming the option to use, and
that advice followed literally writes the report."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from moto import mock_aws

from saga_index_cli.main import cli
from saga_index_cli.output import OutputFormat
from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run
from tests.support.backfill_contract import VALID, plant, seed


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-output-format", synthesized_template, endpoint_url=None)


def _leaves(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group) and not command.params:
            yield from _leaves(command, f"{path} {name}")
        else:
            yield f"{path} {name}", command
            if isinstance(command, click.Group):
                yield from _leaves(command, f"{path} {name}")


def test_every_command_takes_output_as_the_format_and_json_as_its_alias() -> None:
    commands = dict(_leaves(cli, "saga-index"))
    assert {"saga-index sagas open", "saga-index status", "saga-index backfill"} <= set(commands)
    for path, command in commands.items():
        options = {opt: p for p in command.params for opt in p.opts}
        assert isinstance(options["--output"].type, OutputFormat), path
        assert options["--json"].name == "as_json", path
        assert options["--json"].is_flag, path


def test_status_output_json_is_one_object_and_text_is_for_people(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    code, out, err = run(capsys, dynamo, "status", "--output", "json")
    assert code == 0, err
    assert json.loads(out)["phase"] == "migrating"
    assert run(capsys, dynamo, "status", "--json")[1] == out
    code, out, _ = run(capsys, dynamo, "status", "--output", "TEXT")
    assert code == 0
    assert re.search(r"^phase +migrating", out, re.MULTILINE)
    assert "{" not in out


def test_sagas_open_takes_json_and_prints_lines_for_people_with_output_text(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    default = run(capsys, dynamo, "sagas", "open")
    assert default[0] == 0
    assert run(capsys, dynamo, "sagas", "open", "--json")[1] == default[1]
    assert run(capsys, dynamo, "sagas", "open", "--output", "json")[1] == default[1]
    rows = [json.loads(line) for line in default[1].splitlines()]
    assert rows

    code, out, _ = run(capsys, dynamo, "sagas", "open", "--output", "text")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(rows)
    assert "{" not in out
    assert lines[0].startswith(f"{rows[0]['sagaId']}  person {rows[0].get('personId', '-')}")

    code, out, _ = run(capsys, dynamo, "shard", "p-1", "--output", "text")
    assert code == 0
    assert re.fullmatch(r"p-1  shard \d+ of 16  GSI4PK RenewalSaga#\d+\n", out)


def test_an_old_style_output_file_is_refused_and_the_advice_followed_writes_the_report(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    before = dynamo.scan_all()
    command = ["backfill", "--dry-run", "--output", "reports/bf run.json"]
    (tmp_path / "reports").mkdir()

    code, out, err = run(capsys, dynamo, *command)

    assert (code, out) == (2, "")
    assert dynamo.scan_all() == before
    assert not (tmp_path / "reports" / "bf run.json").exists()
    given, instead = re.search(r"give `([^`]+)` instead of `([^`]+)`", err).groups()  # type: ignore[union-attr]
    assert shlex.join(command[2:]) == instead
    followed = command[:2] + shlex.split(given)
    code, out, err = run(capsys, dynamo, *followed)
    assert code == 3, err  # the dry run's anomalies remain
    report = json.loads((tmp_path / "reports" / "bf run.json").read_text())
    assert report["dryRun"] is True
    assert report["exitCode"] == 3
