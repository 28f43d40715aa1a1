"""docs/cli.md's command reference and exit-code table are what devkit.cli_reference renders from
the click app and its one exit-code enumeration, and the runbook's "When something fails" table
gives each message the exit code the CLI really exits with (each message's own error is raised
and mapped by the CLI's own mapping)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from botocore.exceptions import ClientError

from devkit import cli_reference
from devkit.contract_states import path_through
from saga_index.index import SagaIndexError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.backfill.slots import refused_by_slot
from saga_index.layout_change.backfill.summary import BackfillSummary
from saga_index.layout_change.lease import LeaseHeldError, LeaseNotYetEffectiveError
from saga_index.layout_change.lease.errors import LeaseOutcomeUnknownError
from saga_index.layout_change.lease.grant import backfill_layouts
from saga_index.layout_change.record import DEFAULT_TIMING, BackfillDirection, ControlState, Phase
from saga_index.layout_change.transitions import (
    PreconditionFailedError,
    PreconditionResult,
    plan_move,
    plan_open_index_move,
)
from saga_index.layout_change.transitions.executor import _require_settled_switch
from saga_index_cli.backfill.output import EXIT_ANOMALIES, exit_code
from saga_index_cli.context import CliContext
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.failures import CALL_KEY, exit_code_of, service_failure
from saga_index_cli.main import cli, main
from saga_index_cli.output import check_output_file
from saga_index_cli.stack import _lookup_error, state_machine_arn_from_outputs
from tests.support.control_seed import CHANGED_AT, transition

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = ROOT / "docs" / "cli.md"
RUNBOOK = ROOT / "docs" / "runbook.md"


def test_given_the_committed_doc_then_its_sections_are_the_generated_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = CLI_DOC.read_text(encoding="utf-8")

    assert cli_reference.render_doc(text) == text
    assert cli_reference.main(["--check"]) == 0, capsys.readouterr().err


def _every_command(group: click.Group, path: str) -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        found.append((f"{path} {name}", command))
        if isinstance(command, click.Group):
            found += _every_command(command, f"{path} {name}")
    return found


def test_the_reference_names_every_command_option_default_and_environment_variable() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")

    for path, command in [("saga-index", cli), *_every_command(cli, "saga-index")]:
        assert f"### `{path}`" in text, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"`{param.opts[0]}`" in text, (path, param.opts)
    assert "| `--max-attempts` | INTEGER 1<=x<=50 | `10` |" in text
    assert "`SAGA_INDEX_LOG_LEVEL`" in text
    for code in ExitCode:
        assert f"\n| {int(code)} | `{code.name}` | {code.meaning[:40]}" in text


def test_given_a_drifted_doc_then_the_check_fails_and_a_run_restores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "cli.md"
    original = CLI_DOC.read_text(encoding="utf-8")
    for drifted in (
        original.replace("| 5 | `RETRY_LATER` |", "| 1 | `RETRY_LATER` |"),
        original.replace(
            "| `--max-attempts` | INTEGER 1<=x<=50 | `10` |", "| `--max-attempts` | N | |"
        ),
        original.replace("### `saga-index sagas open`", "### `saga-index sagas opened`"),
    ):
        assert drifted != original
        doc.write_text(drifted, encoding="utf-8")

        assert cli_reference.main(["--check", "--path", str(doc)]) == 1
        assert "python -m devkit.cli_reference" in capsys.readouterr().err
        assert cli_reference.main(["--path", str(doc)]) == 0
        assert doc.read_text(encoding="utf-8") == original


def test_given_a_doc_without_the_markers_then_the_check_fails_naming_the_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "cli.md"
    doc.write_text("# no sections here\n", encoding="utf-8")

    assert cli_reference.main(["--check", "--path", str(doc)]) == 1
    assert "cli-reference:exit-codes" in capsys.readouterr().err


# ---- the runbook's "When something fails" ------------------------------------------------------

MIGRATING = ControlState(transition=transition(LEGACY, Layout.sharded(16)))
OPEN_INDEX_ADDING = path_through(
    ("migrating", 0, 16), ("sharded", 3600.0, None), ("open-index:adding", 7200.0, None)
)
LEGACY_AFTER = ControlState(
    transition=transition(LEGACY, None, previous=(Layout.sharded(16), LEGACY))
)


def _raised(call: Callable[[], object]) -> BaseException:
    with pytest.raises(SagaIndexError) as raised:
        call()
    return raised.value


def _code(err: BaseException) -> tuple[set[int], str]:
    return {int(exit_code_of(err))}, str(err)


def _exited(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[set[int], str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    return {int(exited.value.code or 0)}, capsys.readouterr().err


def _client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, operation)


def _unreachable() -> tuple[set[int], str]:
    err = ClientError(
        {
            "Error": {"Code": "ServiceUnavailable", "Message": "m"},
            CALL_KEY: {"service": "DynamoDB", "endpoint": "http://x", "operation": "GetItem"},
        },
        "GetItem",
    )
    failure = service_failure(err)
    assert failure is not None
    return {int(exit_code_of(err))}, failure.message()


def _outcomes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> dict[str, Callable[[], tuple[set[int], str]]]:
    """The start of each row's message -> (the codes the CLI exits with, the real message)."""
    existing = tmp_path / "report.json"
    existing.write_text("{}", encoding="utf-8")
    settled_at = MIGRATING.effective_at or CHANGED_AT
    return {
        "a forward backfill needs the record in phase": lambda: _code(
            _raised(lambda: backfill_layouts(LEGACY_AFTER, BackfillDirection.FORWARD))
        ),
        "could not complete:": lambda: _unreachable(),
        "--report-file PATH already exists": lambda: _code(
            _raised(
                lambda: check_output_file(
                    existing, overwrite=False, option="--report-file", same_command_replaces=True
                )
            )
        ),
        "'bf.json' is not an output format": lambda: _exited(
            ["--table", "sagas", "backfill", "--output", "bf.json"], capsys
        ),
        "--table is a global option": lambda: _exited(["drift", "--table", "sagas"], capsys),
        "--shards 32 disagrees with the record": lambda: _code(
            _raised(
                lambda: CliContext("t", None, None, None, 32, 1).require_overrides_agree(MIGRATING)
            )
        ),
        "the open index's shard count is": lambda: _code(
            _raised(lambda: plan_open_index_move(OPEN_INDEX_ADDING, "open", shard_count=32))
        ),
        "another backfill run holds the lease": lambda: _code(
            LeaseHeldError("me@host/1", "2026-03-01T09:02:00.000Z", retry_at=CHANGED_AT)
        ),
        "the current state takes effect at": lambda: _code(
            LeaseNotYetEffectiveError("2026-03-01T09:01:15.000Z", 75, retry_at=settled_at)
        ),
        "phase sharded stops readers from reading": lambda: _code(
            _raised(
                lambda: _require_settled_switch(
                    MIGRATING, plan_move(MIGRATING, Phase.SHARDED), CHANGED_AT, DEFAULT_TIMING
                )
            )
        ),
        # A failed execution: 1, or 6 once a row was re-stamped (backfill/output.exit_code).
        "execution FAILED:": lambda: (
            {int(exit_code(_summary(0), failed=True)), int(exit_code(_summary(3), failed=True))},
            "",  # the failure's words are the execution's own (test_backfill_advice.py)
        ),
        "stack 'NAME' has 0 outputs": lambda: _code(
            _raised(lambda: state_machine_arn_from_outputs({}, "NAME"))
        ),
        "could not read stack 'NAME'": lambda: _code(
            _lookup_error("NAME", _client_error("ValidationError", "DescribeStacks"))
        ),
        "fence slot N refused this run's epoch": lambda: _code(
            refused_by_slot(
                1,
                100,
                {"epoch": 700, "leaseToken": "t", "armedBy": "a", "armedAt": "x"},
                "the record's leaseEpoch is 99",
            )
        ),
        "the backfill lease acquire got no answer": lambda: _code(
            LeaseOutcomeUnknownError(
                "tok",
                _client_error("ThrottlingException", "UpdateItem"),
                _client_error("ThrottlingException", "GetItem"),
            )
        ),
        "exit 3 of the backfill": lambda: ({int(EXIT_ANOMALIES)}, ""),
        "exit 3 of `phase set`": lambda: _code(
            PreconditionFailedError("sharded", [PreconditionResult("parity", False, "x")])
        ),
    }


