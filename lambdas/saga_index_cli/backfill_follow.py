"""The backfill in Step Functions, from the operator's terminal: start the deployed state
machine and follow its execution to its end (`--state-machine-arn`, `--deployed`; Ctrl-C or
SIGTERM stops it), attach to a running one (`--follow`; Ctrl-C detaches) and stop one
(`--stop`, which also releases the backfill lease the execution holds). Progress comes from the
Map Run and its child executions (execution_progress.py)."""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from saga_index.index.errors import SagaIndexError
from saga_index.layout_change.backfill.leasing import token_for_execution
from saga_index.layout_change.backfill.messages import BackfillRequest, BackfillSummary, summarise
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.lease import release_lease
from saga_index.layout_change.record.errors import LeaseHeldError, LeaseNotYetEffectiveError
from saga_index.layout_change.record.record import format_time
from saga_index.layout_change.record.state import ControlState
from saga_index.layout_change.transitions.rules import seconds_until
from saga_index_cli.backfill_advice import (
    execution_advice,
    is_refusal,
    refusal_message,
    refusals_explained,
)
from saga_index_cli.backfill_estimate import estimate_dry_run, print_report
from saga_index_cli.backfill_output import (
    EXIT_CLEAN,
    EXIT_FAILED,
    RunProgress,
    exit_code,
    stop_on_signals,
)
from saga_index_cli.context import CliContext, emit
from saga_index_cli.execution_progress import ExecutionFollower, SegmentFailure

log = logging.getLogger("saga_index.cli.backfill")


def check_startable(state: ControlState, now: datetime) -> None:
    """What the lease would refuse, asked before a Step Functions execution is started (so the
    refusal is this command's exit 1, not a failed execution): a state younger than its
    effectiveAt, another run's live lease. The plan step's acquire is still the authority."""
    wait = seconds_until(state.effective_at, now)
    if wait > 0 and state.effective_at is not None:
        raise LeaseNotYetEffectiveError(format_time(state.effective_at), wait)
    lease = state.lease
    if lease is not None and lease.is_live(now):
        raise LeaseHeldError(lease.holder, format_time(lease.expires_at))


def _segment_detail(follower: ExecutionFollower) -> str:
    running, failed = follower.running_segments, follower.failed_segments
    detail = "" if running is None else f" · {running} running"
    return detail + (f" · {failed} FAILED" if failed else "")


def _recorded_by(cli: CliContext, token: str) -> bool:
    """Did the run with this token record its completion (the verify step's release)?"""
    try:
        last = cli.control_store().read().last_backfill
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not read the record after the execution: %s", err)
        return False
    return last is not None and last.lease_token == token


# ---- which execution ----------------------------------------------------------------------

STATE_MACHINE_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}"
)
# A (parent) execution of a state machine. Execution names are 1-80 characters without
# whitespace, brackets, wildcards or any of " # % \ ^ | ~ ` $ & , ; : / (StartExecution).
EXECUTION_ARN = re.compile(
    r"(arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}):execution:([A-Za-z0-9_-]{1,80})"
    r":[^\s<>{}\[\]?*\"#%\\^|~`$&,;:/]{1,80}"
)
STOPPED_BY_OPERATOR = "StoppedByOperator"


class ExecutionLookupError(SagaIndexError):
    """No execution, or not exactly one, to follow or stop (exit 1); the message says why."""


def state_machine_of(execution_arn: str) -> str:
    """The ARN of the state machine an execution ARN belongs to."""
    match = EXECUTION_ARN.fullmatch(execution_arn)
    if match is None:
        raise ValueError(f"{execution_arn!r} is not an execution ARN")
    return f"{match.group(1)}:stateMachine:{match.group(2)}"


def running_execution(sfn: Any, state_machine_arn: str) -> str:
    """THE running execution of the state machine (ListExecutions, RUNNING, every page): none
    or several is ExecutionLookupError naming what was found."""
    running: list[str] = []
    kwargs: dict[str, Any] = {
        "stateMachineArn": state_machine_arn,
        "statusFilter": "RUNNING",
        "maxResults": 100,
    }
    while True:
        page = sfn.list_executions(**kwargs)
        running.extend(e["executionArn"] for e in page.get("executions", []))
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    if not running:
        raise ExecutionLookupError(
            f"no backfill execution is running on {state_machine_arn}: nothing to attach to "
            "or stop (`saga-index status` shows the last run)"
        )
    if len(running) > 1:
        listed = "\n  ".join(sorted(running))
        raise ExecutionLookupError(
            f"{len(running)} backfill executions are running on {state_machine_arn}; pass "
            f"one of them:\n  {listed}"
        )
    return running[0]


def describe(sfn: Any, execution_arn: str) -> dict[str, Any]:
    """DescribeExecution; an execution Step Functions does not know is ExecutionLookupError."""
    try:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            raise ExecutionLookupError(
                f"execution {execution_arn} does not exist: check the ARN, --region and "
                "--stepfunctions-endpoint-url"
            ) from err
        raise
    return described


