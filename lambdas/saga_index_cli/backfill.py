"""`saga-index backfill`: move saga rows between the control record's layouts, rate-capped, one
run at a time; and `backfill throttle|pause|resume`, which change a running backfill.

Where rows move is the record's (docs/control-contract.md): forward while it says `migrating`
(legacy -> sharded(N)) or `sharded` (rows repaired later), rollback while it says `rolling-back`
(sharded(N) -> legacy). `--direction` only says which the operator expects; it must agree.

Locally (the default) the same worker code as the deployed Lambda runs here, one thread per
segment, with a progress bar on stderr: this process takes the record's lease (holder
user@host/pid), heartbeats it every few seconds (which also applies the record's throttle and
pause), and releases it with the run's completion, which `phase set` checks. With --deployed
(the state machine named by the stack's outputs) or --state-machine-arn the deployed state
machine runs it (its plan step takes the lease for the execution) and this command follows the
execution to its end; --follow attaches to an execution already running, --stop stops one and
releases its lease (saga_index_cli.backfill_follow). A dry run ends with its estimate of the real
run (saga_index_cli.backfill_estimate); an exit 1 with the advice for its cause
(saga_index_cli.backfill_advice). The cutover sequence around it is in docs/runbook.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError
from click.core import ParameterSource
from pydantic import ValidationError
from rich.console import Console

from saga_index.index.errors import InvalidInputError
from saga_index.index.names import INDEX_NAME, MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.backfill.leasing import CONTROL_POLL_SECONDS
from saga_index.layout_change.backfill.local import LocalBackfill, backfill_locally
from saga_index.layout_change.backfill.messages import (
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    BackfillRequest,
    RunTicket,
)
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.readback import count_source_rows
from saga_index.layout_change.record.state import BackfillDirection, ControlState
from saga_index.layout_change.record.timing import ControlTiming
from saga_index_cli.backfill_advice import (
    LEASE_LOST_ADVICE,
    as_refusal,
    local_failure_advice,
    refusals_explained,
)
from saga_index_cli.backfill_control import pause_command, resume_command, throttle_command
from saga_index_cli.backfill_estimate import estimate_dry_run, print_report
from saga_index_cli.backfill_follow import (
    EXECUTION_ARN,
    STATE_MACHINE_ARN,
    follow_execution,
    run_state_machine,
    running_execution,
    state_machine_of,
    stop_command,
)
from saga_index_cli.backfill_output import (
    EXIT_FAILED,
    RunProgress,
    exit_code,
    stop_on_signals,
)
from saga_index_cli.context import (
    CliContext,
    FiniteFloatRange,
    json_option,
    local_identity,
    service_endpoint_option,
)
from saga_index_cli.stack import (
    StackLookupError,
    read_outputs,
    stack_name_option,
    state_machine_arn_from_outputs,
)

log = logging.getLogger("saga_index.cli.backfill")

# `--follow` / `--stop` given without a value: the state machine's one running execution.
THE_RUNNING_EXECUTION = "<the running execution>"


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
    with refusals_explained():
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
    started: list[bool] = []

    def on_start(ticket: RunTicket, state: ControlState) -> None:
        started.append(True)
        _announce(ticket, state, request)

    try:
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
            on_start=on_start,
            on_progress=progress.show_totals,
            while_running=_while_running(stop, progress),
        )
    except Exception as err:
        # Refused while taking the run (the lease, effectiveAt, the record): nothing written.
        refused = None if started else as_refusal(err)
        if refused is None:
            raise
        raise refused from err
    return _finish_local(cli, outcome, as_json, output)


def _finish_local(
    cli: CliContext, outcome: LocalBackfill, as_json: bool, output: Path | None
) -> int:
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
    estimate = estimate_dry_run(cli, summary) if summary.complete else None
    print_report(summary, extra, as_json, output, estimate)
    lost = outcome.lease_lost is not None
    code = exit_code(summary, failed=bool(run.failures) or run.interrupted or lost)
    if lost:
        click.echo(
            f"saga-index: the backfill lost its lease and stopped: {outcome.lease_lost}; "
            f"{LEASE_LOST_ADVICE}",
            err=True,
        )
    elif code == EXIT_FAILED:
        failures = "; ".join(f"segment {n}: {why}" for n, why in sorted(run.failures.items()))
        verification = summary.verification
        click.echo(
            "saga-index: backfill did not finish cleanly"
            + (f" ({failures})" if failures else "")
            + ("; interrupted" if run.interrupted else "")
            + (
                f"; verification FAILED: {verification.message}"
                if verification is not None and not verification.ok
                else ""
            )
            + f"; {local_failure_advice(run.failures, run.interrupted)}",
            err=True,
        )
    return code


def _state_machine_arn(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and not STATE_MACHINE_ARN.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a state machine ARN "
            "(arn:aws:states:<region>:<account>:stateMachine:<name>)"
        )
    return value


def _execution_arn(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is None or value == THE_RUNNING_EXECUTION or EXECUTION_ARN.fullmatch(value):
        return value
    raise click.BadParameter(
        f"{value!r} is not an execution ARN "
        "(arn:aws:states:<region>:<account>:execution:<state machine>:<name>); give none to "
        "take the state machine's one running execution"
    )


def _output_path(_: click.Context, __: click.Parameter, value: str | None) -> Path | None:
    return None if value is None else Path(value)


# The options that shape a run this command would start: meaningless with --follow or --stop.
_RUN_OPTIONS = {
    "direction": "--direction",
    "segments": "--segments",
    "max_writes_per_second": "--max-writes-per-second",
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


def _check_modes(
    ctx: click.Context,
    *,
    follow: str | None,
    stop: str | None,
    state_machine_arn: str | None,
    deployed: bool,
    output: Path | None,
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
    if stop is not None and output is not None:
        raise click.UsageError(
            "--output writes a run's report; --stop prints what it did (--json for JSON)", ctx=ctx
        )
    if mode is None and state_machine_arn is None and not deployed:
        deployed_only = _given(ctx, _DEPLOYED_OPTIONS)
        if deployed_only:
            raise click.UsageError(
                f"{', '.join(deployed_only)} only apply to a run in Step Functions: add "
                "--deployed (or --state-machine-arn), --follow or --stop",
                ctx=ctx,
            )


def _resolve_state_machine(cli: CliContext, state_machine_arn: str | None, stack_name: str) -> str:
    """--state-machine-arn, else the stack's output BackfillStateMachineArn...."""
    if state_machine_arn is not None:
        return state_machine_arn
    outputs = read_outputs(cli.aws_client("cloudformation"), stack_name)
    arn = state_machine_arn_from_outputs(outputs, stack_name)
    if not STATE_MACHINE_ARN.fullmatch(arn):
        raise StackLookupError(
            f"stack {stack_name!r} names {arn!r} as its backfill state machine, which is not a "
            "state machine ARN: pass --state-machine-arn"
        )
    log.info("backfill state machine (stack %s): %s", stack_name, arn)
    return arn


