"""The engine's two processes: dynalite, and the semantics proxy in front of it.

The proxy runs as a process of its own (`python -m devkit.engine`), not as a thread of its
caller: a backfill's 64 segment threads and the proxy would otherwise share one interpreter lock
on a 2-core machine. It stops when its caller's process goes (its standard input closes), so a
killed caller leaves no proxy behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from devkit.dynalite import REPO_ROOT, DynaliteServer, log_tail, stop_process
from devkit.engine.proxy import STATS_PATH, ProxyOptions
from devkit.engine.serve import SERVING_LINE, PortInUseError
from devkit.semantics.dilation import describe_time_scale
from devkit.semantics.model import Stats

RAW_NOTE = (
    "raw engine: dynalite alone, with no transactions, no transaction conflicts and no per-key "
    "ceilings (the backfill runs with the clock fence only)"
)


def port_in_use(port: int) -> bool:
    """Whether something already listens on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


class Engine:
    """`with Engine() as engine: engine.endpoint_url`: dynalite behind the semantics proxy.

    `port`: the port clients connect to (the proxy's; dynalite's when `raw`), 0 for any free
    one. `raw`: dynalite alone, no proxy. `time_scale`: the proxy's engine seconds per real
    second (devkit.semantics.dilation; None: the options', real time by default; the raw engine
    has no clock of its own). A port in use raises PortInUseError before anything starts."""

    def __init__(
        self,
        *,
        port: int = 0,
        options: ProxyOptions | None = None,
        raw: bool = False,
        data_dir: Path | None = None,
        server_factory: Callable[..., DynaliteServer] = DynaliteServer,
        time_scale: float | None = None,
    ) -> None:
        self.port = port
        options = options or ProxyOptions()
        if time_scale is not None:
            options = replace(options, time_scale=time_scale)
        self.options = options.validate()
        if raw and self.options.time_scale != 1:
            raise ValueError(
                "the raw engine (dynalite alone) has no clock to dilate: run it at time "
                "scale 1, or the proxy (not raw) at this scale"
            )
        self.raw = raw
        self.server = server_factory(port=port or None, data_dir=data_dir) if raw else None
        self._data_dir = data_dir
        self._server_factory = server_factory
        self._proxy: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self.endpoint_url = ""
        # How the proxy's process ended once stopped (0: it shut down cleanly on SIGTERM).
        self.proxy_exit_code: int | None = None

    def start(self, timeout: float = 30.0) -> Engine:
        if self.port and port_in_use(self.port):
            raise PortInUseError(self.port)
        if self.raw:
            assert self.server is not None
            self.server.start(timeout)
            self.endpoint_url = self.server.endpoint_url
            return self
        self.server = self._server_factory(data_dir=self._data_dir)
        try:
            self.server.start(timeout)
            self._start_proxy(self.server.endpoint_url, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_proxy(self, upstream: str, timeout: float) -> None:
        options = self.options
        args = [sys.executable, "-m", "devkit.engine", "--upstream", upstream]
        args += ["--port", str(self.port), "--exit-with-stdin"]
        args += ["--throttle-code", options.throttle_code, "--in-flight", repr(options.in_flight)]
        args += ["--rcu-ceiling", repr(options.rcu_ceiling)]
        args += ["--wcu-ceiling", repr(options.wcu_ceiling)]
        args += ["--time-scale", repr(options.time_scale)]
        args += [] if options.conflicts else ["--no-conflicts"]
        args += [] if options.ceilings else ["--no-ceilings"]
        paths = [str(REPO_ROOT), str(REPO_ROOT / "lambdas"), os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        self._log = tempfile.NamedTemporaryFile(prefix="devkit-engine-", suffix=".log")  # noqa: SIM115
        self._proxy = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            cwd=REPO_ROOT,
            env=env,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self._output().splitlines():
                if line.startswith(SERVING_LINE):
                    self.endpoint_url = line.split()[2]
                    self.port = int(self.endpoint_url.rsplit(":", 1)[1])
                    return
            if self._proxy.poll() is not None:
                output = self._output()
                if "is in use" in output:
                    raise PortInUseError(self.port)
                raise RuntimeError(f"the semantics proxy exited at its start: {output}")
            time.sleep(0.05)
        raise RuntimeError(f"the semantics proxy did not start in {timeout}s: {self._output()}")

    def _output(self) -> str:
        return log_tail(self._log, 4000)

    def describe(self) -> str:
        """What serves the endpoint, in words."""
        if self.raw:
            return f"{RAW_NOTE}, on {self.endpoint_url}"
        upstream = self.server.endpoint_url if self.server else "?"
        return (
            f"the semantics proxy on {self.endpoint_url} (DynamoDB's transaction conflicts and "
            f"per-key ceilings, {self.options.rcu_ceiling:,.0f} RCU / "
            f"{self.options.wcu_ceiling:,.0f} WCU per key per second; transactions served "
            f"by the proxy; {describe_time_scale(self.options.time_scale)}) in front of "
            f"dynalite on {upstream}"
        )

    def stats(self) -> dict[str, Any]:
        """What the proxy refused and admitted (devkit.engine.proxy.SemanticsProxy.stats);
        empty for the raw engine."""
        if self.raw or not self.endpoint_url:
            return {}
        with urllib.request.urlopen(self.endpoint_url + STATS_PATH, timeout=10) as response:  # noqa: S310 - loopback
            document: dict[str, Any] = json.loads(response.read())
        return document

    def table_stats(self, table: str) -> Stats:
        """The proxy's counts for `table` as the in-process model keeps them
        (devkit.semantics.model.Stats)."""
        counts = self.stats().get("tables", {}).get(table, {})
        return Stats(
            conflicts=Counter(counts.get("conflicts", {})),
            cancelled_transactions=counts.get("cancelledTransactions", 0),
            throttles=Counter(counts.get("throttles", {})),
            transactions=counts.get("transactions", 0),
            writes=Counter(
                {
                    (operation, int(second)): n
                    for operation, seconds in counts.get("writesPerSecond", {}).items()
                    for second, n in seconds.items()
                }
            ),
        )

    def clock(self) -> float:
        """The proxy's model clock now, in engine seconds (Stats.writes' seconds)."""
        return float(self.stats()["clock"])

    def alive(self) -> bool:
        """Both processes still run."""
        proxy_up = self.raw or (self._proxy is not None and self._proxy.poll() is None)
        server_up = self.server is not None and "running" in self.server.status()
        return bool(proxy_up and server_up)

    def stop(self) -> None:
        proxy, self._proxy = self._proxy, None
        stop_process(proxy)
        if proxy is not None:
            self.proxy_exit_code = proxy.returncode
        if proxy is not None and proxy.stdin is not None:
            with contextlib.suppress(OSError):
                proxy.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> Engine:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def running_engine(**kwargs: Any) -> Iterator[str]:
    """`with running_engine() as endpoint_url:` the engine (Engine's arguments), stopped on
    exit."""
    with Engine(**kwargs) as engine:
        yield engine.endpoint_url
