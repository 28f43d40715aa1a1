"""`saga-index backfill`: move saga rows between the control record's layouts, rate-capped, one
run at a time, in one of four modes: here (local.py), started in the deployed state machine
(start.py), followed (follow.py) or stopped (stop.py); and `backfill throttle|pause|resume`
(control.py), which change a running backfill. The cutover sequence around it is in
docs/runbook.md."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from pydantic import ValidationError

from saga_index.index import InvalidInputError
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.record import BackfillDirection
from saga_index_cli.backfill.clear_fence import clear_fence_command
from saga_index_cli.backfill.control import pause_command, resume_command, throttle_command
from saga_index_cli.backfill.executions import (
    THE_RUNNING_EXECUTION,
    resolve_state_machine,
    target_execution,
)
from saga_index_cli.backfill.follow import follow_execution
from saga_index_cli.backfill.local import run_locally
from saga_index_cli.backfill.options import REPORT_FILE, backfill_options, check_modes
from saga_index_cli.backfill.output import report_failures
from saga_index_cli.backfill.release import (
    is_execution_lease,
    nothing_holds_the_lease,
    release_dead_local_lease,
)
from saga_index_cli.backfill.start import run_state_machine
from saga_index_cli.backfill.stop import stop_command
from saga_index_cli.context import CliContext
from saga_index_cli.output import check_output_file


def _request(
    direction: str, segments: int, max_writes_per_second: float, pace_floor: float, dry_run: bool
) -> BackfillRequest:
    try:
        return BackfillRequest(
            direction=BackfillDirection(direction),
            total_segments=segments,
            max_writes_per_second=float(max_writes_per_second),
            pace_floor=float(pace_floor),
            dry_run=dry_run,
        )
    except ValidationError as err:
        raise InvalidInputError(str(err)) from None


@click.group("backfill", invoke_without_command=True)
@backfill_options
@click.pass_context
def backfill_group(
    ctx: click.Context,
    direction: str,
    segments: int,
    max_writes_per_second: float,
    pace_floor: float,
    dry_run: bool,
    as_json: bool,
    report_file: Path | None,
    overwrite: bool,
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
      1  failed, interrupted or lost its lease before it re-stamped anything; its read-back
         found rows left to move; or refused for cause before anything ran (the record is
         missing or unreadable). The message says what to do for its cause.
         --follow/--stop: no execution running, or several (listed: pass one)
      5  not yet, nothing written: the state is younger than its effectiveAt, another run
         holds a live lease (--stop: a local holder's heartbeat is still fresh). The message
         and the --report-file report (`retryAt`) say when the same command can succeed
      6  interrupted, partly done: re-stamped rows, then failed, lost its lease or was
         stopped; the report says what it did (completionRecorded: false). The same command
         again finishes it
      2  bad usage or input, a --direction the record disagrees with (the message says
         which to give), a global --phase/--shards the record does not hold, or an
         existing --report-file PATH without --overwrite that is not this command's own
         report (the same command again replaces its own), an --output that is not a format
      4  could not complete: DynamoDB, Step Functions or CloudFormation could not be
         reached, refused the call or does not support it (the message names the service,
         its endpoint and the operation)

    A dry run takes no lease and writes nothing, but its --direction must still agree with the
    record. Ctrl-C or SIGTERM stops after the in-flight writes and releases the lease (a run
    this command started in Step Functions is stopped; --follow only detaches). --stop without
    an ARN releases the lease of a local run that died (its process gone from this host, or
    no heartbeat for 60 s). The cutover
    and rollback sequences are in docs/runbook.md.
    """
    if ctx.invoked_subcommand is not None:
        return
    cli = ctx.find_object(CliContext)
    assert cli is not None
    output = report_file
    check_modes(
        ctx,
        follow=follow,
        stop=stop,
        state_machine_arn=state_machine_arn,
        deployed=deployed,
        report_file=output,
    )
    # Every argument is checked before the first call to any service (exit 2).
    cli.require_table()
    if output is not None:
        check_output_file(
            output, overwrite=overwrite, option=REPORT_FILE, same_command_replaces=True
        )
    elif overwrite:
        raise click.UsageError(f"--overwrite applies to {REPORT_FILE} PATH only", ctx=ctx)
    if stop == THE_RUNNING_EXECUTION and state_machine_arn is None:
        # A lease held from an operator's shell is released here, with no state machine.
        lease = cli.control_store().read().lease
        if lease is None:
            sys.exit(nothing_holds_the_lease(cli, as_json))
        if not is_execution_lease(lease):
            sys.exit(release_dead_local_lease(cli, lease, as_json))
    if follow is not None or stop is not None:
        sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
        if stop is not None:
            execution = target_execution(cli, sfn, stop, state_machine_arn, stack_name)
            sys.exit(stop_command(cli, sfn, execution, as_json))
        assert follow is not None
        with report_failures(output):
            execution = target_execution(cli, sfn, follow, state_machine_arn, stack_name)
            sys.exit(follow_execution(cli, sfn, execution, as_json, output, poll_interval))
    request = _request(direction, segments, max_writes_per_second, pace_floor, dry_run)
    with report_failures(output):
        if state_machine_arn is not None or deployed:
            sfn = cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url)
            machine = resolve_state_machine(cli, state_machine_arn, stack_name)
            code = run_state_machine(cli, sfn, request, machine, as_json, output, poll_interval)
        else:
            code = run_locally(cli, request, as_json, output)
    sys.exit(code)


backfill_group.add_command(throttle_command)
backfill_group.add_command(pause_command)
backfill_group.add_command(resume_command)
backfill_group.add_command(clear_fence_command)
