"""`saga-index backfill`: move saga rows between the control record's layouts, rate-capped, one
run at a time; and `backfill throttle|pause|resume`, which change a running backfill.

Where rows move is the record's (docs/control-contract.md): forward while it says `migrating`
(legacy -> sharded(N)) or `sharded` (rows repaired later), rollback while it says `rolling-back`
(sharded(N) -> legacy). `--direction` only says which the operator expects; it must agree.

Locally (the default) the same worker code as the deployed Lambda runs here, one thread per
segment, with a progress bar on stderr: this process takes the record's lease (holder
user@host/pid), heartbeats it every few seconds (which also applies the record's throttle and
pause), and releases it with the run's completion, which `phase set` checks. With
--state-machine-arn the deployed state machine runs it (its plan step takes the lease for the
execution) and this command follows the execution to its end. The cutover sequence around it
is in docs/runbook.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError
from rich.console import Console

from saga_index.backfill.leasing import CONTROL_POLL_SECONDS
from saga_index.backfill.local import LocalBackfill, backfill_locally
from saga_index.backfill.messages import (
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    BackfillRequest,
    RunTicket,
)
from saga_index.backfill.move import Move
from saga_index.backfill.readback import count_source_rows
from saga_index.control.state import BackfillDirection, ControlState
from saga_index.control.timing import ControlTiming
from saga_index.errors import InvalidInputError
from saga_index.names import (
    INDEX_NAME,
    MAX_WRITES_PER_SECOND,
    MIN_WRITES_PER_SECOND,
)
from saga_index_cli.backfill_control import pause_command, resume_command, throttle_command
from saga_index_cli.backfill_follow import run_state_machine
from saga_index_cli.backfill_output import (
    EXIT_FAILED,
    RunProgress,
    exit_code,
    print_summary,
    stop_on_signals,
)
from saga_index_cli.context import (
    CliContext,
    FiniteFloatRange,
    local_identity,
)

log = logging.getLogger("saga_index.cli.backfill")

_STATE_MACHINE_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}"
)


def _request(
    direction: str, segments: int, max_writes_per_second: float, dry_run: bool
) -> BackfillRequest:
    try:
        return BackfillRequest(
            direction=BackfillDirection(direction),
            total_segments=segments,
            max_writes_per_second=float(max_writes_per_second),
            dry_run=dry_run,
        )
    except ValidationError as err:
        raise InvalidInputError(str(err)) from None


def control_poll_seconds(timing: ControlTiming) -> float:
    """How often a local run heartbeats (and re-reads the throttle and pause): every few seconds,
    and at least as often as T, so a demo or test with a small T sees changes as fast."""
    return max(0.01, min(CONTROL_POLL_SECONDS, timing.cache_seconds))


def local_holder() -> str:
    """The lease holder of a run in this process: user@host/pid."""
    return f"{local_identity()}/{os.getpid()}"


# ---- local run --------------------------------------------------------------------------------


@contextlib.contextmanager
def _while_running(stop: threading.Event, progress: RunProgress) -> Iterator[None]:
    with stop_on_signals(stop.set), progress:
        yield


def _announce(ticket: RunTicket, state: ControlState, request: BackfillRequest) -> None:
    move = ticket.move()
    log.info(
        "backfill %s%s under version %d (phase %s): %d segment(s), at most %.1f writes/s",
        move.describe(),
        " (dry run, no lease)" if request.dry_run else f", lease held by {ticket.holder}",
        state.version,
        state.phase.value,
        request.total_segments,
        request.max_writes_per_second,
    )
    if request.dry_run:
        return
    record_rate = state.backfill_max_writes_per_second
    if record_rate is not None and record_rate != request.max_writes_per_second:
        log.warning(
            "the record's runtime throttle caps this run at %.1f writes/s, not "
            "--max-writes-per-second %.1f (change it with `saga-index backfill throttle`)",
            record_rate,
            request.max_writes_per_second,
        )
    if state.backfill_paused:
        log.warning(
            "the backfill is PAUSED in the record: nothing is written until "
            "`saga-index backfill resume`"
        )


def _run_locally(
    cli: CliContext, request: BackfillRequest, as_json: bool, output: Path | None
) -> int:
    table = cli.require_table()
    state = cli.read_state()
    cli.require_overrides_agree(state)
    # Refuse a direction the record's writers would undo before reading anything else.
    move = Move.for_state(state, request.direction)
    client = cli.client
    stop = threading.Event()
    total: int | None = None
    if Console(stderr=True).is_terminal:
        # Only for the bar's ETA: a COUNT of the source partition(s) through the index.
        try:
            total = count_source_rows(client, table, index_name=INDEX_NAME, move=move)
        except (ClientError, BotoCoreError) as err:
            log.warning("could not count the rows to move (no ETA): %s", err)
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''}"
    progress = RunProgress(label=label, total=total, unit="rows")
    outcome = backfill_locally(
        client,
        table,
        request,
        holder=local_holder(),
        store=cli.control_store(),
        clock=cli.hooks.clock,
        poll_seconds=control_poll_seconds(cli.hooks.timing),
        index_name=INDEX_NAME,
        stop=stop,
        on_start=lambda ticket, started: _announce(ticket, started, request),
        on_progress=progress.show_totals,
        while_running=_while_running(stop, progress),
    )
    return _finish_local(outcome, as_json, output)


def _finish_local(outcome: LocalBackfill, as_json: bool, output: Path | None) -> int:
    run, summary, ticket = outcome.run, outcome.summary, outcome.ticket
    extra: dict[str, Any] = {
        "failures": {str(k): v for k, v in run.failures.items()},
        "holder": ticket.holder,
        "stateVersion": ticket.state_version,
        "startedAt": ticket.started_at,
        "completionRecorded": outcome.completion is not None,
    }
    if run.interrupted:
        extra["interrupted"] = True
    if outcome.lease_lost is not None:
        extra["leaseLost"] = outcome.lease_lost
    if len(outcome.applied_caps) > 1:
        extra["appliedMaxWritesPerSecond"] = outcome.applied_caps
    print_summary(summary, extra, as_json, output)
    lost = outcome.lease_lost is not None
    code = exit_code(summary, failed=bool(run.failures) or run.interrupted or lost)
    if lost:
        click.echo(
            f"saga-index: the backfill lost its lease and stopped: {outcome.lease_lost}. Nothing "
            "is half-written and no completion was recorded; check `saga-index status`, then "
            "run the backfill again if the record still calls for it",
            err=True,
        )
    elif code == EXIT_FAILED:
        click.echo(
            "saga-index: backfill did not finish cleanly"
            + (f" (failed segments: {sorted(run.failures)})" if run.failures else "")
            + ("; interrupted" if run.interrupted else "")
            + "; nothing is half-written: run the same command again, it converges",
            err=True,
        )
    return code


def _state_machine_arn(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _STATE_MACHINE_ARN.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a state machine ARN "
            "(arn:aws:states:<region>:<account>:stateMachine:<name>)"
        )
    return value


def _output_path(_: click.Context, __: click.Parameter, value: str | None) -> Path | None:
    return None if value is None else Path(value)


_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print the result as one JSON object on stdout."
)


@click.group("backfill", invoke_without_command=True)
@click.option(
    "--direction",
    type=click.Choice([d.value for d in BackfillDirection]),
    default=BackfillDirection.FORWARD.value,
    show_default=True,
    help="Must agree with the control record: forward while it says migrating (legacy -> "
    "sharded(N)) or sharded (rows repaired later); rollback while it says rolling-back "
    "(sharded(N) -> legacy). The layouts are the record's, never a flag's.",
)
@click.option(
    "--segments",
    type=click.IntRange(1, MAX_TOTAL_SEGMENTS),
    default=DEFAULT_TOTAL_SEGMENTS,
    show_default=True,
    help="Parallel Scan segments (threads here, Map iterations in Step Functions).",
)
@click.option(
    "--max-writes-per-second",
    type=FiniteFloatRange(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
    default=DEFAULT_MAX_WRITES_PER_SECOND,
    show_default=True,
    help="Cap on re-stamps per second over ALL segments. Each one writes to a hot index "
    "partition (1,000 WCU/s at most, shared with production traffic). A runtime throttle in "
    "the record (`backfill throttle`) replaces it.",
)
@click.option("--dry-run", is_flag=True, help="Scan and count what would move; write nothing.")
@_json_option
@click.option(
    "--output",
    metavar="FILE",
    callback=_output_path,
    help="Also write the JSON report to FILE (whatever the exit code): branch on the exit "
    "code, read the report from the file.",
)
@click.option(
    "--state-machine-arn",
    callback=_state_machine_arn,
    help="Start the deployed backfill state machine and follow it to its end, instead of "
    "running here. --table must name the deployed table (its record is checked first).",
)
@click.option("--poll-interval", type=click.FloatRange(0.01, 60), default=2.0, hidden=True)
@click.pass_context
def backfill_group(
    ctx: click.Context,
    direction: str,
    segments: int,
    max_writes_per_second: float,
    dry_run: bool,
    as_json: bool,
    output: Path | None,
    state_machine_arn: str | None,
    poll_interval: float,
) -> None:
    """Re-stamp GSI4PK of every saga row the control record says must move (rate-capped,
    resumable, one run at a time). Without a subcommand: run it.

    \b
    Exit codes of a run:
      0  complete and clean (verified: nothing with a usable personId left to move), and the
         completion recorded in the control record (what `phase set` checks)
      3  complete, but anomaly rows (unusable personId) remain on their key: listed
      1  failed, interrupted, not verified, or lost its lease: run the same command again, it
         converges. Also refused before anything runs: the state is younger than its
         effectiveAt (wait the seconds named), another run holds a live lease (named, with
         its expiry), or the record is missing or unreadable
      2  bad usage or input, a --direction the record disagrees with, or a global
         --phase/--shards the record does not hold

    A dry run takes no lease and writes nothing, but its --direction must still agree with the
    record. Ctrl-C or SIGTERM stops after the in-flight writes and releases the lease. The
    cutover and rollback sequences are in docs/runbook.md.
    """
    if ctx.invoked_subcommand is not None:
        return
    cli = ctx.find_object(CliContext)
    assert cli is not None
    request = _request(direction, segments, max_writes_per_second, dry_run)
    if state_machine_arn:
        code = run_state_machine(cli, request, state_machine_arn, as_json, output, poll_interval)
    else:
        code = _run_locally(cli, request, as_json, output)
    sys.exit(code)


backfill_group.add_command(throttle_command)
backfill_group.add_command(pause_command)
backfill_group.add_command(resume_command)
