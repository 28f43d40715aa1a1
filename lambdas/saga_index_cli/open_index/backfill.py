"""`saga-index open-index backfill`: the open-saga index's backfill run here (the domain's
layout_change/backfill/open_stamps.py): OpenSagaPK stamped on the open rows that predate
`adding`, stale keys cleared from closed rows, every key removed in `removing`."""

from __future__ import annotations

import click

from saga_index.layout_change.backfill import DEFAULT_OPEN_STAMP_RATE, open_index_backfill
from saga_index.store.dynamo import ScanOptions
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.output import emit, json_option


@click.command("backfill")
@click.option(
    "--rate",
    type=click.FloatRange(min=0.1, max=40_000),
    default=DEFAULT_OPEN_STAMP_RATE,
    show_default=True,
    help="Writes per second at most, across every segment.",
)
@click.option("--dry-run", is_flag=True, help="Count the writes it would make; write nothing.")
@click.option(
    "--scan-rate",
    type=click.FloatRange(min=1, max=40_000),
    default=ScanOptions.read_units_per_second,
    show_default=True,
    help="Read units per second its base-table scan may use.",
)
@click.option(
    "--segments",
    type=click.IntRange(1, 64),
    default=ScanOptions.segments,
    show_default=True,
    help="Scan segments.",
)
@json_option
@pass_cli
def backfill_command(
    cli: CliContext, rate: float, dry_run: bool, scan_rate: float, segments: int, as_json: bool
) -> None:
    """Stamp OpenSagaPK on every open saga that lacks its key (open index adding or open), or
    remove every stamp (removing), in this process.

    \b
    One paced, consistent Scan of the base table; each row that needs it gets ONE conditional
    UpdateItem: SET OpenSagaPK IF the row's state is still the one read (a saga a writer closed
    meanwhile is never stamped again: counted as `changed`); REMOVE it from a closed row the
    same way; in removing, REMOVE every stamp. It starts only after the state's effectiveAt
    plus the in-flight margin, and stops when the open index moves during the run. Run it
    again at will: a row already right costs no write.

    \b
    --json: {direction: stamp | remove, dryRun, scanned, stamped, removed, changed, anomalies,
    examples}.

    Exit codes: 0 done; 1 stopped (the open index moved during the run); 2 the open index is
    off (nothing to do); 4 DynamoDB unreachable; 5 not yet (before effectiveAt + the margin).
    """
    report = open_index_backfill(
        cli.control_store(),
        max_writes_per_second=rate,
        scan=ScanOptions(segments=segments, read_units_per_second=scan_rate),
        dry_run=dry_run,
        clock=cli.hooks.clock,
        timing=cli.hooks.timing,
        sleep=cli.hooks.sleep,
    )
    if as_json:
        emit(report.to_json())
        return
    verb = "would write" if dry_run else "wrote"
    click.echo(
        f"open index backfill ({report.direction}): scanned {report.scanned} saga row(s); "
        f"{verb} {report.stamped} stamp(s) and {report.removed} removal(s); {report.changed} "
        f"row(s) changed by a writer meanwhile (left to it); {report.anomalies} anomalies"
    )
    for example in report.examples:
        click.echo(f"  {example}")
