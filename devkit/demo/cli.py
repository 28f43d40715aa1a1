"""`python -m devkit.demo`: the command line, the exit codes and the local server's lifecycle.

Progress and logs go to stderr; only the report goes to stdout. Exit codes: 0 done; 1 a step
failed (the message names it); 2 bad arguments; 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console

from devkit.demo.config import DEFAULT_RESULTS, DEFAULT_TABLE, DemoConfig
from devkit.demo.operator import OperatorCommandError
from devkit.demo.pipeline import run_demo
from devkit.demo.report import render
from devkit.demo.steps import DemoError
from devkit.demo.ui import Stages, StepLog
from devkit.dynalite import REPO_ROOT, DynaliteServer
from devkit.engine import Engine, PortInUseError
from devkit.local_env import local_credentials
from devkit.schema import TEMPLATE_PATH, SchemaError, is_stale, load_template, synth_warnings
from devkit.seed import SeedSpec
from devkit.traffic.mix import SweepSpec, TrafficMix
from devkit.traffic.replay import ReplayError
from saga_index.index import DEFAULT_SHARD_COUNT, SWEEP_NAMES, InvalidInputError, SagaIndexError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# The numbered steps of run_demo (devkit.demo.pipeline).
STAGES = 15


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _interval(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH seconds, got {text!r}") from None
    return low, high


def parse_args(argv: Sequence[str] | None) -> DemoConfig:
    seed, mix = SeedSpec(), TrafficMix()
    parser = argparse.ArgumentParser(
        prog="python -m devkit.demo",
        description=(
            "Show the hot key of the renewal-saga index before and after sharding, then a "
            "live re-shard N -> 2N."
        ),
        epilog="Defaults are documented in docs/demo.md.",
    )
    add = parser.add_argument
    add(
        "--shards",
        type=int,
        default=DEFAULT_SHARD_COUNT,
        help="shard count N (a power of two up to 512: the last act re-shards to 2N)",
    )
    add("--duration", type=_positive_int, default=mix.duration_s, help="virtual seconds per replay")
    add("--open-sagas", type=int, default=seed.open_sagas)
    add("--terminal-sagas", type=int, default=seed.terminal_sagas)
    add("--persons", type=int, default=seed.persons)
    add("--anomalies", type=int, default=seed.anomalies, help="saga rows without personId")
    add("--property-managers", type=_positive_int, default=seed.property_managers)
    add("--seed", type=int, default=seed.seed, help="random seed of dataset and traffic")
    add("--poll-interval", type=_interval, default=mix.poll_interval_s, help="LOW,HIGH seconds")
    add("--sweep-period", type=_positive_int, default=60, help="seconds between sweep runs")
    add("--sweep-stagger", type=int, default=0, help="offset between the four sweeps, seconds")
    add("--transitions-per-second", type=_non_negative_float, default=mix.transitions_per_s)
    add("--cohort-size", type=int, default=mix.cohort_size)
    add("--cohort-period", type=_positive_int, default=mix.cohort_period_s)
    add("--inbound-per-second", type=_non_negative_float, default=mix.inbound_messages_per_s)
    add("--reads-per-message", type=int, default=mix.reads_per_message)
    add("--backfill-rate", type=float, default=100.0, help="backfill writes/s cap (total)")
    add("--backfill-segments", type=_positive_int, default=4)
    add("--verify-sample", type=_positive_int, default=50, help="persons in by-person parity")
    add("--workers", type=_positive_int, default=8, help="concurrent events per tick")
    add("--results-dir", type=Path, default=DEFAULT_RESULTS)
    add("--table", default=DEFAULT_TABLE)
    add("--no-chart", action="store_true", help="skip the PNG chart")
    add(
        "--raw-engine",
        action="store_true",
        help="dynalite alone, without the semantics proxy: no transactions (the backfill's "
        "clock fence only), no transaction conflicts, no per-key ceilings",
    )
    add("--port", type=int, default=0, help="the engine's loopback port (default 0: any free)")
    args = parser.parse_args(argv)
    sweeps = tuple(
        SweepSpec(name, period_s=args.sweep_period, offset_s=n * args.sweep_stagger)
        for n, name in enumerate(SWEEP_NAMES)
    )
    return DemoConfig(
        shards=args.shards,
        seed=SeedSpec(
            open_sagas=args.open_sagas,
            terminal_sagas=args.terminal_sagas,
            persons=args.persons,
            anomalies=args.anomalies,
            property_managers=args.property_managers,
            seed=args.seed,
        ),
        traffic=TrafficMix(
            duration_s=args.duration,
            property_managers=args.property_managers,
            poll_interval_s=args.poll_interval,
            sweeps=sweeps,
            transitions_per_s=args.transitions_per_second,
            cohort_size=args.cohort_size,
            cohort_period_s=args.cohort_period,
            inbound_messages_per_s=args.inbound_per_second,
            reads_per_message=args.reads_per_message,
            seed=args.seed,
        ),
        backfill_rate=args.backfill_rate,
        backfill_segments=args.backfill_segments,
        verify_sample=args.verify_sample,
        workers=args.workers,
        table_name=args.table,
        results_dir=args.results_dir,
        chart=not args.no_chart,
        raw_engine=args.raw_engine,
        port=args.port,
    )


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _configure_logging() -> None:
    # basicConfig leaves an already configured root logger (a test runner's) alone.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def _synth_notes(console: Console) -> None:
    """Synthesis's warnings, once each: they are for a deployment (a pager, tracing), not for
    the demo, which runs the table alone."""
    notes = synth_warnings()
    console.print(
        f"the stack's template: {TEMPLATE_PATH.relative_to(REPO_ROOT)}"
        + ("; synthesis noted, for a deployment (not the demo):" if notes else "")
    )
    for note in notes:
        console.print(f"      {note}", markup=False)


def main(
    argv: Sequence[str] | None = None,
    *,
    server_factory: Callable[..., DynaliteServer] = DynaliteServer,
) -> int:
    try:
        config = parse_args(argv).validate()
    except (InvalidInputError, ValueError) as err:
        print(f"demo: invalid arguments: {err}", file=sys.stderr)
        return EXIT_USAGE
    _configure_logging()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    log = StepLog()
    stages = Stages(total=STAGES, console=console, log=log)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    engine = Engine(port=config.port, raw=config.raw_engine, server_factory=server_factory)
    started = time.monotonic()
    report: dict[str, Any] | None = None
    failure = ""
    try:
        with local_credentials():
            if is_stale(TEMPLATE_PATH):
                console.print("synthesising the stack (cdk.out is missing or stale)")
            template = load_template()
            _synth_notes(console)
            console.print(f"starting the local engine: {config.engine}")
            engine.start()
            console.print(f"      {engine.describe()}")
            report = run_demo(
                config, engine.endpoint_url, template, stages, engine_stats=engine.stats
            )
    except KeyboardInterrupt:
        failure = "interrupted"
    except PortInUseError as err:
        failure = f"failed: {err}"
    except (
        DemoError,
        OperatorCommandError,
        ReplayError,
        SchemaError,
        SagaIndexError,
        ClientError,
        BotoCoreError,
    ) as err:
        failure = f"failed: {type(err).__name__}: {err}"
    finally:
        stages.flush()
        log.restore()
        engine.stop()
        signal.signal(signal.SIGTERM, previous)
    if report is None:
        console.print(f"demo: {failure}; the local server is stopped, nothing is left running")
        return EXIT_INTERRUPTED if failure == "interrupted" else EXIT_FAILED
    console.print(f"done in {time.monotonic() - started:.0f} s; the local server is stopped")
    sys.stdout.write(render(report))
    sys.stdout.flush()
    return EXIT_OK
