"""`python -m devkit.local` (`make local`) as an operator uses it: a real process that starts
dynalite, creates and seeds the table, prints what to export, serves until Ctrl-C, then stops
the server. The printed exports alone point `saga-index` at it; preflight there tells a server
that does not support a call from one that cannot be reached."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit.demo.operator import DEMO_TIMING
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main as saga_index_main

pytestmark = pytest.mark.conformance

REPO_ROOT = Path(__file__).resolve().parents[2]
# Synthesis (when stale), dynalite's start and the seed of ~5,000 rows.
START_TIMEOUT = 240.0


def _read_exports(process: subprocess.Popen[str]) -> dict[str, str]:
    """The `export NAME=VALUE` lines, up to the `unset` line that ends them (read on a thread:
    a pipe's buffered lines are invisible to select)."""
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    exports: dict[str, str] = {}
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            assert process.poll() is None, "devkit.local exited before printing its exports"
            continue
        words = shlex.split(line)
        if words[0] == "unset":
            assert set(words[1:]) == {"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"}
            return exports
        assert words[0] == "export", line
        name, _, value = words[1].partition("=")
        exports[name] = value
    raise AssertionError(f"no exports within {START_TIMEOUT} s")


@pytest.fixture
def local_table() -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "devkit.local", "--port", "0", "--table", "propflow-rehearsal"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process, _read_exports(process)
    finally:
        if process.poll() is None:
            # SIGTERM stops its server as Ctrl-C does; SIGKILL alone left dynalite (its
            # grandchild) running, orphaned, after a test that failed mid-way.
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def saga_index(exports: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """`saga-index` with the caller's environment, minus AWS settings, plus the exports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(exports)
    env["PYTHONPATH"] = str(REPO_ROOT / "lambdas")
    return subprocess.run(
        [sys.executable, "-m", "saga_index_cli", "--max-attempts", "1", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_make_local_serves_the_seeded_table_until_ctrl_c(
    local_table: tuple[subprocess.Popen[str], dict[str, str]],
) -> None:
    process, exports = local_table
    assert exports["SAGA_TABLE_NAME"] == "propflow-rehearsal"
    endpoint = exports["AWS_ENDPOINT_URL_DYNAMODB"]
    assert endpoint.startswith("http://127.0.0.1:")
    assert (exports["AWS_ACCESS_KEY_ID"], exports["AWS_REGION"]) == ("local", "us-east-1")

    # The runbook's step 0: the record, never migrated
    shown = saga_index(exports, "phase", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["phase"] == "legacy"
    # The demo's legacy dataset is there: 179 open sagas, read through the repository
    opened = saga_index(exports, "sagas", "open")
    assert opened.returncode == 0, opened.stderr
    assert len(opened.stdout.splitlines()) == 179

    # preflight here: the table passes; dynalite lacks PITR and Contributor Insights
    # (unsupported), the stack's services are not here (unreachable): exit 4, nothing FAILED
    preflight = saga_index(
        exports, "preflight", "--json", "--cloudformation-endpoint-url", "http://127.0.0.1:9"
    )
    assert preflight.returncode == 4, preflight.stderr
    report = json.loads(preflight.stdout)
    assert report["failed"] == []
    # The local table is built from the template, open-saga index included: ready.
    assert report["warnings"] == []
    open_index = next(c for c in report["checks"] if c["name"] == "open-index")
    assert open_index["verdict"] == "pass"
    assert report["notChecked"] == {
        "point-in-time-recovery": "unsupported",
        "contributor-insights-table": "unsupported",
        "contributor-insights-index": "unsupported",
        "stack": "unreachable",
        "functions": "unreachable",
        "state-machine": "unreachable",
    }
    pitr = next(c for c in report["checks"] if c["name"] == "point-in-time-recovery")
    assert pitr["detail"] == (
        f"not supported by this server: DynamoDB at {endpoint} does not implement "
        "DescribeContinuousBackups"
    )

    _rehearse_adding_the_open_index(exports)

    # Ctrl-C stops the server: exit 0, and nothing listens on its port any more
    process.send_signal(signal.SIGINT)
    assert process.stderr is not None
    process.wait(timeout=30)
    stderr = process.stderr.read()
    assert process.returncode == 0, stderr
    assert "the server is stopped" in stderr
    port = int(endpoint.rsplit(":", 1)[1])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def fast_saga_index(exports: dict[str, str], *argv: str) -> tuple[int, dict[str, Any]]:
    """`saga-index ARGV --json` in this process against the local table with the demo's short T
    (effectiveAt 1 s after a change instead of 75 s: the commands and checks are the same):
    its exit code and its JSON document."""
    buffer = io.StringIO()
    connection = [
        "--table",
        exports["SAGA_TABLE_NAME"],
        "--endpoint-url",
        exports["AWS_ENDPOINT_URL_DYNAMODB"],
        "--region",
        exports["AWS_REGION"],
        "--max-attempts",
        "3",
    ]
    code = 0
    with contextlib.redirect_stdout(buffer):
        try:
            saga_index_main([*connection, *argv, "--json"], hooks=CliHooks(timing=DEMO_TIMING))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    lines = [line for line in buffer.getvalue().splitlines() if line.strip()]
    return code, json.loads(lines[-1]) if lines else {}


def _after_the_margin() -> None:
    """The open-index backfill starts after effectiveAt plus the in-flight margin."""
    time.sleep(DEMO_TIMING.in_flight_margin_seconds + 0.1)


def _open_sagas(exports: dict[str, str]) -> int:
    """`saga-index sagas open` in a process of its own (it reads the record afresh)."""
    opened = saga_index(exports, "sagas", "open")
    assert opened.returncode == 0, opened.stderr
    return len(opened.stdout.splitlines())


def _rehearse_adding_the_open_index(exports: dict[str, str]) -> None:
    """docs/runbook.md "Add the open-saga index" on `make local`'s table: O0, O1, O2, the way
    back before the end (removing, its backfill, off), then O1, O2, O2b, O3 again and the end's
    refusal."""
    # O0: preflight before the move judges the open index alone as required (ready: it passes)
    preflight = saga_index(
        exports,
        "preflight",
        "--open-index",
        "--json",
        "--cloudformation-endpoint-url",
        "http://127.0.0.1:9",
    )
    assert preflight.returncode == 4, preflight.stderr  # as above: only what dynalite lacks
    report = json.loads(preflight.stdout)
    assert (report["failed"], report["warnings"]) == ([], [])
    assert next(c for c in report["checks"] if c["name"] == "open-index")["verdict"] == "pass"
    shown = json.loads(saga_index(exports, "open-index", "show", "--json").stdout)
    assert (shown["openIndex"], shown["routing"]["enumerations"]) == ("off", "gsi4")
    reason = ("--reason", "make local: rehearse the runbook")
    # O1: writers stamp; O2: the 179 open sagas that predate it are stamped (dry run first)
    code, adding = fast_saga_index(exports, "open-index", "set", "adding", *reason, "--wait")
    assert (code, adding["openIndex"], adding["effective"]) == (0, "adding", True)
    _after_the_margin()
    code, dry = fast_saga_index(
        exports, "open-index", "backfill", "--dry-run", "--max-writes-per-second", "500"
    )
    assert (code, dry["dryRun"], dry["stamped"]) == (0, True, 179)
    code, stamped = fast_saga_index(
        exports, "open-index", "backfill", "--max-writes-per-second", "500"
    )
    assert (code, stamped["stamped"], stamped["anomalies"], stamped["verified"]) == (
        0,
        179,
        0,
        True,
    )
    # Readers never left GSI4 before O3
    assert _open_sagas(exports) == 179
    # The way back before the end: removing (never blocked), its backfill removes every stamp,
    # then off (its check: no row carries OpenSagaPK)
    code, removing = fast_saga_index(exports, "open-index", "set", "removing", *reason, "--wait")
    assert (code, removing["openIndex"]) == (0, "removing")
    _after_the_margin()
    code, removed = fast_saga_index(
        exports, "open-index", "backfill", "--max-writes-per-second", "500"
    )
    assert (code, removed["direction"], removed["removed"]) == (0, "remove", 179)
    code, off = fast_saga_index(exports, "open-index", "set", "off", *reason, "--wait")
    assert (code, off["openIndex"]) == (0, "off"), off
    assert [c["name"] for c in off["checks"] if c["passed"]] == ["no-open-index-keys"]
    # O1-O3: the sweeps' reads switch to the open index; the same 179 open sagas
    code, _ = fast_saga_index(exports, "open-index", "set", "adding", *reason, "--wait")
    assert code == 0
    _after_the_margin()
    code, stamped = fast_saga_index(
        exports, "open-index", "backfill", "--max-writes-per-second", "500"
    )
    assert (code, stamped["stamped"]) == (0, 179)
    # O2b: the drift guard's read agrees (every open saga stamped, no closed one)
    code, drift = fast_saga_index(exports, "drift")
    assert code == 0, drift
    # Compared (openIndex is null when the guard did not read the open index): its 179 entries
    assert (drift["openIndex"][: len("adding(")], drift["openIndexEntries"]) == ("adding(", 179)
    counts = ("openIndexUnstampedRows", "openIndexStrayRows", "openIndexMissingRows")
    assert [drift[name] for name in counts] == [0, 0, 0], drift
    code, opened = fast_saga_index(
        exports, "open-index", "set", "open", *reason, "--recheck-delay", "0", "--wait"
    )
    assert (code, opened["openIndex"], opened["routing"]["enumerations"]) == (
        0,
        "open",
        "open-index",
    ), opened
    assert [c["name"] for c in opened["checks"] if c["passed"]] == ["open-index-parity"]
    assert _open_sagas(exports) == 179
    # `open` is the end: the way back is refused (exit 2), nothing written
    refused = saga_index(exports, "open-index", "set", "removing", *reason)
    assert refused.returncode == 2, refused.stderr
    shown = json.loads(saga_index(exports, "open-index", "show", "--json").stdout)
    assert (shown["openIndex"], shown["version"]) == ("open", opened["version"])


def _local(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devkit.local", *argv],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
    )


def test_a_taken_port_is_refused_at_once_naming_the_way_out() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _local("--port", str(port), "--empty")
    assert done.returncode == 1
    assert done.stdout == ""  # no exports for a server that never started
    assert f"port {port} is taken" in done.stderr
    assert "--port 0" in done.stderr
    # The server already listening there (a first `make local`) is not ours: nothing was
    # started or stopped here, and the message does not claim otherwise
    assert "Nothing was started here and that server is left as it is" in done.stderr
    assert "the server is stopped" not in done.stderr


@pytest.mark.parametrize(
    ("argv", "problem"),
    [(["--table", "x"], "table name 'x'"), (["--port", "70000"], "--port 70000")],
)
def test_bad_arguments_exit_2_before_a_server_starts(argv: list[str], problem: str) -> None:
    done = _local(*argv)
    assert done.returncode == 2
    assert problem in done.stderr
    assert "starting dynalite" not in done.stderr