def _execution(
    cli: CliContext,
    sfn: Any,
    given: str,
    state_machine_arn: str | None,
    stack_name: str,
) -> str:
    """The execution --follow/--stop names, or the state machine's one running execution."""
    if given != THE_RUNNING_EXECUTION:
        if state_machine_arn is not None and state_machine_of(given) != state_machine_arn:
            raise InvalidInputError(
                f"execution {given} is not one of --state-machine-arn {state_machine_arn}"
            )
        return given
    machine = _resolve_state_machine(cli, state_machine_arn, stack_name)
    return running_execution(sfn, machine)


@click.group("backfill", invoke_without_command=True)
@click.option(
    "--direction",
    type=click.Choice([d.value for d in BackfillDirection], case_sensitive=False),
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
@click.option(
    "--dry-run",
    is_flag=True,
    help="Scan and count what would move; write nothing. Estimates the real run: its time at "
    "--max-writes-per-second and the WCU it takes from the legacy key (JSON: `estimate`).",
)
@json_option
@click.option(
    "--output",
    metavar="FILE",
    callback=_output_path,
    help="Also write the JSON report to FILE (whatever the exit code): branch on the exit "
    "code, read the report from the file.",
)
@click.option(
    "--deployed",
    is_flag=True,
    help="Run it in the deployed state machine (found from the stack's outputs, see "
    "--stack-name) and follow it to its end, instead of running here.",
)
@click.option(
    "--state-machine-arn",
    callback=_state_machine_arn,
    help="The deployed backfill state machine, instead of looking it up in the stack: start "
    "it and follow it to its end (or, with --follow/--stop, find its running execution). "
    "--table must name the deployed table (its record is checked first).",
)
@click.option(
    "--follow",
    is_flag=False,
    flag_value=THE_RUNNING_EXECUTION,
    default=None,
    metavar="[EXECUTION_ARN]",
    callback=_execution_arn,
    help="Attach to an execution of the state machine (without a value: its one running "
    "execution) and follow it to its end, with the exit codes of a run. Ctrl-C detaches; the "
    "execution goes on.",
)
@click.option(
    "--stop",
    is_flag=False,
    flag_value=THE_RUNNING_EXECUTION,
    default=None,
    metavar="[EXECUTION_ARN]",
    callback=_execution_arn,
    help="Stop an execution of the state machine (without a value: its one running "
    "execution) and release the backfill lease it holds. Exit 0 when done.",
)
@stack_name_option(
    "The deployed stack whose outputs name the state machine (--deployed, --follow, "
    "--stop without --state-machine-arn; needs cloudformation:DescribeStacks)."
)
@service_endpoint_option("stepfunctions", "SFN", "Step Functions")
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
    deployed: bool,
    state_machine_arn: str | None,
    follow: str | None,
    stop: str | None,
    stack_name: str,
    stepfunctions_endpoint_url: str | None,
    poll_interval: float,
) -> None:
    """Re-stamp GSI4PK of every saga row the control record says must move (rate-capped,
    resumable, one run at a time). Without a subcommand: run it, here (the default) or in the
    deployed state machine (--deployed or --state-machine-arn); or follow (--follow) or stop
    (--stop) a run in the state machine.

    \b
    Exit codes of a run, and of --follow when the execution ends:
      0  complete and clean (verified: nothing with a usable personId left to move), and the
         completion recorded in the control record (what `phase set` checks)
      3  complete, but anomaly rows (unusable personId) remain on their key: listed, each
         with its reason
      1  failed, interrupted, not verified, or lost its lease; or refused before anything
         ran: the state is younger than its effectiveAt, another run holds a live lease, or
         the record is missing or unreadable. The message says what to do for its cause.
         --follow/--stop: no execution running, or several (listed: pass one)
      2  bad usage or input, a --direction the record disagrees with, or a global
         --phase/--shards the record does not hold

    A dry run takes no lease and writes nothing, but its --direction must still agree with the
    record. Ctrl-C or SIGTERM stops after the in-flight writes and releases the lease (a run
    this command started in Step Functions is stopped; --follow only detaches). The cutover
    and rollback sequences are in docs/runbook.md.
    """
    if ctx.invoked_subcommand is not None:
        return
    cli = ctx.find_object(CliContext)
    assert cli is not None
    _check_modes(
        ctx,
        follow=follow,
        stop=stop,
        state_machine_arn=state_machine_arn,
        deployed=deployed,
        output=output,
    )
    if follow is not None or stop is not None:
        sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
        if stop is not None:
            execution = _execution(cli, sfn, stop, state_machine_arn, stack_name)
            sys.exit(stop_command(cli, sfn, execution, as_json))
        assert follow is not None
        execution = _execution(cli, sfn, follow, state_machine_arn, stack_name)
        sys.exit(follow_execution(cli, sfn, execution, as_json, output, poll_interval))
    request = _request(direction, segments, max_writes_per_second, dry_run)
    if state_machine_arn is not None or deployed:
        sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
        machine = _resolve_state_machine(cli, state_machine_arn, stack_name)
        code = run_state_machine(cli, sfn, request, machine, as_json, output, poll_interval)
    else:
        code = _run_locally(cli, request, as_json, output)
    sys.exit(code)


backfill_group.add_command(throttle_command)
backfill_group.add_command(pause_command)
backfill_group.add_command(resume_command)
