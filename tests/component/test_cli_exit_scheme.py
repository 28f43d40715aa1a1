"""The exit codes a script branches on, for every command: bad input is exit 2 before any call
whatever the state of the table or the network; a service that cannot be reached is exit 4,
naming it, its endpoint and the operation; a runbook step run again is exit 0 with nothing
written; a global option after the subcommand says where it goes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from saga_index.layout_change.backfill import local as domain_local
from saga_index.layout_change.record.store import ControlStore
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import CHANGED_AT, VALID, Clock, plant, seed
from tests.support.control_fixtures import probe_64_shard_keys

# Nothing listens on the discard port: a call is refused at once, one attempt only.
UNREACHABLE = [
    "--table",
    "propflow-x",
    "--endpoint-url",
    "http://127.0.0.1:9",
    "--max-attempts",
    "1",
]


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, clock: Clock | None = None
) -> tuple[int, str, str]:
    hooks = CliHooks(
        identity=lambda _: "operator@test",
        clock=clock or Clock(),
        shard_key_probe=probe_64_shard_keys,
    )
    with pytest.raises(SystemExit) as exited:
        main(list(argv), hooks=hooks)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-exit-scheme", synthesized_template, endpoint_url=None)


# ---- exit 2 before any call ----------------------------------------------------------------


def _bad_inputs(existing: Path) -> list[tuple[list[str], str]]:
    """Each command's bad input, and a word of the error naming it."""
    return [
        (["shard", ""], "personId must be a non-empty string"),
        (["shard", "p-1", ""], "personId must be a non-empty string"),
        (["sagas", "by-person", ""], "personId must be a non-empty string"),
        (["phase", "set", "migrating", "--shards", "3", "--reason", "r"], "power of two"),
        (["phase", "set", "sideways", "--reason", "r"], "sideways"),
        (["phase", "show", "--bogus"], "--bogus"),
        (["status", "--bogus"], "--bogus"),
        (["repair-anomaly", "--saga-id", "s-1", "--person-id", ""], "personId"),
        (["repair-anomaly", "--pk", "", "--sk", "META", "--person-id", "p"], "--pk and --sk"),
        (["repair-anomaly", "--saga-id", "s-1"], "--person-id"),
        (["backfill", "--segments", "0"], "--segments"),
        (["backfill", "--direction", "sideways"], "--direction"),
        (["backfill", "--report-file", str(existing)], "already exists"),
        (["backfill", "--overwrite"], "--overwrite applies to --report-file"),
        (["backfill", "--follow", "nope"], "not an execution ARN"),
        (["backfill", "throttle"], "exactly one of"),
        (["backfill", "clear-fence"], "--reason"),
        (["backfill", "clear-fence", "--reason", " "], "must say why"),
        (["backfill", "throttle", "--max-writes-per-second", "0"], "--max-writes-per-second"),
        (["verify", "--snapshot", str(existing)], "already exists"),
        (["verify", "--snapshot", "a.json", "--compare", "b.json"], "mutually exclusive"),
        (["verify", "--compare", str(existing)], "not valid JSON"),
        (["drift", "--scan-rate", "0"], "--scan-rate"),
        (["watch", "--days", "0"], "--days"),
        (["preflight", "--stack-name", "no spaces"], "--stack-name"),
        (["backfill", "--output", "bf.json"], "give `--report-file bf.json` instead"),
        (["status", "--output", "yaml"], "'yaml' is not an output format"),
        (["phase", "show", "--output", "report.json"], "text or json"),
        (["sagas", "open", "--json", "--output", "text"], "contradicts --output text"),
    ]


def test_every_commands_bad_input_is_exit_2_before_any_call(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    existing = tmp_path / "exists.json"
    existing.write_text("not json")
    for argv, problem in _bad_inputs(existing):
        code, out, err = run(capsys, *UNREACHABLE, *argv)
        # A call made first would meet the unreachable endpoint: exit 4, not 2
        assert (code, out) == (2, ""), (argv, err)
        assert problem in err, (argv, err)
        assert "could not complete" not in err, argv


# ---- exit 4: could not complete ------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "operation"),
    [
        (["phase", "show"], "GetItem"),
        (["drift"], "GetItem"),
        (["--phase", "legacy", "--shards", "16", "verify", "--recheck-delay", "0"], "Scan"),
        (["shard", "p-1"], "GetItem"),
        (["backfill", "--dry-run"], "GetItem"),
    ],
)
def test_an_unreachable_dynamodb_is_exit_4_naming_the_service_endpoint_and_operation(
    capsys: pytest.CaptureFixture[str], argv: list[str], operation: str
) -> None:
    code, out, err = run(capsys, *UNREACHABLE, *argv)
    assert code == 4, err
    assert out == ""
    assert (
        f"could not complete: DynamoDB at http://127.0.0.1:9 could not be reached ({operation})"
        in err
    )


