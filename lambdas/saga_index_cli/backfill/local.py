"""`saga-index backfill` run here (the default): the deployed worker's code, one thread per
segment, with this process holding the record's lease (user@host/pid). It heartbeats the lease
every few seconds, which also applies the record's throttle and pause, and releases it with the
run's completion, which `phase set` checks."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console

from saga_index.index import INDEX_NAME
from saga_index.layout_change.backfill import (
    CONTROL_POLL_SECONDS,
    BackfillRequest,
    LocalBackfill,
    RunTicket,
    backfill_locally,
    count_source_rows,
)
from saga_index.layout_change.record import ControlState, ControlTiming
from saga_index_cli.backfill.advice import (
    LEASE_LOST_ADVICE,
    as_refusal,
    local_failure_advice,
    move_for,
    refusals_explained,
)
from saga_index_cli.backfill.estimate import (
    applied_cap_report,
    cap_source,
    estimate_dry_run,
    print_report,
)
from saga_index_cli.backfill.output import EXIT_FAILED, RunProgress, exit_code, stop_on_signals
from saga_index_cli.context import CliContext
from saga_index_cli.identity import local_identity

log = logging.getLogger("saga_index.cli.backfill")


def control_poll_seconds(timing: ControlTiming) -> float:
    """How often a local run heartbeats (and re-reads the throttle and pause): every few seconds,
    and at least as often as T, so a demo or test with a small T sees changes as fast."""
    return max(0.01, min(CONTROL_POLL_SECONDS, timing.cache_seconds))


def local_holder() -> str:
    """The lease holder of a run in this process: user@host/pid."""
    return f"{local_identity()}/{os.getpid()}"


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


def run_locally(
    cli: CliContext, request: BackfillRequest, as_json: bool, output: Path | None
) -> int:
    table = cli.require_table()
    with refusals_explained():
        state = cli.read_state()
        cli.require_overrides_agree(state)
        # Refuse a direction the record's writers would undo before reading anything else.
        move = move_for(state, request.direction)
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
    extra.update(applied_cap_report(summary))
    estimate = estimate_dry_run(cli, summary) if summary.complete else None
    print_report(summary, extra, as_json, output, estimate, cap_source(cli))
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
