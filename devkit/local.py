"""`make local` / `python -m devkit.local`: a local table to rehearse the runbook on by hand.

Starts the fast engine on loopback (devkit.engine: dynalite behind the semantics proxy, which
applies DynamoDB's transaction conflicts and per-key ceilings and serves transactions;
`--raw-engine`: dynalite alone, which has neither), creates the table from the synthesised
template (devkit.schema), seeds the demo's legacy dataset (devkit.seed; `--empty`: none), prints
on stdout the exact environment a shell must export to point `saga-index` at it, and keeps
serving until Ctrl-C or SIGTERM, then stops the server. Nothing is kept: the data lives in the
server's memory and is gone when it stops.

Exit 0 stopped by Ctrl-C/SIGTERM; 1 the server could not start (its port is taken: a second
`make local` while one serves), the table could not be created or seeded, or the server died
while serving; 2 bad arguments. Through `make local`, make reports a failure as `Error 1` and
itself exits 2 (make's own code for a failed recipe).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

from botocore.exceptions import BotoCoreError, ClientError

from devkit.dynalite import DynaliteServer
from devkit.engine import Engine, PortInUseError
from devkit.local_env import LOCAL_ENVIRONMENT, UNSET_ENVIRONMENT, local_credentials
from devkit.schema import SchemaError, create_table, load_template
from devkit.seed import build_dataset, seed_table
from saga_index.index import InvalidInputError
from saga_index.store.dynamo import make_client
from saga_index_cli.options import validate_table_name

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_TABLE = "propflow-local"
DEFAULT_PORT = 8000
# How often the serving loop checks that dynalite still answers.
_LIVENESS_SECONDS = 2.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devkit.local",
        description="Start a local DynamoDB-compatible server with the stack's table, print the "
        "environment to export, and serve until Ctrl-C.",
    )
    parser.add_argument(
        "--table", default=DEFAULT_TABLE, help=f"table name (default {DEFAULT_TABLE})"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"loopback port (default {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument("--empty", action="store_true", help="create the table but seed no rows")
    parser.add_argument(
        "--raw-engine",
        action="store_true",
        help="dynalite alone: no semantics proxy, so no transactions, no transaction conflicts "
        "and no per-key ceilings",
    )
    args = parser.parse_args(argv)
    try:
        validate_table_name(args.table)
    except InvalidInputError as err:
        parser.error(str(err))
    if not 0 <= args.port <= 65535:
        parser.error(f"--port {args.port} is not a port number (0..65535)")
    return args


def exports(table: str, endpoint_url: str) -> list[str]:
    """The shell lines that point `saga-index` (and boto3) at the local table, nothing else:
    dummy credentials, a fixed region, no profile and no global endpoint (which would send
    CloudWatch, Step Functions and STS to the local server too)."""
    values = {
        "SAGA_TABLE_NAME": table,
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint_url,
        **LOCAL_ENVIRONMENT,
    }
    lines = [f"export {name}={shlex.quote(value)}" for name, value in values.items()]
    unset = [name for name in UNSET_ENVIRONMENT if name != "AWS_ENDPOINT_URL_DYNAMODB"]
    lines.append("unset " + " ".join(unset))
    return lines


def _say(message: str) -> None:
    print(f"local: {message}", file=sys.stderr, flush=True)


def _prepare(table: str, endpoint_url: str, *, empty: bool) -> str:
    """Create and (unless empty) seed the table; what was written, in words."""
    client = make_client(region=LOCAL_ENVIRONMENT["AWS_REGION"], endpoint_url=endpoint_url)
    create_table(client, table, load_template())
    if empty:
        return f"table {table} created from the synthesised template, empty"
    dataset = build_dataset()
    seeded = seed_table(client, table, dataset)
    return (
        f"table {table} created from the synthesised template and seeded with the demo's "
        f"legacy dataset: {seeded.saga_rows} saga rows ({len(dataset.open_sagas)} open, "
        f"{len(dataset.anomalies)} without personId) over {len(dataset.persons)} persons, "
        f"{seeded.other_rows} rows of other entity types"
    )


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _port_taken(port: int) -> str:
    return (
        f"failed: port {port} is taken (something listens on "
        f"127.0.0.1:{port}, perhaps a `make local` already serving in "
        "another shell: its exports are printed there). Nothing was started here "
        "and that server is left as it is; for a second one pass --port 0 "
        '(`make local LOCAL_ARGS="--port 0"`) for any free port'
    )


def serve(
    argv: Sequence[str] | None = None,
    *,
    server_factory: Callable[..., DynaliteServer] = DynaliteServer,
) -> int:
    args = parse_args(argv)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        _say(f"{signal.Signals(signum).name} received: stopping the server")
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    server = Engine(port=args.port, raw=args.raw_engine, server_factory=server_factory)
    started = False
    try:
        with local_credentials():
            # Synthesise (when stale) before the server starts: it can take a minute.
            load_template()
            if args.port and _answers(args.port):
                _say(_port_taken(args.port))
                return EXIT_FAILED
            where = f"127.0.0.1:{args.port}" if args.port else "a free port on 127.0.0.1"
            proxy = "" if args.raw_engine else " and the semantics proxy"
            _say(f"starting dynalite{proxy} ({where})")
            started = True
            try:
                server.start()
            except PortInUseError:
                # Taken between the check above and the start.
                _say(_port_taken(args.port))
                return EXIT_FAILED
            _say(f"serving: {server.describe()}")
            _say(_prepare(args.table, server.endpoint_url, empty=args.empty))
        print("\n".join(exports(args.table, server.endpoint_url)), flush=True)
        _say(
            "serving; export the lines above in another shell (or eval them) and follow "
            "docs/runbook.md, 'Rehearse it locally'. Ctrl-C stops the server; its data is lost"
        )
        while not stop.wait(_LIVENESS_SECONDS):
            if not server.alive() or not _answers(server.port):
                _say("the engine exited on its own: nothing is serving any more")
                return EXIT_FAILED
        return EXIT_OK
    except (SchemaError, RuntimeError, ClientError, BotoCoreError, OSError) as err:
        _say(f"failed: {type(err).__name__}: {err}")
        return EXIT_FAILED
    finally:
        if started:
            server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if started:
            _say("the server is stopped, nothing is left running")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return serve(argv)
    except SystemExit as exit_:  # argparse: bad arguments are exit 2
        return int(exit_.code) if isinstance(exit_.code, int) else EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
