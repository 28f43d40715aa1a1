"""The CLI backfill as a real process against a real server process (dynalite): killed with
SIGKILL mid-run, or stopped with SIGTERM, then run again.

A killed process gets no chance to clean up, so these prove the property the design rests on:
every write is a single conditional UpdateItem of GSI4PK, so there is never a half-done row,
and a re-run only finds the rows that are still on the legacy key. The killed run also keeps
its lease in the control record: a re-run is "not yet" (exit 5, naming the dead holder) until the
lease expires, or until `backfill --stop` releases it (at once: the holder's process is gone from
this host); then it takes the lease and converges. The re-run after expiry is the CLI in-process
with an injected clock: no test waits for the TTL. A run stopped with SIGTERM releases its lease,
so the next run need not wait; having re-stamped rows, it exits 6 (partly done).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from devkit.dynalite import local_client_env
from saga_index.index import keys
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import utc_now
from saga_index.store.dynamo.codec import deserialize
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    Clock,
    N,
    assert_every_valid_saga_on_its_shard,
    is_control_row,
    plant,
    seed,
    without_gsi4pk,
)

pytestmark = pytest.mark.conformance

REPO_ROOT = Path(__file__).resolve().parents[2]
ROWS = [f"k{n:03}" for n in range(120)]
SLOW = "40"  # writes/s: 120 rows take about 3 s, long enough to interrupt mid-run


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
    backend = make_backend("kill", synthesized_template, endpoint_url=dynalite_endpoint)
    seed(backend, ROWS)
    plant(backend, "migrating")
    return backend


def cli_process(dynamo: Backend, rate: str) -> subprocess.Popen[str]:
    assert dynamo.endpoint_url is not None
    env = local_client_env(dynamo.endpoint_url)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "lambdas"), str(REPO_ROOT)])
    argv = [
        sys.executable,
        "-m",
        "saga_index_cli",
        "--table",
        dynamo.table_name,
        "backfill",
        "--segments",
        "2",
        "--max-writes-per-second",
        rate,
        "--json",
    ]
    return subprocess.Popen(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def moved(dynamo: Backend) -> int:
    return sum(
        1
        for raw in dynamo.scan_all()
        if raw.get("entityType", {}).get("S") == keys.ENTITY_TYPE
        and raw.get("GSI4PK", {}).get("S") != keys.LEGACY_GSI4PK
    )


def wait_until_moved(dynamo: Backend, process: subprocess.Popen[str], at_least: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        count = moved(dynamo)
        if count >= at_least:
            return count
        if process.poll() is not None:
            raise AssertionError(f"the backfill ended first: {process.communicate()}")
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"fewer than {at_least} rows moved in 30 s")


def assert_no_row_half_written(dynamo: Backend, before: dict[str, dict[str, Any]]) -> None:
    for raw in dynamo.scan_all():
        if is_control_row(raw):
            continue
        assert without_gsi4pk(raw) == without_gsi4pk(before[raw["PK"]["S"]])
        item = deserialize(raw)
        if item["entityType"] == keys.ENTITY_TYPE and item["GSI4PK"] != keys.LEGACY_GSI4PK:
            assert item["GSI4PK"] == keys.shard_gsi4pk_for_person(item["personId"], N)


def finish(dynamo: Backend) -> dict[str, Any]:
    process = cli_process(dynamo, rate="1000")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 3, err  # complete; the planted anomalies remain
    summary: dict[str, Any] = json.loads(out)
    assert summary["anomalies"] == len(ANOMALIES)
    assert summary["verification"]["ok"] is True
    assert summary["completionRecorded"] is True
    return summary


def finish_in_process(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], clock: Clock
) -> tuple[int, str, str]:
    """The same command in this process, with the wall clock injected (a later time)."""
    assert dynamo.endpoint_url is not None
    argv = ["--table", dynamo.table_name, "--endpoint-url", dynamo.endpoint_url]
    argv += ["--region", "us-east-1", "backfill", "--segments", "2", "--json"]
    argv += ["--max-writes-per-second", "1000"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(argv, hooks=CliHooks(clock=clock))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def settled_count(dynamo: Backend) -> int:
    """The rows moved, once two reads 0.3 s apart agree."""
    last = moved(dynamo)
    for _ in range(20):
        time.sleep(0.3)
        now = moved(dynamo)
        if now == last:
            return now
        last = now
    return last


def lease_of(dynamo: Backend) -> Any:
    return ControlStore(dynamo.client, dynamo.table_name).read().lease


def test_given_a_run_killed_with_sigkill_mid_way_when_run_again_then_it_converges(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a backfill process re-stamping at 40 writes/s
    before = {raw["PK"]["S"]: raw for raw in dynamo.scan_all()}
    process = cli_process(dynamo, rate=SLOW)
    # When it is killed outright after some rows moved
    wait_until_moved(dynamo, process, at_least=20)
    process.kill()
    process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL
    # Then no row is half-written, and some are still to do (a request the process had sent
    # before it died may still land on the server: count once the count holds still)
    done = settled_count(dynamo)
    assert 20 <= done < len(ROWS)
    assert_no_row_half_written(dynamo, before)
    # and its lease is still in the record: it died holding it
    dead = lease_of(dynamo)
    assert dead is not None
    assert dead.holder.endswith(f"/{process.pid}")
    # When it runs again at once, the dead run's lease is still live: refused, naming it
    clock = Clock(utc_now())
    code, out, err = finish_in_process(dynamo, capsys, clock)
    assert code == 5
    assert json.loads(out)["retryLater"] is True  # the refusal as data, with its retryAt
    assert f"/{process.pid}'" in err
    assert "live until" in err
    assert "`saga-index backfill --stop`" in err
    assert moved(dynamo) == done
    # When it runs again once that lease expired (the clock, not a wait)
    clock.now = dead.expires_at
    code, out, err = finish_in_process(dynamo, capsys, clock)
    # Then it takes the lease over, re-stamps exactly the rest, and records its completion
    assert code == 3, err  # complete; the planted anomalies remain
    summary = json.loads(out)
    assert summary["completionRecorded"] is True
    assert summary["restamped"] == len(ROWS) - done
    recorded = ControlStore(dynamo.client, dynamo.table_name).read()
    assert recorded.lease is None
    assert recorded.last_backfill is not None
    assert (recorded.last_backfill.complete, recorded.last_backfill.verified) == (True, True)
    assert moved(dynamo) == len(ROWS)
    assert_every_valid_saga_on_its_shard(dynamo)
    assert_no_row_half_written(dynamo, before)


def test_given_a_killed_run_when_stop_releases_its_lease_then_the_same_command_runs_at_once(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    process = cli_process(dynamo, rate=SLOW)
    wait_until_moved(dynamo, process, at_least=10)
    process.kill()
    process.wait(timeout=10)
    assert lease_of(dynamo) is not None
    # The advice of the refusal, literally: `saga-index backfill --stop` (no ARN, no stack)
    assert dynamo.endpoint_url is not None
    stop = ["--table", dynamo.table_name, "--endpoint-url", dynamo.endpoint_url]
    stop += ["--region", "us-east-1", "backfill", "--stop"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(stop, hooks=CliHooks(clock=Clock(utc_now())))
    out, err = capsys.readouterr()
    assert exited.value.code in (0, None), err
    assert f"its process {process.pid} is gone from this host" in out
    assert lease_of(dynamo) is None
    # then the same command again, at once
    code, out, err = finish_in_process(dynamo, capsys, Clock(utc_now()))
    assert code == 3, err  # complete; the planted anomalies remain
    assert moved(dynamo) == len(ROWS)


def test_given_a_run_sent_sigterm_when_it_stops_then_it_reports_what_it_did_and_exits_6(
    dynamo: Backend,
) -> None:
    before = {raw["PK"]["S"]: raw for raw in dynamo.scan_all()}
    process = cli_process(dynamo, rate=SLOW)
    wait_until_moved(dynamo, process, at_least=10)

    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)

    assert process.returncode == 6, err  # interrupted, partly done
    assert "SIGTERM received: stopping after the in-flight writes" in err
    summary = json.loads(out)
    assert summary["complete"] is False
    assert summary["interrupted"] is True
    # what it says it did is what the table shows: the in-flight writes finished
    assert summary["restamped"] == moved(dynamo) < len(ROWS)
    assert_no_row_half_written(dynamo, before)
    # it released its lease (recording that it did not complete: no completion for `phase set`)
    assert summary["completionRecorded"] is False
    assert lease_of(dynamo) is None
    second = finish(dynamo)
    assert summary["restamped"] + second["restamped"] == len(ROWS)
    assert_every_valid_saga_on_its_shard(dynamo)
