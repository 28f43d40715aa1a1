"""`saga-index drift`: count what is wrong now, against the control record's state (or a
--phase/--shards reader's)."""

from __future__ import annotations

import click

from saga_index.index import keys
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.store.dynamo import ScanOptions
from saga_index_cli.context import CliContext, describe_routing, pass_cli
from saga_index_cli.output import emit, json_option
from saga_index_cli.progress import LiveProgress
from saga_index_cli.signals import EXIT_CLEAN, EXIT_FOUND
from saga_index_cli.signals.scan import (
    IndexReadsProgress,
    ScanProgress,
    scan_rate_option,
    segments_option,
    table_item_count,
)


@click.command("drift")
@json_option
@scan_rate_option
@segments_option
@pass_cli
def drift_command(cli: CliContext, as_json: bool, scan_rate: float, segments: int) -> None:
    """Count what is wrong NOW: unexpected legacy/sharded rows, misrouted, unindexed, stray.

    Runs every check, including the rate-limited scan of the base table for saga rows missing
    from the index. Judged against the control record's state (its layouts), or, with
    --phase/--shards, against what a reader in that phase would read:

    \b
      unexpected legacy rows   saga rows on the legacy key while no layout of the state is
                               legacy (phase sharded), whatever their personId: no reader
                               reads that key, so no sweep sees those sagas
      unexpected sharded rows  rows on a shard key no layout of the state reads (any while
                               legacy; one outside 0..N-1 of the state's layouts; every key
                               above N is probed with one Limit-1 Query)
      misrouted rows           on a readable shard key that is not the person's key in any
                               layout of the state (mid-move, a row on its source key is not
                               yet moved, not misrouted)
      unindexed rows           no GSI4PK or GSI4SK: in no index partition
      stray rows               a GSI4PK that is neither the legacy key nor any shard key
      control record missing   the STATE item is gone while history exists (no override)
      open index missing/stray while the record's open index is `open` (the sweeps read it),
                               or `adding` once its writers' switch has settled
                               (effectiveAt plus the in-flight margin): open sagas it does
                               not hold under their person's OpenSagaPK, and rows in it (or
                               stamped) that are no open saga, on two reads a GSI lag apart;
                               each named with its repairCommand
      open index unstamped     in `adding` only: open sagas that carry no OpenSagaPK yet, the
                               open-index backfill's work left; counted, not drift (0 before
                               `open-index set open`, runbook O3)

    Rows whose personId cannot be routed (anomalous) on a key the state reads are counted but
    are not drift (readers return them; repair-anomaly fixes them); on a key no reader reads
    they are unexpected, as above.

    \b
    --json keys: phase, source, target, shardCount, healthy, findings, controlRecordMissing,
    legacyRows, shardedRows (raw), unexpectedLegacyRows, unexpectedShardedRows, misroutedRows,
    anomalousRows, unindexedRows, strayRows, rowsPerShard ({"<shard>": rows}), shardSkew
    (max / mean, 0 when no row is sharded), and up to 100 example rows per kind; openIndex
    (the open index compared, e.g. "adding(16)" or "open(16)"; null when none is),
    openIndexEntries, openIndexMissingRows, openIndexStrayRows, openIndexUnstampedRows,
    openIndexMissing, openIndexStray and openIndexUnstamped ({pk, reason, personId,
    repairCommand} each).

    Progress goes to stderr (stdout stays the report): the index reads (partitions read), then
    the scan (rows scanned, rows/s, an ETA); a live bar on a terminal, else a log line every
    10 s. The ETA's total is the table's ItemCount (DescribeTable), which DynamoDB updates
    about every six hours: approximate. Without one (no count yet, DescribeTable refused) the
    scan shows rows and rows/s without an ETA.

    Exit 0 healthy in the state, 1 drift (or a missing table), 2 bad usage; 4 could not
    complete: DynamoDB could not be reached, refused the call or does not support it, after
    its retries (the message names the endpoint and the operation): nothing was judged.
    """
    table = cli.require_table()
    options = ScanOptions(segments=segments, read_units_per_second=scan_rate)
    if cli.overridden:
        checker = DriftChecker(cli.client, table, routing=cli.routing(), scan_options=options)
    else:
        checker = DriftChecker(
            cli.client,
            table,
            state=cli.read_state(),
            scan_options=options,
            now=cli.now(),
            timing=cli.hooks.timing,
        )
    total = table_item_count(cli, table)
    with LiveProgress() as display:
        scan = ScanProgress(display, "base-table scan", total=total, cap=scan_rate)
        report = checker.check(
            scan_unindexed=True,
            on_index_read=IndexReadsProgress(display, then=scan),
            on_scan_page=scan,
        )
        scan.finish()
    if as_json:
        emit(report.to_dict())
    else:
        _print_drift(report)
    raise click.exceptions.Exit(EXIT_CLEAN if report.healthy else EXIT_FOUND)


def _print_drift(report: DriftReport) -> None:
    lines = [
        f"drift report: table {report.table_name}, index {report.index_name}, "
        f"phase {report.phase.value} ({describe_routing(report.routing)}), "
        f"N={report.shard_count}",
        f"  legacy rows (GSI4PK = {keys.LEGACY_GSI4PK!r}):  {report.legacy_rows}",
        f"  sharded rows:                       {report.sharded_rows}",
        f"  unexpected legacy rows:             {report.unexpected_legacy_rows}",
        f"  unexpected sharded rows:            {report.unexpected_sharded_rows}",
        f"  misrouted rows:                     {report.misrouted_rows}",
        f"  unindexed rows (no GSI4PK/GSI4SK):  {report.unindexed_rows}",
        f"  stray rows (GSI4PK not a key):      {report.stray_rows}",
        f"  anomalous on read keys (not drift): {report.anomalous_rows}",
        f"  saga rows in the base table:        {report.scanned_saga_rows}",
        f"  open index ({report.open_index.index if report.open_index else 'not compared'}): "
        f"{report.open_index_missing_rows} missing, {report.open_index_stray_rows} stray, "
        f"{report.open_index_unstamped_rows} unstamped (adding: not drift)",
        f"  shard skew (max / mean):            {report.shard_skew:.2f}",
        "  rows per shard: "
        + " ".join(f"{n}:{count}" for n, count in sorted(report.rows_per_shard.items())),
    ]
    if report.control_record_missing:
        lines.append(f"  control record: MISSING (history ends at version {report.record_version})")
    summary = report.to_dict()
    for title in ("openIndexMissing", "openIndexStray"):  # unstamped: the backfill stamps them
        for row in summary[title]:
            lines.append(f"  {title}: {row['pk']}: {row['reason']}")
            if row["repairCommand"]:
                lines.append(f"    {row['repairCommand']}")
    for title, refs in (
        ("unexpected legacy", report.unexpected_legacy),
        ("unexpected sharded", report.unexpected_sharded),
        ("misrouted", report.misrouted),
        ("unindexed", report.unindexed),
        ("stray", report.stray),
    ):
        for ref in refs:
            where = f" (should be {ref.expected_gsi4pk})" if ref.expected_gsi4pk else ""
            lines.append(
                f"  {title}: {ref.pk} personId={ref.person_id!r} GSI4PK={ref.gsi4pk!r}{where}"
            )
    findings = report.findings()
    if findings:
        lines.append(f"verdict: DRIFT ({len(findings)} finding(s))")
        lines.extend(f"  - {finding}" for finding in findings)
    else:
        lines.append(f"verdict: healthy in phase {report.phase.value}")
    click.echo("\n".join(lines))