def request_of(described: dict[str, Any]) -> BackfillRequest:
    """The backfill request an execution was started with (its input)."""
    try:
        return BackfillRequest.model_validate(json.loads(described.get("input") or "null"))
    except (json.JSONDecodeError, ValidationError) as err:
        raise ExecutionLookupError(
            f"execution {described.get('executionArn')} was not started with a backfill "
            f"request as its input ({type(err).__name__}): is it an execution of the backfill "
            "state machine?"
        ) from err


# ---- following ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Followed:
    """How one follow ended: the execution's last description, and whether it still runs
    (the operator detached)."""

    status: dict[str, Any]
    follower: ExecutionFollower
    detached: bool


def _follow(
    sfn: Any,
    execution_arn: str,
    progress: RunProgress,
    poll_interval: float,
    *,
    on_interrupt: Callable[[], None] | None,
) -> _Followed:
    """Poll the execution until it ends. Ctrl-C/SIGTERM: `on_interrupt` (stop it), then follow
    it to its end; without one, detach at once."""
    follower = ExecutionFollower(sfn, execution_arn)
    interrupted = threading.Event()
    handled = False
    with stop_on_signals(interrupted.set), progress:
        while True:
            status = sfn.describe_execution(executionArn=execution_arn)
            follower.poll(final=status["status"] != "RUNNING")
            progress.show(
                completed=follower.finished_segments,
                scanned=sum(r.scanned for r in follower.segments.values()),
                restamped=sum(r.restamped for r in follower.segments.values()),
                extra=_segment_detail(follower),
            )
            if status["status"] != "RUNNING":
                return _Followed(status, follower, detached=False)
            if interrupted.is_set() and not handled:
                if on_interrupt is None:
                    return _Followed(status, follower, detached=True)
                on_interrupt()
                handled = True
            interrupted.wait(poll_interval)


def _finish(
    cli: CliContext,
    followed: _Followed,
    request: BackfillRequest,
    *,
    move: Move | None,
    state_version: int | None,
    as_json: bool,
    output: Path | None,
) -> int:
    """The report and exit code of a followed execution, as a run's."""
    status, follower = followed.status, followed.follower
    execution_arn = status.get("executionArn") or follower.execution_arn
    final = status["status"]
    plan = follower.plan
    if move is None and plan is not None:
        move = plan.run.move()
    if state_version is None and plan is not None:
        state_version = plan.run.state_version
    summary = follower.summary
    if final == "SUCCEEDED" and status.get("output"):
        summary = BackfillSummary.model_validate(json.loads(status["output"]))
    if summary is None:
        summary = summarise(request, list(follower.segments.values()), complete=False, move=move)
    token = token_for_execution(execution_arn)
    extra: dict[str, Any] = {
        "executionArn": execution_arn,
        "status": final,
        "holder": execution_arn,
        "stateVersion": state_version,
        "completionRecorded": not request.dry_run and _recorded_by(cli, token),
    }
    failure = follower.failure
    if final not in ("SUCCEEDED", "RUNNING"):
        extra["error"] = status.get("error")
        extra["cause"] = status.get("cause")
        if failure is not None:
            extra["failedSegment"] = failure.segment
            extra["segmentExecutionArn"] = failure.execution_arn
            extra["segmentError"] = failure.error
            extra["segmentCause"] = failure.cause
    if followed.detached:
        extra["detached"] = True
    estimate = estimate_dry_run(cli, summary) if final == "SUCCEEDED" else None
    print_report(summary, extra, as_json, output, estimate)
    if followed.detached:
        click.echo(
            f"saga-index: detached from {execution_arn}, which is still RUNNING: follow it "
            f"again with `saga-index backfill --follow {execution_arn}`, stop it with "
            f"`saga-index backfill --stop {execution_arn}`",
            err=True,
        )
        return EXIT_FAILED
    if final != "SUCCEEDED":
        click.echo(f"saga-index: {failure_message(status, failure)}", err=True)
    return exit_code(summary, failed=final != "SUCCEEDED")


def failure_message(status: dict[str, Any], failure: SegmentFailure | None) -> str:
    """Why an execution did not succeed, and what to do (by its cause: a refused plan is not
    run again as it is)."""
    final, error, cause = status["status"], status.get("error"), status.get("cause")
    if final == "FAILED" and error is not None and is_refusal(error):
        return (
            f"execution FAILED: the plan step refused the run ({error}): "
            f"{refusal_message(error, cause)}"
        )
    # A failed segment fails the parent with Step Functions' generic Map Run error; what the
    # operator needs is the worker's own, in the child execution.
    segment = f"; {failure.describe()}" if failure is not None else ""
    advice = execution_advice(final, error, failure.error if failure is not None else None)
    return f"execution {final}: {error}: {cause}{segment}; {advice}"


def _label(request: BackfillRequest) -> str:
    return f"{request.direction.value}{' dry run' if request.dry_run else ''} (Step Functions)"


