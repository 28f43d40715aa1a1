"""`saga-index backfill` runs as a script meets them: a run that wrote rows and then failed
says so (exit 6) and the same command finishes it; a throttle only lowers a run's cap; the
record's leftover throttle and pause are named when a run starts; a dead local run's lease is
released by `backfill --stop` once its holder is provably gone, and not while it may write."""

from __future__ import annotations

import getpass
import json
import shlex
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws

from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.index.names import INDEX_NAME
from saga_index.layout_change.backfill import local as domain_local
from saga_index.layout_change.backfill.estimate import count_rows_to_move
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.lease.controls import pause_backfill, set_throttle
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.state import BackfillDirection
from saga_index_cli.backfill.local import leftover_control_lines
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_cli import run, store
from tests.support.backfill_contract import ANOMALIES, VALID, Clock, plant, seed
from tests.support.control_seed import seed_state


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-backfill-runs", synthesized_template, endpoint_url=None)


def parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def test_a_run_that_wrote_rows_then_lost_the_table_exits_6_and_the_same_command_finishes_it(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    report = tmp_path / "forward.json"
    command = (
        "backfill",
        "--json",
        "--report-file",
        str(report),
        "--max-writes-per-second",
        "1000",
    )
    real_release = domain_local.release_run

    def server_gone(*_: Any, **__: Any) -> Any:
        raise EndpointConnectionError(endpoint_url="http://127.0.0.1:8000")

    # The rows are re-stamped, then the record cannot be reached to record the completion
    monkeypatch.setattr(domain_local, "release_run", server_gone)
    code, out, err = run(capsys, dynamo, *command)

    assert code == 6, err
    assert "interrupted, partly done: 24 row(s) re-stamped" in err
    assert "run the same command again" in err
    written = json.loads(report.read_text())
    assert json.loads(out) == {
        k: v for k, v in written.items() if k not in ("command", "writtenBy")
    }
    assert (written["exitCode"], written["refused"], written["completionRecorded"]) == (
        6,
        False,
        False,
    )
    assert written["restamped"] == len(VALID)
    assert written["leaseReleased"] is True

    # The advice, literally: the same command again finishes the move and replaces the report
    monkeypatch.setattr(domain_local, "release_run", real_release)
    code, out, err = run(capsys, dynamo, *command)
    assert code == 3, err  # complete; the seeded anomalies remain
    finished = json.loads(report.read_text())
    assert (finished["completionRecorded"], finished["remaining"]) == (True, 0)


def test_a_clean_complete_run_reports_nothing_remaining(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    code, out, err = run(capsys, dynamo, "backfill", "--json", "--max-writes-per-second", "1000")
    assert code == 3, err
    report = json.loads(out)
    assert report["remaining"] == 0
    assert [s["done"] for s in report["segments"]] == [True] * len(report["segments"])
    assert sum(s["restamped"] for s in report["segments"]) == len(VALID)


def test_a_leftover_throttle_above_the_runs_own_cap_does_not_raise_it(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "100")

    code, out, err = run(capsys, dynamo, "backfill", "--max-writes-per-second", "50", "--json")

    assert code == 3, err
    report = json.loads(out)
    assert report["maxWritesPerSecond"] == 50.0
    assert report["appliedMaxWritesPerSecond"] == [50.0]
    assert "the record holds a throttle of 100 writes/s" in err
    assert "keeps its own --max-writes-per-second 50" in err
    assert "It stays until `saga-index backfill throttle --clear`" in err


def test_a_leftover_throttle_below_and_a_pause_are_named_with_their_fate(
    dynamo: Backend,
) -> None:
    plant(dynamo, "migrating")
    set_throttle(store(dynamo), 20, changed_by="operator")
    state = pause_backfill(store(dynamo), changed_by="operator")

    throttle, pause = leftover_control_lines(state, own_rate=50.0)

    assert "capped at 20 writes/s, below its own --max-writes-per-second 50" in throttle
    assert "writes nothing until `saga-index backfill resume`" in pause
    assert "across runs" in pause


def test_stop_releases_a_local_lease_whose_process_is_gone_from_this_host(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    clock = Clock()
    # A pid no process has (above the kernel's pid_max)
    holder = f"{getpass.getuser()}@{socket.gethostname()}/4999999"
    acquire_lease(store(dynamo), holder=holder, token="killed", direction="forward", clock=clock)

    code, out, err = run(capsys, dynamo, "backfill", "--stop", "--json", clock=clock)

    assert code == 0, err
    done = json.loads(out)
    assert (done["holder"], done["leaseReleased"]) == (holder, True)
    assert "is gone from this host" in done["why"]
    assert store(dynamo).read().lease is None


def test_stop_refuses_a_fresh_local_lease_with_exit_5_then_releases_it_when_the_time_named(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    plant(dynamo, "migrating")
    clock = Clock()
    acquire_lease(
        store(dynamo), holder="bob@elsewhere/77", token="bobs", direction="forward", clock=clock
    )

    code, out, err = run(capsys, dynamo, "backfill", "--stop", clock=clock)

    assert code == 5
    assert json.loads(out)["retryLater"] is True  # the refusal as data, with its retryAt
    assert "'bob@elsewhere/77', which heartbeated at" in err
    assert store(dynamo).read().lease is not None
    retry_at = parse(err.split("run `saga-index backfill --stop` again after ")[1][:24])
    assert f"not yet (retry at {err.split('again after ')[1][:24]})" in err

    # The advice, literally: at the time it names, --stop releases it, and a run goes ahead
    later = Clock(retry_at)
    code, out, err = run(capsys, dynamo, "backfill", "--stop", clock=later)
    assert code == 0, err
    assert "released the backfill lease of 'bob@elsewhere/77'" in out
    assert run(capsys, dynamo, "backfill", clock=Clock(retry_at + timedelta(seconds=1)))[0] == 3


# ---- advice, followed literally ----------------------------------------------------------------


def follow(capsys: pytest.CaptureFixture[str], command: str) -> tuple[int, str, str]:
    """Run a printed `saga-index ...` command exactly as printed."""
    words = shlex.split(command)
    assert words[0] == "saga-index", command
    hooks = CliHooks(identity=lambda _: "operator@test", clock=Clock())
    with pytest.raises(SystemExit) as exited:
        main(words[1:], hooks=hooks)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def seed_with_anomaly_leases(dynamo: Backend) -> None:
    """The contract's rows, and for each anomaly a lease that names its tenant (what
    `repair-anomaly --from-lease` reads)."""
    seed(dynamo, VALID)
    for saga_id in ANOMALIES:
        dynamo.client.put_item(
            TableName=dynamo.table_name,
            Item={
                "PK": {"S": f"LEASE#lease-{saga_id}"},
                "SK": {"S": "META"},
                "entityType": {"S": "Lease"},
                "personId": {"S": f"tenant-{saga_id}"},
            },
        )


def test_exit_3_prints_each_anomalys_repair_command_and_following_them_makes_the_run_clean(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_with_anomaly_leases(dynamo)
    plant(dynamo, "migrating")
    command = ("backfill", "--max-writes-per-second", "1000")

    code, out, err = run(capsys, dynamo, *command)

    assert code == 3, err
    assert "then run the same backfill command again" in out
    repairs = [line.strip() for line in out.splitlines() if " repair-anomaly " in line]
    assert len(repairs) == len(ANOMALIES)
    for repair in repairs:
        code, _, err = follow(capsys, repair)
        assert code == 0, (repair, err)
    code, out, err = run(capsys, dynamo, *command)
    assert code == 0, err


def test_throttle_zero_names_pause_and_pause_then_resume_work_as_printed(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "migrating")
    code, _, err = run(capsys, dynamo, "backfill", "throttle", "--max-writes-per-second", "0")
    assert code == 2
    for printed in ("saga-index backfill pause", "saga-index backfill resume"):
        assert f"`{printed}`" in err
        words = printed.split()[1:]
        assert run(capsys, dynamo, *words)[0] == 0


def test_a_wrong_direction_names_the_flag_and_adding_it_works(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(dynamo, "rolling-back")
    code, _, err = run(capsys, dynamo, "backfill", "--dry-run")
    assert code == 2
    assert "add --direction rollback" in err
    code, _, err = run(capsys, dynamo, "backfill", "--dry-run", "--direction", "rollback")
    assert code == 0, err


def test_a_completed_reshard_reports_nothing_remaining_and_counts_only_the_rows_that_move(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    people = [f"person-{n}" for n in range(40)]
    for n, person in enumerate(people):
        dynamo.put_saga(f"r{n:02}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, 16))
    seed_state(dynamo.client, dynamo.table_name, Layout.sharded(16), Layout.sharded(32))
    moving = sum(
        keys.shard_gsi4pk_for_person(p, 16) != keys.shard_gsi4pk_for_person(p, 32) for p in people
    )
    assert 0 < moving < len(people)  # some rows keep their key: shard k of 16 is k of 32
    move = Move(BackfillDirection.FORWARD, Layout.sharded(16), Layout.sharded(32))
    total = count_rows_to_move(dynamo.client, dynamo.table_name, index_name=INDEX_NAME, move=move)
    assert total == moving  # the progress bar's total

    code, out, err = run(capsys, dynamo, "backfill", "--json", "--max-writes-per-second", "1000")

    assert code == 0, err
    report = json.loads(out)
    assert report["restamped"] == moving
    assert (report["remaining"], report["verification"]["remaining"]) == (0, 0)


def test_a_second_ctrl_c_after_rows_were_re_stamped_is_exit_6_and_frees_the_lease(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")

    def ctrl_c(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(domain_local, "release_run", ctrl_c)
    code, out, err = run(capsys, dynamo, "backfill", "--json", "--max-writes-per-second", "1000")

    assert code == 6, err
    assert "then a second Ctrl-C stopped it at once" in err
    assert "Run the same command again: it converges" in err
    assert json.loads(out)["completionRecorded"] is False
    assert store(dynamo).read().lease is None


def test_exit_3_in_json_carries_each_anomalys_repair_command_and_following_them_works(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed_with_anomaly_leases(dynamo)
    plant(dynamo, "migrating")
    report = tmp_path / "bf.json"
    command = ("backfill", "--json", "--max-writes-per-second", "1000")

    code, out, err = run(capsys, dynamo, *command, "--report-file", str(report))

    assert code == 3, err
    printed = json.loads(out)
    assert json.loads(report.read_text())["anomalyKeys"] == printed["anomalyKeys"]
    repairs = [key["repairCommand"] for key in printed["anomalyKeys"]]
    assert len(repairs) == len(ANOMALIES)
    for key, repair in zip(printed["anomalyKeys"], repairs, strict=True):
        assert shlex.quote(key["PK"]) in repair
        code, _, err = follow(capsys, repair)
        assert code == 0, (repair, err)
    code, out, err = run(capsys, dynamo, *command)
    assert code == 0, err
    assert json.loads(out)["anomalyKeys"] == []
