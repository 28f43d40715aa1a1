"""`saga-index open-index backfill --deployed` / `--state-machine-arn`: the open-index run in the
deployed backfill state machine (a request of kind `open-index`: its worker stamps or removes
OpenSagaPK, its verify step compares the table with the open index and releases the lease),
started and followed to its end as `saga-index backfill --deployed` follows a layout run
(saga_index_cli/backfill/start.py, follow.py); Ctrl-C or SIGTERM stops the execution and
releases its lease. --follow attaches to one already running (Ctrl-C detaches). The report is
the local run's, with the execution's ARN and status."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click

from saga_index.index import InvalidInputError
from saga_index.layout_change.backfill import (
    BackfillRequest,
    BackfillSummary,
    RunTicket,
    summarise,
)
from saga_index.layout_change.lease import check_startable, require_open_index_settled
from saga_index.layout_change.record import BackfillDirection, BackfillKind, ControlState
from saga_index_cli.backfill.executions import describe, request_of
from saga_index_cli.backfill.follow import Followed, failure_message, follow_to_end
from saga_index_cli.backfill.output import RunProgress
from saga_index_cli.backfill.stop import STOPPED_BY_OPERATOR, StopOnInterrupt
from saga_index_cli.context import CliContext

log = logging.getLogger("saga_index.cli.open_index")


@dataclass(frozen=True)
class RunFacts:
    """What the report says of a run besides its summary: who held it, under which state and
    N, and how it ended when it did not end well."""

    open_shard_count: int | None
    state_version: int
    holder: str
    lease_lost: str | None = None
    # By segment number (a child execution's ARN when its segment is not known).
    failures: dict[str, str] | None = None
    interrupted: bool = False


def start_deployed(
    cli: CliContext,
    sfn: Any,
    machine: str,
    request: BackfillRequest,
    state: ControlState,
    poll_interval: float,
) -> tuple[BackfillSummary, RunFacts, dict[str, Any]]:
    """Start the open-index run `request` (its direction the open index's in `state`) on the
    state machine `machine` and follow it to its end: its summary, the report's facts and the
    execution's keys (executionArn, status, and error and cause when it did not succeed).

    Refused before the execution starts, nothing written, as the local run refuses: before the
    open index's switch settled (RetryLaterError, exit 5), and (not for a dry run) before
    effectiveAt or while another run holds the lease (exit 5). The plan step asks again and
    stays the authority."""
    now = cli.now()
    require_open_index_settled(state, now, cli.hooks.timing)
    if not request.dry_run:
        check_startable(state, now)
    verb = "stamp" if request.direction is BackfillDirection.FORWARD else "remove"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"open-index-{verb}-{stamp}-{uuid.uuid4().hex[:8]}"
    execution_arn = sfn.start_execution(
        stateMachineArn=machine, name=name, input=json.dumps(request.to_json())
    )["executionArn"]
    log.info("started %s: the open index's backfill (%s)", execution_arn, verb)
    stop = StopOnInterrupt(cli, sfn, execution_arn, dry_run=request.dry_run)
    progress = RunProgress(label=_label(request), total=request.total_segments, unit="segments")
    followed = follow_to_end(sfn, execution_arn, progress, poll_interval, on_interrupt=stop)
    return _outcome(followed, request, state, execution_arn, interrupted=stop.stopped)


def follow_deployed(
    cli: CliContext, sfn: Any, execution_arn: str, state: ControlState, poll_interval: float
) -> tuple[BackfillSummary, RunFacts, dict[str, Any]]:
    """Attach to an execution of an open-index run (running or not) and follow it to its end,
    as start_deployed does; Ctrl-C or SIGTERM detaches (the execution goes on; exit 1).
    InvalidInputError (exit 2) for an execution of a layout run."""
    request = request_of(describe(sfn, execution_arn))
    if request.kind is not BackfillKind.OPEN_INDEX:
        raise InvalidInputError(
            f"execution {execution_arn} is a layout run: follow it with "
            f"`{cli.command_prefix()} backfill --follow {execution_arn}`"
        )
    log.info("following %s (Ctrl-C detaches, the execution goes on)", execution_arn)
    progress = RunProgress(label=_label(request), total=request.total_segments, unit="segments")
    followed = follow_to_end(sfn, execution_arn, progress, poll_interval, on_interrupt=None)
    if followed.detached:
        click.echo(
            f"saga-index: detached from {execution_arn}, which is still RUNNING: follow it "
            f"again with `{cli.command_prefix()} open-index backfill --follow {execution_arn}`",
            err=True,
        )
    return _outcome(followed, request, state, execution_arn, interrupted=False)


def _label(request: BackfillRequest) -> str:
    verb = "stamp" if request.direction is BackfillDirection.FORWARD else "remove"
    return f"open index {verb}{' dry run' if request.dry_run else ''} (Step Functions)"


def _outcome(
    followed: Followed,
    request: BackfillRequest,
    state: ControlState,
    execution_arn: str,
    *,
    interrupted: bool,
) -> tuple[BackfillSummary, RunFacts, dict[str, Any]]:
    status, follower = followed.status, followed.follower
    final = status["status"]
    ticket: RunTicket | None = follower.plan.run if follower.plan is not None else None
    summary = follower.summary
    if final == "SUCCEEDED" and status.get("output"):
        summary = BackfillSummary.model_validate(json.loads(status["output"]))
    if summary is None:
        # Ended before its verification: the segments' last counts, not complete.
        move = ticket.move() if ticket is not None else None
        summary = summarise(request, list(follower.segments.values()), complete=False, move=move)
    error, cause = status.get("error"), status.get("cause")
    failure = follower.failure
    lost = [
        f"{e}: {c}"
        for e, c in ((error, cause), (failure and failure.error, failure and failure.cause))
        if e == "LeaseLostError"
    ]
    failures = {}
    if failure is not None and failure.error != "LeaseLostError":
        which = failure.execution_arn if failure.segment is None else str(failure.segment)
        failures[which] = f"{failure.error}: {failure.cause}"
    facts = RunFacts(
        open_shard_count=(
            ticket.open_shard_count if ticket is not None else state.open_index.shard_count
        ),
        state_version=ticket.state_version if ticket is not None else state.version,
        holder=execution_arn,
        lease_lost=lost[0] if lost else None,
        failures=failures,
        interrupted=interrupted or error == STOPPED_BY_OPERATOR,
    )
    execution: dict[str, Any] = {"executionArn": execution_arn, "status": final}
    if followed.detached:
        execution["detached"] = True
    elif final != "SUCCEEDED":
        execution.update(error=error, cause=cause)
        click.echo(f"saga-index: {failure_message(status, failure)}", err=True)
    return summary, facts, execution
