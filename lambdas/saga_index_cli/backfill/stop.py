"""`saga-index backfill --stop`: stop an execution of the state machine and release the backfill
lease it holds."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import SagaIndexError
from saga_index.layout_change.backfill import token_for_execution
from saga_index.layout_change.lease import release_lease
from saga_index_cli.backfill.executions import describe, request_of
from saga_index_cli.backfill.output import EXIT_CLEAN
from saga_index_cli.context import CliContext
from saga_index_cli.output import emit

log = logging.getLogger("saga_index.cli.backfill")

STOPPED_BY_OPERATOR = "StoppedByOperator"


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


class StopOnInterrupt:
    """What a followed execution does on Ctrl-C or SIGTERM (follow_to_end's on_interrupt): stop
    it and release its lease. No new invocation starts; one already running stops at its next
    heartbeat once the lease is released, and the next run skips what was moved. A stop that
    fails is logged with the command that finishes it; `stopped` says whether one landed."""

    def __init__(self, cli: CliContext, sfn: Any, execution_arn: str, *, dry_run: bool) -> None:
        self.cli, self.sfn, self.execution_arn, self.dry_run = cli, sfn, execution_arn, dry_run
        self.stopped = False

    def __call__(self) -> None:
        try:
            stop_execution(
                self.cli,
                self.sfn,
                self.execution_arn,
                cause="Ctrl-C or SIGTERM",
                dry_run=self.dry_run,
            )
            self.stopped = True
        except (SagaIndexError, ClientError, BotoCoreError) as err:
            log.error(
                "could not stop %s or release its lease (%s): stop it with `saga-index "
                "backfill --stop %s`",
                self.execution_arn,
                err,
                self.execution_arn,
            )


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