def run_state_machine(
    cli: CliContext,
    sfn: Any,
    request: BackfillRequest,
    arn: str,
    as_json: bool,
    output: Path | None,
    poll_interval: float,
) -> int:
    """Start the state machine `arn` with `request` and follow the execution to its end;
    Ctrl-C or SIGTERM stops the execution (and releases its lease), then follows it out."""
    cli.require_table()
    with refusals_explained():
        state = cli.read_state()
        cli.require_overrides_agree(state)
        move = Move.for_state(state, request.direction)
        if not request.dry_run:
            check_startable(state, cli.now())
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"backfill-{request.direction.value}-{stamp}-{uuid.uuid4().hex[:8]}"
    execution_arn = sfn.start_execution(
        stateMachineArn=arn, name=name, input=json.dumps(request.to_json())
    )["executionArn"]
    log.info("started %s: %s", execution_arn, move.describe())

    def stop() -> None:
        # No new invocation starts; one already running stops at its next heartbeat once the
        # lease is released. The next run skips what was moved.
        try:
            stop_execution(
                cli, sfn, execution_arn, cause="Ctrl-C or SIGTERM", dry_run=request.dry_run
            )
        except (SagaIndexError, ClientError, BotoCoreError) as err:
            log.error(
                "could not stop %s or release its lease (%s): stop it with `saga-index "
                "backfill --stop %s`",
                execution_arn,
                err,
                execution_arn,
            )

    progress = RunProgress(label=_label(request), total=request.total_segments, unit="segments")
    followed = _follow(sfn, execution_arn, progress, poll_interval, on_interrupt=stop)
    return _finish(
        cli,
        followed,
        request,
        move=move,
        state_version=state.version,
        as_json=as_json,
        output=output,
    )


def follow_execution(
    cli: CliContext,
    sfn: Any,
    execution_arn: str,
    as_json: bool,
    output: Path | None,
    poll_interval: float,
) -> int:
    """Attach to an execution (running or not) and follow it to its end, with the exit codes
    of a run. Ctrl-C or SIGTERM detaches (exit 1); the execution goes on."""
    cli.require_table()
    described = describe(sfn, execution_arn)
    request = request_of(described)
    log.info(
        "following %s (%s; %s)",
        execution_arn,
        described["status"],
        "Ctrl-C detaches, the execution goes on",
    )
    progress = RunProgress(label=_label(request), total=request.total_segments, unit="segments")
    followed = _follow(sfn, execution_arn, progress, poll_interval, on_interrupt=None)
    return _finish(
        cli, followed, request, move=None, state_version=None, as_json=as_json, output=output
    )


# ---- stopping -----------------------------------------------------------------------------


@dataclass(frozen=True)
class StopOutcome:
    """What `--stop` did."""

    execution_arn: str
    status_before: str
    stopped: bool
    lease_released: bool
    dry_run: bool
    stopped_by: str

    def to_json(self) -> dict[str, Any]:
        return {
            "executionArn": self.execution_arn,
            "statusBefore": self.status_before,
            "stopped": self.stopped,
            "leaseReleased": self.lease_released,
            "dryRun": self.dry_run,
            "stoppedBy": self.stopped_by,
        }

    def lines(self) -> list[str]:
        if self.stopped:
            first = f"stopped {self.execution_arn} ({STOPPED_BY_OPERATOR}, by {self.stopped_by})"
        else:
            first = f"{self.execution_arn} had already ended ({self.status_before}): not stopped"
        if self.lease_released:
            lease = "released the backfill lease it held"
        elif self.dry_run:
            lease = "no lease to release (a dry run holds none)"
        else:
            lease = "no lease to release (the record's lease is not this execution's)"
        return [
            first,
            lease,
            "what it re-stamped stays re-stamped and nothing is half-written; a worker "
            "invocation still running stops at its next heartbeat. Run the backfill again to "
            "finish the move: it converges",
        ]


def stop_execution(
    cli: CliContext, sfn: Any, execution_arn: str, *, cause: str, dry_run: bool
) -> StopOutcome:
    """Stop the execution (StopExecution, naming the operator) if it runs, and release the
    backfill lease it holds, if it holds it (a dry run holds none)."""
    described = describe(sfn, execution_arn)
    status = described["status"]
    who = cli.changed_by()
    stopped = False
    if status == "RUNNING":
        sfn.stop_execution(
            executionArn=execution_arn,
            error=STOPPED_BY_OPERATOR,
            cause=f"saga-index backfill stopped by {who}: {cause}",
        )
        stopped = True
        log.warning("stopped %s (by %s: %s)", execution_arn, who, cause)
    released = False
    if not dry_run:
        store = cli.control_store()
        token = token_for_execution(execution_arn)
        lease = store.read().lease
        if lease is not None and lease.token == token:
            release_lease(store, token=token, clock=cli.hooks.clock)
            released = True
    return StopOutcome(execution_arn, status, stopped, released, dry_run, who)


def stop_command(cli: CliContext, sfn: Any, execution_arn: str, as_json: bool) -> int:
    """`backfill --stop`: stop the execution, release its lease, say what was done. Exit 0."""
    cli.require_table()
    request = request_of(describe(sfn, execution_arn))
    outcome = stop_execution(
        cli, sfn, execution_arn, cause="saga-index backfill --stop", dry_run=request.dry_run
    )
    if as_json:
        emit(outcome.to_json())
    else:
        click.echo("\n".join(outcome.lines()))
    return EXIT_CLEAN
