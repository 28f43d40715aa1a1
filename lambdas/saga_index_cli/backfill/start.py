"""`saga-index backfill --deployed` / `--state-machine-arn`: start the deployed state machine
(its plan step takes the lease for the execution) and follow the execution to its end; Ctrl-C or
SIGTERM stops it."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.lease import check_startable
from saga_index_cli.backfill.advice import move_for, refusals_explained
from saga_index_cli.backfill.follow import follow_to_end, report_followed, run_label
from saga_index_cli.backfill.output import RunProgress
from saga_index_cli.backfill.stop import StopOnInterrupt
from saga_index_cli.context import CliContext

log = logging.getLogger("saga_index.cli.backfill")


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
        move = move_for(state, request.direction)
        if not request.dry_run:
            # The lease's own start rule, asked before the execution starts; the plan step's
            # acquire asks it again and stays the authority.
            check_startable(state, cli.now())
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"backfill-{request.direction.value}-{stamp}-{uuid.uuid4().hex[:8]}"
    execution_arn = sfn.start_execution(
        stateMachineArn=arn, name=name, input=json.dumps(request.to_json())
    )["executionArn"]
    log.info("started %s: %s", execution_arn, move.describe())

    stop = StopOnInterrupt(cli, sfn, execution_arn, dry_run=request.dry_run)
    progress = RunProgress(label=run_label(request), total=request.total_segments, unit="segments")
    followed = follow_to_end(sfn, execution_arn, progress, poll_interval, on_interrupt=stop)
    return report_followed(
        cli,
        followed,
        request,
        move=move,
        state_version=state.version,
        as_json=as_json,
        output=output,
    )
