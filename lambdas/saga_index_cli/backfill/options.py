"""The options of `saga-index backfill` (one decorator, `backfill_options`), and which
combinations of them cannot mean one thing (exit 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from saga_index.index import MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.backfill import (
    DEFAULT_FLOOR_FRACTION,
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
)
from saga_index.layout_change.record import BackfillDirection
from saga_index_cli.backfill.executions import (
    EXECUTION_ARN,
    STATE_MACHINE_ARN,
    THE_RUNNING_EXECUTION,
)
from saga_index_cli.endpoints import service_endpoint_option
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.output import format_options, overwrite_option
from saga_index_cli.stack import stack_name_option


def state_machine_arn_argument(
    _: click.Context, __: click.Parameter, value: str | None
) -> str | None:
    """--state-machine-arn (of `backfill` and `open-index backfill`): an ARN, or exit 2."""
    if value is not None and not STATE_MACHINE_ARN.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a state machine ARN "
            "(arn:aws:states:<region>:<account>:stateMachine:<name>)"
        )
    return value


def execution_arn_argument(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    """--follow/--stop's execution ARN (of `backfill` and `open-index backfill`), the running
    execution without one, or exit 2."""
    if value is None or value == THE_RUNNING_EXECUTION or EXECUTION_ARN.fullmatch(value):
        return value
    raise click.BadParameter(
        f"{value!r} is not an execution ARN "
        "(arn:aws:states:<region>:<account>:execution:<state machine>:<name>); give none to "
        "take the state machine's one running execution"
    )


# The option that writes a run's report to a file (--output is the format of stdout).
REPORT_FILE = "--report-file"


def _output_path(_: click.Context, __: click.Parameter, value: str | None) -> Path | None:
    return None if value is None else Path(value)


# The options that shape a run this command would start: meaningless with --follow or --stop.
_RUN_OPTIONS = {
    "direction": "--direction",
    "segments": "--segments",
    "max_writes_per_second": "--max-writes-per-second",
    "pace_floor": "--pace-floor",
    "dry_run": "--dry-run",
    "deployed": "--deployed",
}
# The options that only apply when Step Functions is involved.
_DEPLOYED_OPTIONS = {
    "stack_name": "--stack-name",
    "stepfunctions_endpoint_url": "--stepfunctions-endpoint-url",
}


def _given(ctx: click.Context, names: dict[str, str]) -> list[str]:
    """The options of `names` given on the command line (not their defaults or environment)."""
    return [
        flag
        for name, flag in names.items()
        if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]


def check_modes(
    ctx: click.Context,
    *,
    follow: str | None,
    stop: str | None,
    state_machine_arn: str | None,
    deployed: bool,
    report_file: Path | None,
) -> None:
    """Exit 2 for combinations that cannot mean one thing."""
    if follow is not None and stop is not None:
        raise click.UsageError(
            "--follow and --stop cannot be combined: --follow attaches to an execution, "
            "--stop stops one",
            ctx=ctx,
        )
    mode = "--follow" if follow is not None else "--stop" if stop is not None else None
    if mode is not None:
        run_options = _given(ctx, _RUN_OPTIONS)
        if run_options:
            raise click.UsageError(
                f"{mode} acts on an execution that already exists and starts no run: drop "
                f"{', '.join(run_options)}",
                ctx=ctx,
            )
    if stop is not None and report_file is not None:
        raise click.UsageError(
            f"{REPORT_FILE} writes a run's report; --stop prints what it did (--output json "
            "for JSON): drop it",
            ctx=ctx,
        )
    if mode is None and state_machine_arn is None and not deployed:
        deployed_only = _given(ctx, _DEPLOYED_OPTIONS)
        if deployed_only:
            raise click.UsageError(
                f"{', '.join(deployed_only)} only apply to a run in Step Functions: add "
                "--deployed (or --state-machine-arn), --follow or --stop",
                ctx=ctx,
            )


# In the order `--help` lists them.
_OPTIONS: tuple[Callable[[Callable[..., Any]], Callable[..., Any]], ...] = (
    click.option(
        "--direction",
        type=click.Choice([d.value for d in BackfillDirection], case_sensitive=False),
        default=BackfillDirection.FORWARD.value,
        show_default=True,
        help="Must agree with the control record: forward while it says migrating (legacy -> "
        "sharded(N)) or sharded (rows repaired later, misrouted rows); rollback while it says "
        "rolling-back (sharded(N) -> legacy) or legacy after a migration (stray rows on any "
        "shard key -> legacy). The layouts are the record's, never a flag's.",
    ),
    click.option(
        "--segments",
        type=click.IntRange(1, MAX_TOTAL_SEGMENTS),
        default=DEFAULT_TOTAL_SEGMENTS,
        show_default=True,
        help="Parallel Scan segments (threads here, Map iterations in Step Functions).",
    ),
    click.option(
        "--max-writes-per-second",
        type=FiniteFloatRange(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
        default=DEFAULT_MAX_WRITES_PER_SECOND,
        show_default=True,
        help="Cap on re-stamps per second over ALL segments. Each one writes to a hot index "
        "partition (1,000 WCU/s at most, shared with production traffic). A runtime throttle in "
        "the record (`backfill throttle`) replaces it.",
    ),
    click.option(
        "--pace-floor",
        type=FiniteFloatRange(0.0, 1.0, min_open=True),
        default=DEFAULT_FLOOR_FRACTION,
        show_default=True,
        help="The least pace, as a fraction of the cap: the run paces itself on DynamoDB's "
        "throttling reasons (a hot key slows its segment, a table or index limit the run, an "
        "account or on-demand maximum pauses it) and never falls below this while it writes; "
        "it starts at 30 % of the cap (at least this) and rises to the cap within 10 s unless a "
        "throttle stops it. In (0, 1]; 1 starts at the cap and keeps it through throttles "
        "(botocore still retries; an account or on-demand maximum still pauses the run).",
    ),
    click.option(
        "--dry-run",
        is_flag=True,
        help="Scan and count what would move; write nothing. Estimates the real run: its time at "
        "--max-writes-per-second and the WCU it takes from the legacy key (JSON: `estimate`).",
    ),
    format_options(file_option=REPORT_FILE),
    click.option(
        REPORT_FILE,
        "report_file",
        metavar="PATH",
        callback=_output_path,
        help="Also write the JSON report to PATH (whatever the exit code; a run that ends "
        "before it started writes {refused, error, message, exitCode}): branch on the exit "
        "code, read the report from the file. An existing PATH is refused (exit 2) without "
        "--overwrite.",
    ),
    overwrite_option,
    click.option(
        "--deployed",
        is_flag=True,
        help="Run it in the deployed state machine (found from the stack's outputs, see "
        "--stack-name) and follow it to its end, instead of running here.",
    ),
    click.option(
        "--state-machine-arn",
        callback=state_machine_arn_argument,
        help="The deployed backfill state machine, instead of looking it up in the stack: start "
        "it and follow it to its end (or, with --follow/--stop, find its running execution). "
        "--table must name the deployed table (its record is checked first).",
    ),
    click.option(
        "--follow",
        is_flag=False,
        flag_value=THE_RUNNING_EXECUTION,
        default=None,
        metavar="[EXECUTION_ARN]",
        callback=execution_arn_argument,
        help="Attach to an execution of the state machine (without a value: its one running "
        "execution) and follow it to its end, with the exit codes of a run. Ctrl-C detaches; the "
        "execution goes on.",
    ),
    click.option(
        "--stop",
        is_flag=False,
        flag_value=THE_RUNNING_EXECUTION,
        default=None,
        metavar="[EXECUTION_ARN]",
        callback=execution_arn_argument,
        help="Stop an execution of the state machine (without a value: its one running "
        "execution) and release the backfill lease it holds. Without a value, when a local "
        "run holds the lease: release it once that run is provably gone (its process gone "
        "from this host, or no heartbeat for 60 s; exit 5 before); when no run holds it, "
        "say so (nothing to stop). Exit 0 when done.",
    ),
    stack_name_option(
        "The deployed stack whose outputs name the state machine (--deployed, --follow, "
        "--stop without --state-machine-arn; needs cloudformation:DescribeStacks)."
    ),
    service_endpoint_option("stepfunctions", "SFN", "Step Functions"),
    click.option("--poll-interval", type=click.FloatRange(0.01, 60), default=2.0, hidden=True),
)


def backfill_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Every option of `backfill`, as if each were stacked above `command` in `_OPTIONS`'s order."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command