def _summary(restamped: int) -> BackfillSummary:
    return BackfillSummary(
        direction=BackfillDirection.FORWARD,
        dry_run=False,
        total_segments=1,
        max_writes_per_second=50,
        scanned=restamped,
        restamped=restamped,
        skipped=0,
        anomalies=0,
        would_restamp=0,
        throttles=0,
        anomaly_keys=[],
        complete=False,
    )


def _when_something_fails() -> list[str]:
    text = RUNBOOK.read_text(encoding="utf-8")
    section = text.split("## When something fails", 1)[1].split("\n## ", 1)[0]
    return [
        line
        for line in section.splitlines()
        if line.startswith("| ") and "exit" in line.split(" | ")[0]
    ]


def _fragments(message: str) -> list[str]:
    """The literal words of a row's message: its placeholders (..., TIME, N, PATH, NAME) cut."""
    literal = message.strip("`")
    return [
        f.strip(" `'")
        for f in re.split(r"\.\.\.|\b(?:TIME|N|PATH|SERVICE|ENDPOINT|OPERATION)\b|'NAME'", literal)
        if f.strip(" `'")
    ]


def test_every_exit_code_in_when_something_fails_is_the_one_the_cli_exits_with(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outcomes = _outcomes(capsys, tmp_path)
    rows = _when_something_fails()
    assert len(rows) >= 12
    checked = set()
    for row in rows:
        message = row.split(" | ")[0].removeprefix("| ")
        key = next((k for k in outcomes if k in message), None)
        assert key is not None, f"the runbook row {message!r} has no outcome here: add its error"
        written = {int(code) for code in re.findall(r"exit (\d)", message)}
        codes, real = outcomes[key]()
        assert written == codes, (message, codes)
        assert all(int(code) in set(ExitCode) for code in written)
        shown = message.split("` (exit", 1)[0]
        if real and message.startswith("`"):  # a quoted message, not "exit 3 of ..."
            for fragment in _fragments(shown.split(": ", 1)[0] if key.startswith("'") else shown):
                assert fragment in real, (fragment, real)
        checked.add(key)
    assert checked == set(outcomes), set(outcomes) - checked
