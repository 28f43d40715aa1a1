"""`saga-index verify`: parity, the repository's reads against the base table's truth, as the
control record (or a --phase/--shards reader) routes them; optionally recorded to, or compared
with, a snapshot file."""

from __future__ import annotations

import random
from pathlib import Path

import click

from saga_index.layout_change.checks.parity import (
    DEFAULT_RECHECK_DELAY_SECONDS,
    DEFAULT_SAMPLE,
    Finding,
    ParityReport,
    ParityVerifier,
    Snapshot,
)
from saga_index.store.dynamo import ScanOptions
from saga_index_cli.context import CliContext
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.output import emit, json_option, overwrite_option
from saga_index_cli.progress import LiveProgress
from saga_index_cli.signals import EXIT_CLEAN, EXIT_FOUND
from saga_index_cli.signals.scan import (
    RepositoryReadsProgress,
    ScanProgress,
    scan_rate_option,
    segments_option,
    table_item_count,
)
from saga_index_cli.signals.snapshot_file import check_writable, load_snapshot, write_snapshot


@click.command("verify")
@click.option(
    "--sample",
    type=click.IntRange(0, 100_000),
    default=DEFAULT_SAMPLE,
    show_default=True,
    help="Persons whose by-person reads are compared (0: enumerations only).",
)
@click.option("--seed", type=int, default=None, help="Seed of the person sample (reproducible).")
@json_option
@click.option(
    "--snapshot",
    "snapshot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Record this run's read results to FILE (an existing FILE only with --overwrite).",
)
@overwrite_option
@click.option(
    "--compare",
    "compare_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also compare this run's results with a snapshot FILE (its persons are the sample).",
)
@click.option(
    "--recheck-delay",
    type=FiniteFloatRange(0, 300),
    default=DEFAULT_RECHECK_DELAY_SECONDS,
    show_default=True,
    help="Seconds to wait before re-checking mismatches once (GSI propagation).",
)
@scan_rate_option
@segments_option
@click.pass_context
def verify_command(
    ctx: click.Context,
    sample: int,
    seed: int | None,
    as_json: bool,
    snapshot_path: Path | None,
    compare_path: Path | None,
    overwrite: bool,
    recheck_delay: float,
    scan_rate: float,
    segments: int,
) -> None:
    """Parity: the repository's reads against the base table's truth.

    The reads follow the control record's routing, or, with --phase/--shards, what a reader in
    that phase would read.

    Reads every saga row of the base table (consistent, rate-limited parallel Scan), then
    get_all_sagas, get_all_open_sagas and get_sagas_by_person for a sample of persons, and
    reports rows missing from a read, extra in a read, and misrouted rows, by table key.
    Mismatches are re-checked once after --recheck-delay seconds before they count.

    --snapshot FILE records the results (e.g. before the migration), even when parity fails
    (the exit code says so); --compare FILE checks the current results against it (the same
    persons). A difference the base table explains (a saga
    opened, closed or moved since) is listed as `changed` and is not a mismatch.

    --json prints one object with ok, missing, extra, misrouted, changed, counts, reads,
    persons, seed and recheck.

    Progress goes to stderr (stdout stays the report): the scan (rows scanned, rows/s, an
    ETA), then the repository's reads (reads done of all); a live bar on a terminal, else a
    log line every 10 s. The ETA's total is the table's ItemCount (DescribeTable), which
    DynamoDB updates about every six hours: approximate. Without one (no count yet,
    DescribeTable refused) the scan shows rows and rows/s without an ETA.

    Exit 0 identical, 1 mismatch, 2 bad usage or an unreadable/unsuitable snapshot file (an
    existing --snapshot FILE without --overwrite), 4 DynamoDB could not be reached, refused
    the call or does not support it (the message names the operation).
    """
    cli: CliContext = ctx.find_object(CliContext)  # type: ignore[assignment]
    if snapshot_path is not None and compare_path is not None:
        raise click.UsageError("--snapshot and --compare are mutually exclusive", ctx=ctx)
    snapshot: Snapshot | None = None
    if compare_path is not None:
        for name in ("sample", "seed"):
            source = ctx.get_parameter_source(name)
            if source is not None and source.name == "COMMANDLINE":
                raise click.UsageError(
                    f"--{name} cannot be combined with --compare: the snapshot's persons are "
                    "the sample",
                    ctx=ctx,
                )
        snapshot = load_snapshot(compare_path, cli.require_table())
    if snapshot_path is not None:
        check_writable(snapshot_path, overwrite=overwrite)
    elif overwrite:
        raise click.UsageError("--overwrite applies to --snapshot FILE only", ctx=ctx)
    if seed is None and snapshot is None:
        seed = random.SystemRandom().randrange(2**31)
    table = cli.require_table()
    verifier = ParityVerifier(
        cli.client,
        table,
        # The record's routing (or the --phase/--shards override's): every state, a re-shard's
        # included, is read as its readers read it.
        routing=cli.routing(),
        scan_options=ScanOptions(
            segments=segments, read_units_per_second=scan_rate, consistent_read=True
        ),
        recheck_delay_seconds=recheck_delay,
    )
    total = table_item_count(cli, table)
    with LiveProgress() as display:
        scan = ScanProgress(display, "base-table scan (consistent)", total=total, cap=scan_rate)
        scan.begin()
        reads = RepositoryReadsProgress(display, after=scan)
        run = verifier.verify(
            sample=sample, seed=seed, snapshot=snapshot, on_scan_page=scan, on_read=reads
        )
    written = None
    if snapshot_path is not None:
        write_snapshot(snapshot_path, run.snapshot, overwrite=overwrite)
        written = str(snapshot_path)
    if as_json:
        emit({**run.report.to_dict(), "snapshotWritten": written})
    else:
        _print_parity(run.report, written)
    raise click.exceptions.Exit(EXIT_CLEAN if run.report.ok else EXIT_FOUND)


def _print_parity(report: ParityReport, written: str | None) -> None:
    lines = [
        f"parity: table {report.table_name}, index {report.index_name}, "
        f"phase {report.phase.value}, N={report.shard_count}",
        f"  base-table saga rows: {report.truth_rows}",
        "  reads: " + ", ".join(f"{label}={count}" for label, count in report.read_counts.items()),
        f"  persons sampled: {len(report.persons)} (seed {report.seed})",
        f"  re-checked {report.rechecked} mismatch(es) after {report.recheck_delay_seconds:g} s; "
        f"{report.resolved_on_recheck} resolved",
    ]
    if report.snapshot_created_at:
        lines.append(f"  compared with the snapshot of {report.snapshot_created_at}")

    def describe(f: Finding) -> str:
        where = f"[{f.read.label}] " if f.read else ""
        return f"    {where}{f.key[0]} {f.key[1]} ({f.source}): {f.reason}"

    for title, findings in (
        ("missing", report.missing),
        ("extra", report.extra),
        ("misrouted", report.misrouted),
        ("changed since the snapshot (not a mismatch)", report.changed),
    ):
        lines.append(f"  {title}: {len(findings)}")
        lines.extend(describe(f) for f in findings)
    if written:
        lines.append(f"  snapshot written to {written}")
    lines.append("verdict: identical" if report.ok else "verdict: MISMATCH")
    click.echo("\n".join(lines))
