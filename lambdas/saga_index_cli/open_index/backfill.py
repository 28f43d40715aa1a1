"""`saga-index open-index backfill`: the open-saga index's backfill run here, on the layout
backfill's machinery (the domain's layout_change/backfill, a request of kind `open-index`): the
record's one lease (recorded with its kind), the fence slots, the segments, the pacer under
the cap, the record's throttle and pause, the dry run and the verification. OpenSagaPK is
stamped on the open rows that predate `adding`, stale keys are cleared from closed rows, every
key is removed in `removing`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import click

from saga_index.index import MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.backfill import (
    DEFAULT_FLOOR_FRACTION,
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    BackfillRequest,
    LocalBackfill,
    OpenVerify,
    backfill_locally,
)
from saga_index.layout_change.lease import open_index_direction
from saga_index.layout_change.record import BackfillDirection, BackfillKind
from saga_index_cli.backfill.local import control_poll_seconds, local_holder
from saga_index_cli.backfill.options import REPORT_FILE
from saga_index_cli.backfill.output import stop_on_signals, write_report
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.output import check_output_file, emit, json_option, overwrite_option


def open_report(outcome: LocalBackfill) -> dict[str, Any]:
    """The command's JSON report: the keys it had before it ran on the layout's machinery
    (direction stamp | remove, dryRun, scanned, stamped, removed, changed, anomalies, examples)
    and what the run adds (complete, verified, verification, segments, the lease's holder)."""
    summary, ticket = outcome.summary, outcome.ticket
    opened = summary.open
    removed = 0 if opened is None else (opened.would_remove if summary.dry_run else opened.removed)
    writes = summary.would_restamp if summary.dry_run else summary.restamped
    verification = summary.verification
    return {
        "direction": "stamp" if ticket.direction is BackfillDirection.FORWARD else "remove",
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
        "openShardCount": ticket.open_shard_count,
        "stateVersion": ticket.state_version,
        "holder": None if summary.dry_run else ticket.holder,
        "segments": summary.total_segments,
        "maxWritesPerSecond": summary.max_writes_per_second,
        "appliedMaxWritesPerSecond": summary.applied_max_writes_per_second,
        "throttles": summary.throttles,
        "complete": summary.complete,
        "verified": summary.verified,
        "verification": None if verification is None else verification.message,
        "leaseLost": outcome.lease_lost,
        "failures": {str(k): v for k, v in outcome.run.failures.items()},
        "interrupted": outcome.run.interrupted,
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
    help="Parallel Scan segments (one thread each), each with its own fence slot.",
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
) -> None:
    """Stamp OpenSagaPK on every open saga that lacks its key (open index adding or open), or
    remove every stamp (removing), in this process, on the layout backfill's machinery.

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
    verified, verification, leaseLost, failures, interrupted, exitCode}.

    Exit codes: 0 done and verified (a dry run: done); 1 stopped (the lease lost, e.g. the
    open index moved during the run; a segment failed; Ctrl-C) or not verified; 2 the open
    index is off, or bad input; 4 DynamoDB unreachable; 5 not yet (before effectiveAt + the
    margin), or another backfill run holds the lease.
    """
    if report_file is not None:
        check_output_file(report_file, overwrite=overwrite, option=REPORT_FILE)
    elif overwrite:
        raise click.UsageError(f"--overwrite applies to {REPORT_FILE} PATH only")
    store = cli.control_store()
    # The direction is the open index's state's (refused while off: exit 2, nothing written).
    direction = open_index_direction(store.read())
    request = BackfillRequest(
        direction=direction,
        kind=BackfillKind.OPEN_INDEX,
        total_segments=segments,
        max_writes_per_second=max_writes_per_second,
        dry_run=dry_run,
        pace_floor=pace_floor,
    )
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
    report = open_report(outcome)
    ok = outcome.summary.complete and outcome.summary.verified and outcome.lease_lost is None
    report["exitCode"] = 0 if ok else 1
    if report_file is not None:
        write_report(report_file, report)
    if as_json:
        emit(report)
    else:
        _print(report)
    if not ok:
        raise SystemExit(1)


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
