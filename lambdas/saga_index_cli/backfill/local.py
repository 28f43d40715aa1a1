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

from saga_index.index import INDEX_NAME, SagaIndexError
from saga_index.layout_change.backfill import (
    CONTROL_POLL_SECONDS,
    BackfillRequest,
    LocalBackfill,
    RunTicket,
    SegmentCounts,
    backfill_locally,
    count_rows_to_move,
)
from saga_index.layout_change.lease import release_lease
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
from saga_index_cli.backfill.output import (
    EXIT_FAILED,
    EXIT_PARTIAL,
    RunProgress,
    exit_code,
    stop_on_signals,
    write_report,
)
from saga_index_cli.context import CliContext
from saga_index_cli.failures import service_failure
from saga_index_cli.identity import local_identity
from saga_index_cli.output import emit
from saga_index_cli.waiting import doing

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
    for line in leftover_control_lines(state, request.max_writes_per_second):
        log.warning("%s", line)


def leftover_control_lines(state: ControlState, own_rate: float) -> list[str]:
    """The record's throttle and pause a run starts under, named with their fate: both are the
    record's, not a run's, so they stay until cleared (docs/control-contract.md); a throttle
    only ever lowers the run's own cap."""
    lines = []
    throttle = state.backfill_max_writes_per_second
    if throttle is not None:
        effect = (
            f"this run is capped at {throttle:g} writes/s, below its own "
            f"--max-writes-per-second {own_rate:g}"
            if throttle < own_rate
            else f"this run keeps its own --max-writes-per-second {own_rate:g} (a throttle "
            "only lowers a run's cap)"
        )
        lines.append(
            f"the record holds a throttle of {throttle:g} writes/s (`saga-index backfill "
            f"throttle`): {effect}. It stays until `saga-index backfill throttle --clear`"
        )
    if state.backfill_paused:
        lines.append(
            "the backfill is PAUSED in the record (`saga-index backfill pause`): this run "
            "writes nothing until `saga-index backfill resume`. The pause stays until then, "
            "across runs"
        )
    return lines


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
    # The progress's total and ETA, on the bar of a terminal as on the log lines of a pipe:
    # the rows the row rule moves, as the index shows them now (a re-shard's rows whose shard
    # stays are not among them).
    try:
        with doing("counting the rows to move (the progress's total)"):
            total = count_rows_to_move(client, table, index_name=INDEX_NAME, move=move)
    except (ClientError, BotoCoreError) as err:
        log.warning("could not count the rows to move (no ETA): %s", err)
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''}"
    progress = RunProgress(label=f"{label}: rows moved", total=total, unit="rows")
    started: list[RunTicket] = []
    # The run's live totals, for the report of a run that ends in an error after it started.
    seen = SegmentCounts()

    def on_start(ticket: RunTicket, state: ControlState) -> None:
        started.append(ticket)
        _announce(ticket, state, request)

    def on_progress(totals: SegmentCounts) -> None:
        nonlocal seen
        seen = totals
        progress.show_totals(totals)

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
            on_progress=on_progress,
            on_control=progress.follow_control,
            while_running=_while_running(stop, progress),
        )
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        # Refused while taking the run (the lease, effectiveAt, the record): nothing written.
        refused = None if started else as_refusal(err)
        if refused is not None:
            raise refused from err
        if not started or seen.restamped == 0:
            raise
        released = _release_after_error(cli, started[0])
        return report_partly_done(request, seen, err, released, as_json, output)
    except KeyboardInterrupt as err:
        # A second Ctrl-C: the run stopped at once, its lease released on the way out.
        if not started or seen.restamped == 0:
            raise
        released = _release_after_error(cli, started[0])
        return report_partly_done(request, seen, err, released, as_json, output)
    return _finish_local(cli, outcome, as_json, output)


def _release_after_error(cli: CliContext, ticket: RunTicket) -> bool:
    """Free the lease of a run that ended in an error, if the record can be reached: the same
    command can then run again at once. False when it could not be (it stays held until
    `backfill --stop` finds this process gone)."""
    if ticket.lease_token is None:
        return True
    try:
        release_lease(cli.control_store(), token=ticket.lease_token, clock=cli.hooks.clock)
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not release the backfill lease after the error: %s", err)
        return False
    return True


