"""`saga-index open-index backfill`: the open-saga index's backfill, on the layout backfill's
machinery (the domain's layout_change/backfill, a request of kind `open-index`), run here or in
the deployed backfill state machine (--deployed, --state-machine-arn: deployed.py): the
record's one lease (recorded with its kind), the fence slots, the segments, the pacer under
the cap, the record's throttle and pause, the dry run and the verification. OpenSagaPK is
stamped on the open rows that predate `adding`, stale keys are cleared from closed rows, every
key is removed in `removing`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from saga_index.index import MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.backfill import (
    DEFAULT_FLOOR_FRACTION,
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_OPEN_STATE_MACHINE_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    BackfillRequest,
    BackfillSummary,
    LocalBackfill,
    OpenVerify,
    backfill_locally,
)
from saga_index.layout_change.lease import open_index_direction
from saga_index.layout_change.record import BackfillDirection, BackfillKind, ControlStore
from saga_index_cli.backfill.executions import (
    THE_RUNNING_EXECUTION,
    resolve_state_machine,
    target_execution,
)
from saga_index_cli.backfill.local import control_poll_seconds, local_holder
from saga_index_cli.backfill.options import (
    REPORT_FILE,
    execution_arn_argument,
    state_machine_arn_argument,
)
from saga_index_cli.backfill.output import stop_on_signals, write_report
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.endpoints import service_endpoint_option
from saga_index_cli.open_index.deployed import RunFacts, follow_deployed, start_deployed
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.output import check_output_file, emit, json_option, overwrite_option
from saga_index_cli.stack import stack_name_option


def local_facts(outcome: LocalBackfill) -> RunFacts:
    """What the report says of a local run besides its summary."""
    return RunFacts(
        open_shard_count=outcome.ticket.open_shard_count,
        state_version=outcome.ticket.state_version,
        holder=outcome.ticket.holder,
        lease_lost=outcome.lease_lost,
        failures={str(k): v for k, v in outcome.run.failures.items()},
        interrupted=outcome.run.interrupted,
    )


def open_report(summary: BackfillSummary, facts: RunFacts) -> dict[str, Any]:
    """The command's JSON report, wherever the run ran: the keys it had before it ran on the
    layout's machinery (direction stamp | remove, dryRun, scanned, stamped, removed, changed,
    anomalies, examples) and what the run adds (complete, verified, verification, segments,
    the lease's holder)."""
    opened = summary.open
    removed = 0 if opened is None else (opened.would_remove if summary.dry_run else opened.removed)
    writes = summary.would_restamp if summary.dry_run else summary.restamped
    verification = summary.verification
    return {
        "direction": "stamp" if summary.direction is BackfillDirection.FORWARD else "remove",
        "dryRun": summary.dry_run,
        "scanned": 0 if opened is None else opened.saga_rows,
        "scannedItems": summary.scanned,
        "stamped": writes - removed,
        "removed": removed,
        "changed": summary.skipped,
        "anomalies": summary.anomalies,
        "examples": []
        if opened is None
        else [f"{e['PK']}: {e['change']}" for e in opened.examples],
        "openShardCount": facts.open_shard_count,
        "stateVersion": facts.state_version,
        "holder": None if summary.dry_run else facts.holder,
        "segments": summary.total_segments,
        "maxWritesPerSecond": summary.max_writes_per_second,
        "appliedMaxWritesPerSecond": summary.applied_max_writes_per_second,
        "throttles": summary.throttles,
        "complete": summary.complete,
        "verified": summary.verified,
        "verification": None if verification is None else verification.message,
        "leaseLost": facts.lease_lost,
        "failures": dict(facts.failures or {}),
        "interrupted": facts.interrupted,
    }


@click.command("backfill")
@click.option(
    "--max-writes-per-second",
    "--rate",
    "max_writes_per_second",
    type=FiniteFloatRange(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
    default=DEFAULT_MAX_WRITES_PER_SECOND,
    show_default=True,
    help="Cap on writes per second over ALL segments (--rate is the same option). A runtime "
    "throttle in the record (`backfill throttle`) lowers it; `backfill pause` pauses the run.",
)
@click.option(
    "--segments",
    type=click.IntRange(1, MAX_TOTAL_SEGMENTS),
    default=DEFAULT_TOTAL_SEGMENTS,
    show_default=True,
    help="Parallel Scan segments (threads here, Map iterations in Step Functions: at most "
    f"{MAX_OPEN_STATE_MACHINE_SEGMENTS} there), each with its own fence slot.",
)
@click.option(
    "--pace-floor",
    type=FiniteFloatRange(0.0, 1.0, min_open=True),
    default=DEFAULT_FLOOR_FRACTION,
    show_default=True,
    help="The least pace, as a fraction of the cap, that the pacer falls to on throttling "
    "(as `saga-index backfill --pace-floor`).",
)
@click.option("--dry-run", is_flag=True, help="Count the writes it would make; write nothing.")
@click.option(
    "--scan-rate",
    type=click.FloatRange(min=1, max=40_000),
    default=1_000.0,
    show_default=True,
    help="Read units per second the verification's base-table Scan may use (the run's own "
    "Scan reads page by page at the pace of its writes).",
)
@click.option(
    REPORT_FILE,
    "report_file",
    metavar="PATH",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report to PATH (an existing PATH is refused, exit 2, without "
    "--overwrite).",
)
@overwrite_option
@json_option
@click.option(
    "--deployed",
    is_flag=True,
    help="Run it in the deployed backfill state machine (found from the stack's outputs, see "
    "--stack-name) and follow it to its end, instead of running here.",
)
@click.option(
    "--state-machine-arn",
    callback=state_machine_arn_argument,
    help="The deployed backfill state machine, instead of looking it up in the stack: start "
    "it and follow it to its end. --table must name the deployed table.",
)
@click.option(
    "--follow",
    is_flag=False,
    flag_value=THE_RUNNING_EXECUTION,
    default=None,
    metavar="[EXECUTION_ARN]",
    callback=execution_arn_argument,
    help="Attach to an execution of an open-index run (without a value: the state machine's "
    "one running execution) and follow it to its end, with the exit codes and report of a run. "
    "Ctrl-C detaches; the execution goes on (`saga-index backfill --stop` stops it).",
)
@stack_name_option(
    "The deployed stack whose outputs name the state machine (--deployed or --follow without "
    "--state-machine-arn; needs cloudformation:DescribeStacks)."
)
@service_endpoint_option("stepfunctions", "SFN", "Step Functions")
@click.option("--poll-interval", type=click.FloatRange(0.01, 60), default=2.0, hidden=True)
@pass_cli
def backfill_command(
    cli: CliContext,
    max_writes_per_second: float,
    segments: int,
    pace_floor: float,
    dry_run: bool,
    scan_rate: float,
    report_file: Path | None,
    overwrite: bool,
    as_json: bool,
    deployed: bool,
    state_machine_arn: str | None,
    follow: str | None,
    stack_name: str,
    stepfunctions_endpoint_url: str | None,
    poll_interval: float,
) -> None:
    """Stamp OpenSagaPK on every open saga that lacks its key (open index adding or open), or
    remove every stamp (removing), on the layout backfill's machinery: in this process, or in
    the deployed backfill state machine (--deployed or --state-machine-arn), followed to its
    end (Ctrl-C or SIGTERM stops the execution and releases its lease; --follow attaches to
    one already running, `saga-index backfill --stop` stops it).

    \b
    It takes the record's one backfill lease (kind open-index: a layout run and this one
    exclude each other), arms a fence slot per segment, and writes through it: a run that
    lost its lease (taken over, released, or the record moved to a new version) writes
    nothing more, however long it was paused. Each row that needs it gets ONE conditional
    UpdateItem: SET OpenSagaPK IF the row's state, personId and OpenSagaPK are still what the
    Scan read (a saga a writer closed meanwhile is never stamped again: counted as
    `changed`); REMOVE it from a closed row the same way; in removing, REMOVE every stamp.
    Writes are paced by the layout backfill's pacer under --max-writes-per-second and follow
    `saga-index backfill throttle|pause|resume`. It starts only after the state's
    effectiveAt plus the in-flight margin. After a complete run the table is compared with
    the open index (the check `open-index set open` / `set off` makes). To resume a stopped
    run, run it again: a row already right costs no write.

    \b
    --json: {direction: stamp | remove, dryRun, scanned (saga rows), scannedItems (every item
    read), stamped, removed, changed, anomalies, examples, openShardCount, stateVersion,
    holder, segments, maxWritesPerSecond, appliedMaxWritesPerSecond, throttles, complete,
    verified, verification, leaseLost, failures, interrupted, exitCode}; in Step Functions
    also executionArn and status (and error, cause when it did not succeed); the holder is
    the execution.

    Exit codes (both places): 0 done and verified (a dry run: done); 1 stopped (the lease
    lost, e.g. the open index moved during the run; a segment failed; Ctrl-C; the execution
    failed or was stopped) or not verified; 2 the open index is off, or bad input; 4 DynamoDB,
    Step Functions or CloudFormation unreachable; 5 not yet (before effectiveAt + the margin),
    or another backfill run holds the lease.
    """
    if report_file is not None:
        check_output_file(report_file, overwrite=overwrite, option=REPORT_FILE)
    elif overwrite:
        raise click.UsageError(f"--overwrite applies to {REPORT_FILE} PATH only")
    in_step_functions = deployed or state_machine_arn is not None or follow is not None
    _check_deployed_options(in_step_functions, segments, following=follow is not None)
    store = cli.control_store()
    state = store.read()
    if follow is not None:
        sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
        execution_arn = target_execution(cli, sfn, follow, state_machine_arn, stack_name)
        outcome = follow_deployed(cli, sfn, execution_arn, state, poll_interval)
        _finish(outcome, report_file, as_json)
        return
    # The direction is the open index's state's (refused while off: exit 2, nothing written).
    direction = open_index_direction(state)
    request = BackfillRequest(
        direction=direction,
        kind=BackfillKind.OPEN_INDEX,
        total_segments=segments,
        max_writes_per_second=max_writes_per_second,
        dry_run=dry_run,
        pace_floor=pace_floor,
        verify_read_units_per_second=scan_rate,
    )
    if in_step_functions:
        sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
        machine = resolve_state_machine(cli, state_machine_arn, stack_name)
        outcome = start_deployed(cli, sfn, machine, request, state, poll_interval)
        _finish(outcome, report_file, as_json)
        return
    report = _run_here(cli, store, request, scan_rate)
    _end(report, report["complete"], report_file, as_json)


def _finish(
    outcome: tuple[BackfillSummary, RunFacts, dict[str, Any]],
    report_file: Path | None,
    as_json: bool,
) -> None:
    """A run in Step Functions: its report, and exit 0 only when the execution succeeded."""
    summary, facts, execution = outcome
    report = {**open_report(summary, facts), **execution}
    _end(report, execution["status"] == "SUCCEEDED", report_file, as_json)


def _end(report: dict[str, Any], ended_well: bool, report_file: Path | None, as_json: bool) -> None:
    """Write the report where asked, print it, exit 0 (done and verified) or 1."""
    ok = ended_well and report["complete"] and report["verified"] and report["leaseLost"] is None
    report["exitCode"] = 0 if ok else 1
    if report_file is not None:
        write_report(report_file, report)
    if as_json:
        emit(report)
    else:
        _print(report)
    if not ok:
        raise SystemExit(1)


def _given(names: dict[str, str]) -> list[str]:
    """The options of `names` given on the command line (not their defaults)."""
    context = click.get_current_context()
    return [
        flag
        for name, flag in names.items()
        if context.get_parameter_source(name) is ParameterSource.COMMANDLINE
    ]


def _check_deployed_options(in_step_functions: bool, segments: int, *, following: bool) -> None:
    """Exit 2, before any call, for options that cannot mean one thing where the run runs."""
    run_options = _given(_RUN_OPTIONS) if following else []
    if run_options:
        raise click.UsageError(
            f"--follow attaches to an execution that already exists and starts no run: drop "
            f"{', '.join(run_options)}"
        )
    if in_step_functions:
        if segments > MAX_OPEN_STATE_MACHINE_SEGMENTS:
            raise click.BadParameter(
                f"an open-index run in the state machine takes at most "
                f"{MAX_OPEN_STATE_MACHINE_SEGMENTS} segments (its results must fit Step "
                f"Functions' 256 KB state); got {segments}",
                param_hint="--segments",
            )
        return
    given = _given(
        {"stack_name": "--stack-name", "stepfunctions_endpoint_url": "--stepfunctions-endpoint-url"}
    )
    if given:
        raise click.UsageError(
            f"{', '.join(given)} only apply to a run in Step Functions: add --deployed (or "
            "--state-machine-arn, --follow)"
        )


# The options that shape a run this command would start: meaningless with --follow.
_RUN_OPTIONS = {
    "max_writes_per_second": "--max-writes-per-second",
    "segments": "--segments",
    "pace_floor": "--pace-floor",
    "dry_run": "--dry-run",
    "scan_rate": "--scan-rate",
    "deployed": "--deployed",
}


def _run_here(
    cli: CliContext, store: ControlStore, request: BackfillRequest, scan_rate: float
) -> dict[str, Any]:
    """The run in this process (backfill_locally), its report."""
    stop = threading.Event()
    outcome = backfill_locally(
        store.client,
        store.table_name,
        request,
        holder=local_holder(),
        store=store,
        clock=cli.hooks.clock,
        poll_seconds=control_poll_seconds(cli.hooks.timing),
        stop=stop,
        while_running=stop_on_signals(stop.set),
        timing=cli.hooks.timing,
        open_verify=OpenVerify(read_units_per_second=scan_rate),
    )
    return open_report(outcome.summary, local_facts(outcome))


def _print(report: dict[str, Any]) -> None:
    verb = "would write" if report["dryRun"] else "wrote"
    click.echo(
        f"open index backfill ({report['direction']}): scanned {report['scanned']} row(s); "
        f"{verb} {report['stamped']} stamp(s) and {report['removed']} removal(s); "
        f"{report['changed']} row(s) changed by a writer meanwhile (left to it); "
        f"{report['anomalies']} anomalies"
    )
    for example in report["examples"]:
        click.echo(f"  {example}")
    if report["verification"]:
        click.echo(f"verification: {report['verification']}")
    if report["leaseLost"]:
        click.echo(
            f"saga-index: the run lost its lease and stopped: {report['leaseLost']}", err=True
        )
