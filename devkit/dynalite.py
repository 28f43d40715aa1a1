"""Start and stop a local DynamoDB-compatible server (dynalite, from node_modules) on loopback.

Used by the conformance tests and the demo. The process is always stopped on exit, including on
KeyboardInterrupt, so nothing is left running.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DYNALITE_CLI = REPO_ROOT / "node_modules" / "dynalite" / "cli.js"
# Keeps the server up when a client hangs up mid-request (the file says why).
HANGUP_GUARD = Path(__file__).resolve().parent / "node" / "dynalite-hangup.cjs"


# What dynalite prints once its server listens (node_modules/dynalite/cli.js), then the port.
_LISTENING = "Dynalite listening at: http://127.0.0.1"
_PORT_ATTEMPTS = 5


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class DynaliteServer:
    """`with DynaliteServer() as server: server.endpoint_url` -> http://127.0.0.1:PORT."""

    def __init__(self, *, port: int | None = None, data_dir: Path | None = None) -> None:
        self._port_chosen_here = port is None
        self.port = port or free_port()
        self.data_dir = data_dir
        self._process: subprocess.Popen[bytes] | None = None
        self._log: tempfile._TemporaryFileWrapper[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> DynaliteServer:
        """Start the server and wait until THIS process says it listens.

        A socket that accepts is not proof: the port comes from free_port(), which releases it
        before dynalite binds it, so another process (a parallel test worker's server) may hold
        it by then; our dynalite then exits with EADDRINUSE while a connect would reach the other
        server. The server's own "listening" line is the proof, and a lost port is retried on a
        fresh one (only when the port was not chosen by the caller)."""
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not on PATH: dynalite needs Node.js 20+")
        if not DYNALITE_CLI.exists():
            raise RuntimeError(f"{DYNALITE_CLI} is missing: run `npm ci` in {REPO_ROOT}")
        deadline = time.monotonic() + timeout
        attempts = _PORT_ATTEMPTS if self._port_chosen_here else 1
        output = ""
        for attempt in range(attempts):
            if self._launch(node, deadline):
                return self
            output = self._output()
            self.stop()
            if "EADDRINUSE" not in output or attempt + 1 == attempts:
                break
            self.port = free_port()
        raise RuntimeError(f"dynalite did not start on port {self.port} in {timeout}s: {output}")

    def _launch(self, node: str, deadline: float) -> bool:
        """True once the server printed that it listens on self.port; False if it exited."""
        args = [node, "--require", str(HANGUP_GUARD), str(DYNALITE_CLI)]
        args += ["--host", "127.0.0.1", "--port", str(self.port)]
        # Tables become ACTIVE at once instead of after dynalite's default simulated delay.
        args += ["--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]
        if self.data_dir is not None:
            args += ["--path", str(self.data_dir)]
        self._log = tempfile.NamedTemporaryFile(prefix="dynalite-", suffix=".log")  # noqa: SIM115
        self._process = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        listening = f"{_LISTENING}:{self.port}"
        while time.monotonic() < deadline:
            if listening in self._output():
                return True
            if self._process.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def status(self) -> str:
        """Whether the server still runs (its pid, or how it exited) and the end of its output:
        what a test that lost its server reports."""
        process = self._process
        if process is None:
            state = "not running (stopped, or never started)"
        elif process.poll() is None:
            state = f"running (pid {process.pid})"
        else:
            state = f"EXITED with code {process.returncode} (pid {process.pid})"
        return f"dynalite on port {self.port}: {state}; its last output:\n{self._output()}"

    def _output(self) -> str:
        return log_tail(self._log, 2000)

    def stop(self) -> None:
        process, self._process = self._process, None
        stop_process(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> DynaliteServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def stop_process(process: subprocess.Popen[bytes] | None) -> None:
    """Stop a child process: SIGTERM, then SIGKILL after 5 s; nothing when it already ended."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def log_tail(log: Any, chars: int) -> str:
    """The last `chars` characters a child process wrote to its log file (a temporary file)."""
    if log is None:
        return ""
    log.flush()
    return Path(log.name).read_text(errors="replace")[-chars:]


def local_client_env(endpoint_url: str) -> dict[str, str]:
    """Environment for a boto3 client of a local server: dummy credentials, fixed region."""
    # The global AWS_ENDPOINT_URL would send every service (STS, CloudWatch) to the server too.
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    env.update(
        AWS_ENDPOINT_URL_DYNAMODB=endpoint_url,
        AWS_ACCESS_KEY_ID="local",
        AWS_SECRET_ACCESS_KEY="local",  # noqa: S106 - a local server accepts any credentials
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
    )
    return env
