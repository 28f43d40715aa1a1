"""`python -m devkit.engine`: the semantics proxy as a process of its own (what Engine starts).

    python -m devkit.engine --upstream http://127.0.0.1:PORT [--port 0] [--no-conflicts]
        [--no-ceilings] [--throttle-code ProvisionedThroughputExceededException]
        [--in-flight 0.01] [--rcu-ceiling 3000] [--wcu-ceiling 1000] [--time-scale 1]
        [--exit-with-stdin]

--time-scale X: engine seconds per real second, in (0, 1] (devkit.semantics.dilation): the
per-key ceilings are judged per engine second and a transaction's in-flight hold lasts its
engine seconds (at 0.01, one engine second lasts 100 real seconds). 1, the default: real time.

Prints `SERVING_LINE http://127.0.0.1:PORT` on stdout once it listens (PORT the one bound when
--port 0). Exit 0 when stopped (SIGTERM, SIGINT, or its standard input closed with
--exit-with-stdin: the process that started it is gone); 1 the port is in use (the message
names it) or the proxy failed; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Sequence

from aiohttp import web

from devkit.engine.proxy import ProxyOptions, SemanticsProxy
from devkit.semantics.dilation import time_scale_argument
from devkit.semantics.model import THROTTLE_CODES

SERVING_LINE = "devkit.engine: serving"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class PortInUseError(RuntimeError):
    """The proxy's port is taken by another process."""

    def __init__(self, port: int) -> None:
        super().__init__(
            f"port {port} is in use on 127.0.0.1 (another server listens there): nothing was "
            "started; choose another port, or 0 for any free one"
        )
        self.port = port


def parse_args(argv: Sequence[str] | None) -> tuple[str, int, ProxyOptions, bool]:
    parser = argparse.ArgumentParser(prog="python -m devkit.engine", description=__doc__)
    parser.add_argument("--upstream", required=True, help="the server's URL (dynalite)")
    parser.add_argument("--port", type=int, default=0, help="loopback port (0: any free one)")
    parser.add_argument("--no-conflicts", action="store_true", help="no transaction conflicts")
    parser.add_argument("--no-ceilings", action="store_true", help="no per-key ceilings")
    parser.add_argument("--throttle-code", choices=THROTTLE_CODES, default=THROTTLE_CODES[0])
    parser.add_argument("--in-flight", type=float, default=ProxyOptions.in_flight)
    parser.add_argument("--rcu-ceiling", type=float, default=ProxyOptions.rcu_ceiling)
    parser.add_argument("--wcu-ceiling", type=float, default=ProxyOptions.wcu_ceiling)
    parser.add_argument(
        "--time-scale",
        type=time_scale_argument,
        default=ProxyOptions.time_scale,
        help="engine seconds per real second, in (0, 1] (default 1: real time)",
    )
    parser.add_argument("--exit-with-stdin", action="store_true", help="stop when stdin closes")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port} is not a port number (0..65535)")
    options = ProxyOptions(
        conflicts=not args.no_conflicts,
        ceilings=not args.no_ceilings,
        throttle_code=args.throttle_code,
        in_flight=args.in_flight,
        rcu_ceiling=args.rcu_ceiling,
        wcu_ceiling=args.wcu_ceiling,
        time_scale=args.time_scale,
    )
    try:
        options.validate()
    except ValueError as err:
        parser.error(str(err))
    return args.upstream, args.port, options, args.exit_with_stdin


async def serve(
    proxy: SemanticsProxy, port: int, stop: asyncio.Event, *, host: str = "127.0.0.1"
) -> None:
    """Serve until `stop` is set; PortInUseError when `port` is taken."""
    runner = web.AppRunner(proxy.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, reuse_address=False)
        try:
            await site.start()
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise PortInUseError(port) from err
            raise
        bound = runner.addresses[0][1]
        print(f"{SERVING_LINE} http://{host}:{bound} in front of {proxy.upstream.endpoint_url}")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        upstream, port, options, exit_with_stdin = parse_args(argv)
    except SystemExit as exited:
        return int(exited.code) if isinstance(exited.code, int) else EXIT_USAGE

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if exit_with_stdin:

            def watch() -> None:
                # The descriptor, not sys.stdin.buffer: a read of the buffered reader holds its
                # lock, and a proxy stopped by SIGTERM while this thread waits there would wait
                # a second for that lock at exit, then abort ("could not acquire lock for
                # <stdin> at interpreter shutdown").
                with contextlib.suppress(OSError, ValueError):
                    while os.read(sys.stdin.fileno(), 65536):
                        pass
                loop.call_soon_threadsafe(stop.set)

            threading.Thread(target=watch, name="stdin-watch", daemon=True).start()
        await serve(SemanticsProxy(upstream, options), port, stop)

    try:
        asyncio.run(run())
    except PortInUseError as err:
        print(f"devkit.engine: {err}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as err:
        print(f"devkit.engine: failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