def report_partly_done(
    request: BackfillRequest,
    seen: SegmentCounts,
    err: BaseException,
    lease_released: bool,
    as_json: bool,
    output: Path | None,
) -> int:
    """A run that re-stamped rows, then ended in an error (the server went away, its lease
    could not be released): what it knows it did, and exit 6, never "nothing written"."""
    report: dict[str, Any] = {
        "direction": request.direction.value,
        "dryRun": request.dry_run,
        "scanned": seen.scanned,
        "restamped": seen.restamped,
        "skipped": seen.skipped,
        "anomalies": seen.anomalies,
        "complete": False,
        "completionRecorded": False,
        "interrupted": True,
        "remaining": None,
        "refused": False,
        "error": type(err).__name__,
        "message": str(err),
        "exitCode": EXIT_PARTIAL,
        "leaseReleased": lease_released,
    }
    if output is not None:
        write_report(output, report)
    if as_json:
        emit(report)
    failure = service_failure(err)
    if isinstance(err, KeyboardInterrupt):
        why, when = "a second Ctrl-C stopped it at once", ""
    else:
        why = failure.message() if failure is not None else f"{type(err).__name__}: {err}"
        when = "Once the table answers again (`saga-index status`), "
    then = (
        "run the same command again: it converges"
        if lease_released
        else "release the lease this run still holds with `saga-index backfill --stop` (it "
        "does once this process has exited), then run the same command again: it converges"
    )
    click.echo(
        f"saga-index: interrupted, partly done: {seen.restamped} row(s) re-stamped, then "
        f"{why}. No completion was recorded; what it re-stamped stays and nothing is "
        f"half-written. {when + then if when else then.capitalize()}"
        + ("" if output is None else f" (report written to {output})"),
        err=True,
    )
    return EXIT_PARTIAL


def _finish_local(
    cli: CliContext, outcome: LocalBackfill, as_json: bool, output: Path | None
) -> int:
    run, summary, ticket = outcome.run, outcome.summary, outcome.ticket
    lost = outcome.lease_lost is not None
    code = exit_code(summary, failed=bool(run.failures) or run.interrupted or lost)
    extra: dict[str, Any] = {
        "exitCode": code,
        "failures": {str(k): v for k, v in run.failures.items()},
        # A dry run takes no lease: no holder.
        **({} if summary.dry_run else {"holder": ticket.holder}),
        "stateVersion": ticket.state_version,
        "startedAt": ticket.started_at,
        # What `phase set` checks: a complete run's completion in the record.
        "completionRecorded": outcome.completion is not None and outcome.completion.complete,
        "segments": [
            {
                "segment": r.segment,
                "scanned": r.scanned,
                "restamped": r.restamped,
                "done": r.done and not r.interrupted,
            }
            for r in run.results
        ],
    }
    if run.interrupted:
        extra["interrupted"] = True
    if outcome.lease_lost is not None:
        extra["leaseLost"] = outcome.lease_lost
    extra.update(applied_cap_report(summary))
    estimate = estimate_dry_run(cli, summary) if summary.complete else None
    print_report(
        summary, extra, as_json, output, estimate, cap_source(cli, summary.max_writes_per_second)
    )
    if lost:
        click.echo(
            f"saga-index: the backfill lost its lease and stopped: {outcome.lease_lost}; "
            f"{LEASE_LOST_ADVICE}",
            err=True,
        )
    elif code in (EXIT_FAILED, EXIT_PARTIAL):
        failures = "; ".join(f"segment {n}: {why}" for n, why in sorted(run.failures.items()))
        verification = summary.verification
        click.echo(
            "saga-index: backfill did not finish cleanly"
            + (
                f" (interrupted, partly done: {summary.restamped} row(s) re-stamped, no "
                "completion recorded)"
                if code == EXIT_PARTIAL
                else ""
            )
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