def test_a_found_problem_stays_exit_1(dynamo: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    # A table that does not exist is an answer, not an unreachable service
    code, _, err = run(capsys, "--table", "no-such-table", "drift")
    assert code == 1
    assert "table 'no-such-table' does not exist" in err


# ---- phase set: a step run again ------------------------------------------------------------


def test_phase_set_to_the_phase_the_record_holds_is_exit_0_and_writes_nothing(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "sharded")
    before = dynamo.scan_all()

    for extra in ([], ["--shards", "16"]):
        code, out, err = run(
            capsys,
            "--table",
            dynamo.table_name,
            "phase",
            "set",
            "sharded",
            "--reason",
            "step 7 again",
            "--json",
            *extra,
        )
        assert code == 0, err
        doc = json.loads(out)
        assert (doc["changed"], doc["phase"], doc["shardCount"]) == (False, "sharded", 16)
        assert "already is sharded (version 1): nothing written" in err
    assert dynamo.scan_all() == before

    # A different N is not the same state: still exit 2, still nothing written
    move = ["--table", dynamo.table_name, "phase", "set", "sharded", "--shards", "32"]
    code, _, err = run(capsys, *move, "--reason", "r")
    assert code == 2
    assert dynamo.scan_all() == before


def test_a_move_that_changes_the_record_says_changed_true(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "sharded")
    move = ["--table", dynamo.table_name, "phase", "set", "rolling-back", "--reason", "r"]
    code, out, err = run(capsys, *move, "--json")
    assert code == 0, err
    assert json.loads(out)["changed"] is True


def test_phase_show_prints_effective_as_the_runbook_says_to_wait_for_it(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    show = ("--table", dynamo.table_name, "phase", "show")
    _, before, _ = run(capsys, *show, clock=Clock(CHANGED_AT + timedelta(seconds=1)))
    _, after, _ = run(capsys, *show)
    assert "  effective:    false" in before.splitlines()
    assert "  effective:    true" in after.splitlines()


# ---- global options go first ----------------------------------------------------------------


def test_a_global_option_after_the_subcommand_says_where_it_goes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "drift", "--table", "propflow-x")
    assert (code, out) == (2, "")
    assert "--table is a global option of saga-index" in err
    assert "global options come before the subcommand" in err
    assert "saga-index --table VALUE drift" in err
    assert "--endpoint-url" in err  # the global options are listed


def test_an_option_no_command_knows_gets_clicks_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(capsys, "drift", "--no-such-thing")
    assert code == 2
    assert "No such option '--no-such-thing'" in err
    assert "global option" not in err


# ---- every documented code, provoked for real ------------------------------------------------


def test_a_refused_precondition_is_exit_3(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    # No backfill has run: `phase set sharded`'s checks refuse it
    code, out, err = run(
        capsys, "--table", dynamo.table_name, "phase", "set", "sharded", "--reason", "r"
    )
    assert code == 3, err
    assert json.loads(out)["refused"] is True


def test_not_yet_is_exit_5_with_the_time_to_retry_at(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plant(dynamo, "migrating")
    report = tmp_path / "bf.json"
    code, out, err = run(
        capsys,
        "--table",
        dynamo.table_name,
        "backfill",
        "--report-file",
        str(report),
        clock=Clock(CHANGED_AT),
    )
    written = json.loads(report.read_text())
    assert code == 5
    assert json.loads(out) == {
        "retryLater": True,
        "retryAt": written["retryAt"],
        "message": json.loads(out)["message"],
    }
    assert written["exitCode"] == 5
    assert f"not yet (retry at {written['retryAt']})" in err


def test_a_control_write_that_lost_a_transient_conflict_is_exit_5(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(dynamo, "migrating")

    def conflict(*_: Any, **__: Any) -> Any:
        raise ClientError(
            {"Error": {"Code": "TransactionConflictException", "Message": "in use"}},
            "UpdateItem",
        )

    monkeypatch.setattr(ControlStore, "update", conflict)
    code, out, err = run(capsys, "--table", dynamo.table_name, "backfill", "pause")
    assert code == 5
    assert json.loads(out)["retryLater"] is True
    assert "DynamoDB refused the UpdateItem (TransactionConflictException)" in err
    assert "Run the same command again in a moment" in err


def test_a_run_that_wrote_rows_then_failed_is_exit_6(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")

    def server_gone(*_: Any, **__: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:8000")

    monkeypatch.setattr(domain_local, "release_run", server_gone)
    code, _, err = run(capsys, "--table", dynamo.table_name, "backfill", "--json")
    assert code == 6, err
    assert "interrupted, partly done" in err


def test_the_documented_exit_codes_are_the_ones_this_file_provokes() -> None:
    table = Path("docs/cli.md").read_text(encoding="utf-8").split("## Exit codes", 1)[1]
    documented = {
        int(line.split("|")[1])
        for line in table.split("## ", 1)[0].splitlines()
        if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    }
    assert documented == {0, 1, 2, 3, 4, 5, 6}
