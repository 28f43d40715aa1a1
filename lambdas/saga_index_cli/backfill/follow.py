"""`saga-index backfill --follow`, and the following of an execution this command started:
poll it to its end, show its progress (execution_progress.py), and report it with the exit codes
of a run."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import InvalidInputError, SagaIndexError
from saga_index.layout_change.backfill import (
    BackfillRequest,
    BackfillSummary,
    Move,
    summarise,
    token_for_execution,
)
from saga_index.layout_change.record import BackfillKind
from saga_index_cli.backfill.advice import (
    VERIFICATION_FAILED_ERROR,
    execution_advice,
    is_refusal,
    refusal_message,
)
from saga_index_cli.backfill.estimate import (
    applied_cap_report,
    cap_source,
    estimate_dry_run,
    print_report,
)
from saga_index_cli.backfill.execution_progress import ExecutionFollower, SegmentFailure
from saga_index_cli.backfill.executions import describe, request_of
from saga_index_cli.backfill.output import EXIT_FAILED, RunProgress, exit_code, stop_on_signals
from saga_index_cli.context import CliContext

log = logging.getLogger("saga_index.cli.backfill")


def _segment_detail(follower: ExecutionFollower) -> str:
    running, failed = follower.running_segments, follower.failed_segments
    detail = "" if running is None else f" · {running} running"
    return detail + (f" · {failed} FAILED" if failed else "")


def _recorded_by(cli: CliContext, token: str) -> bool:
    """Did the run with this token record a complete run's completion (the verify step's
    release; what `phase set` checks)? An incomplete run's record is not one."""
    try:
        last = cli.control_store().read().last_backfill
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not read the record after the execution: %s", err)
        return False
    return last is not None and last.lease_token == token and last.complete


@dataclass(frozen=True)
class Followed:
    """How one follow ended: the execution's last description, and whether it still runs
    (the operator detached)."""

    status: dict[str, Any]
    follower: ExecutionFollower
    detached: bool


def follow_to_end(
    sfn: Any,
    execution_arn: str,
    progress: RunProgress,
    poll_interval: float,
    *,
    on_interrupt: Callable[[], None] | None,
) -> Followed:
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
                return Followed(status, follower, detached=False)
            if interrupted.is_set() and not handled:
                if on_interrupt is None:
                    return Followed(status, follower, detached=True)
                on_interrupt()
                handled = True
            interrupted.wait(poll_interval)


def report_followed(
    cli: CliContext,
    followed: Followed,
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
    if request.dry_run:
        del extra["holder"]  # a dry run takes no lease
    extra.update(applied_cap_report(summary))
    if followed.detached or status.get("error") == VERIFICATION_FAILED_ERROR:
        # Detached: the run goes on. Verification failed: it finished with rows left to move.
        code = EXIT_FAILED
    else:
        code = exit_code(summary, failed=final != "SUCCEEDED")
    extra["exitCode"] = code
    estimate = estimate_dry_run(cli, summary) if final == "SUCCEEDED" else None
    print_report(
        summary, extra, as_json, output, estimate, cap_source(cli, summary.max_writes_per_second)
    )
    if followed.detached:
        click.echo(
            f"saga-index: detached from {execution_arn}, which is still RUNNING: follow it "
            f"again with `{cli.command_prefix()} backfill --follow {execution_arn}`, stop it "
            f"with `{cli.command_prefix()} backfill --stop {execution_arn}`",
            err=True,
        )
    elif final != "SUCCEEDED":
        click.echo(f"saga-index: {failure_message(status, failure)}", err=True)
    return code


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


def run_label(request: BackfillRequest) -> str:
    return f"{request.direction.value}{' dry run' if request.dry_run else ''} (Step Functions)"


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
    if request.kind is BackfillKind.OPEN_INDEX:
        # Its report is the open-index run's (saga_index_cli/open_index/), not a layout move's.
        raise InvalidInputError(
            f"execution {execution_arn} is an open-index run: follow it with "
            f"`{cli.command_prefix()} open-index backfill --follow {execution_arn}`"
        )
    log.info(
        "following %s (%s; %s)",
        execution_arn,
        described["status"],
        "Ctrl-C detaches, the execution goes on",
    )
    progress = RunProgress(label=run_label(request), total=request.total_segments, unit="segments")
    followed = follow_to_end(sfn, execution_arn, progress, poll_interval, on_interrupt=None)
    return report_followed(
        cli, followed, request, move=None, state_version=None, as_json=as_json, output=output
    )
