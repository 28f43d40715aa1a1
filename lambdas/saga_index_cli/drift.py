"""`saga-index drift`, `saga-index verify`: two of ADR-0085's three "done" signals (the third,
`watch`, is watch.py).

Each prints a human report (or, with --json, ONE JSON object) on stdout and exits 0 when the
signal is clean and 1 when it is not; bad usage and unreadable snapshot files exit 2.

`drift` and `verify` scan the whole base table at a capped rate (hours on a big table): they show
their progress on stderr, never on stdout (saga_index_cli.progress: a live bar per step on a
terminal, a log line every PROGRESS_LOG_SECONDS otherwise). The scan's ETA is measured against
the table's ItemCount from DescribeTable, which DynamoDB updates about every six hours, so it is
approximate; without an ItemCount the scan shows rows and rows/s and no ETA.
"""

from __future__ import annotations

import json
import logging
import os
import random
import tempfile
from pathlib import Path

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import keys, names
from saga_index.index.errors import InvalidInputError, SagaIndexError
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.layout_change.checks.parity import (
    DEFAULT_RECHECK_DELAY_SECONDS,
    DEFAULT_SAMPLE,
    Finding,
    ParityReport,
    ParityVerifier,
)
from saga_index.layout_change.checks.parity_snapshot import Snapshot
from saga_index.store.dynamo.scan import PageRead, ScanOptions
from saga_index_cli.context import (
    CliContext,
    FiniteFloatRange,
    describe_routing,
    emit,
    is_table_missing,
    json_option,
    pass_cli,
)
from saga_index_cli.progress import LiveProgress, ProgressStep

log = logging.getLogger("saga_index.cli")

EXIT_CLEAN, EXIT_FOUND = 0, 1

_scan_rate = click.option(
    "--scan-rate",
    type=FiniteFloatRange(min=1, max=40_000),
    default=400.0,
    show_default=True,
    help="Read capacity units per second the base-table scan may use (average).",
)
_segments = click.option(
    "--segments",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Parallel Scan segments.",
)


# ---- progress of the scans --------------------------------------------------------------------


def table_item_count(cli: CliContext, table: str) -> int | None:
    """The table's ItemCount (DescribeTable): the base-table scan's total for an ETA.

    Approximate: DynamoDB updates it about every six hours. None (no ETA) when DynamoDB reports
    no count or 0, or refuses the call (a warning says why); a missing table is raised, as the
    command's own reads would meet it.
    """
    try:
        count = cli.client.describe_table(TableName=table)["Table"].get("ItemCount")
    except ClientError as err:
        if is_table_missing(err):
            raise
        log.warning("no ETA for the base-table scan: DescribeTable of %r failed: %s", table, err)
        return None
    except BotoCoreError as err:
        log.warning("no ETA for the base-table scan: DescribeTable of %r failed: %s", table, err)
        return None
    if not isinstance(count, int) or count <= 0:
        log.info("no ETA for the base-table scan: DescribeTable reports no item count yet")
        return None
    log.info(
        "the base-table scan's ETA is reckoned against the table's ItemCount, about %d items "
        "(DescribeTable; DynamoDB updates it about every six hours, so the ETA is approximate)",
        count,
    )
    return int(count)


class ScanProgress:
    """The base-table scan as a progress step: items DynamoDB examined (what ItemCount counts)
    of the table's ItemCount, the saga rows among them and the read units spent. The step
    starts at `begin()` (or the first page); the scanner calls it one page at a time."""

    def __init__(self, display: LiveProgress, label: str, *, total: int | None, cap: float) -> None:
        self._display = display
        self._label = label
        self._total = total
        self._cap = cap
        self._step: ProgressStep | None = None
        self.scanned = 0
        self.rows = 0
        self.read_units = 0.0

    def begin(self) -> ProgressStep:
        if self._step is None:
            self._step = self._display.step(
                self._label, total=self._total, unit="rows", approximate=True
            )
        return self._step

    def __call__(self, page: PageRead) -> None:
        step = self.begin()
        self.scanned += page.scanned
        self.rows += page.rows
        self.read_units += page.read_units
        step.update(
            completed=self.scanned,
            detail=f"{self.rows:,} saga rows, {self.read_units:,.0f} RCU spent "
            f"(cap {self._cap:g}/s)",
        )

    def finish(self) -> None:
        if self._step is not None:
            self._step.finish()


class IndexReadsProgress:
    """Drift's index reads (the legacy key's COUNT, then each partition) as a progress step."""

    def __init__(self, display: LiveProgress, then: ScanProgress) -> None:
        self._step = display.step("index reads", total=None, unit="partitions")
        self._then = then

    def __call__(self, done: int, total: int) -> None:
        self._step.update(completed=done, total=total)
        if done == total:
            self._step.finish()
            self._then.begin()


class RepositoryReadsProgress:
    """Verify's repository reads (all-sagas, open-sagas, one per sampled person) as a progress
    step, started when the reads start (the scan before them then ends)."""

    def __init__(self, display: LiveProgress, *, after: ScanProgress) -> None:
        self._display = display
        self._after = after
        self._step: ProgressStep | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._step is None:
            self._after.finish()
            self._step = self._display.step("repository reads", total=total, unit="reads")
        self._step.update(completed=done, total=total)
        if done == total:
            self._step.finish()


# ---- drift ------------------------------------------------------------------------------------


@click.command("drift")
@json_option
@_scan_rate
@_segments
@pass_cli
def drift_command(cli: CliContext, as_json: bool, scan_rate: float, segments: int) -> None:
    """Count what is wrong NOW: unexpected legacy/sharded rows, misrouted, unindexed, stray.

    Runs every check, including the rate-limited scan of the base table for saga rows missing
    from the index. Judged against the control record's state (its layouts), or, with
    --phase/--shards, against what a reader in that phase would read:

    \b
      unexpected legacy rows   saga rows with a usable personId on the legacy key while no
                               layout of the state is legacy (phase sharded)
      unexpected sharded rows  rows on a shard key no layout of the state reads (any while
                               legacy; one outside 0..N-1 of the state's layouts)
      misrouted rows           on a readable shard key that is not the person's key in any
                               layout of the state (mid-move, a row on its source key is not
                               yet moved, not misrouted)
      unindexed rows           no GSI4PK or GSI4SK: in no index partition
      stray rows               GSI4PK outside the legacy key and the N shard keys
      control record missing   the STATE item is gone while history exists (no override)

    Rows whose personId cannot be routed (anomalous) are counted but are not drift.

    \b
    --json keys: phase, source, target, shardCount, healthy, findings, controlRecordMissing,
    legacyRows, shardedRows (raw), unexpectedLegacyRows, unexpectedShardedRows, misroutedRows,
    anomalousRows, unindexedRows, strayRows, rowsPerShard ({"<shard>": rows}), shardSkew
    (max / mean, 0 when no row is sharded), and up to 100 example rows per kind.

    Progress goes to stderr (stdout stays the report): the index reads (partitions read), then
    the scan (rows scanned, rows/s, an ETA); a live bar on a terminal, else a log line every
    10 s. The ETA's total is the table's ItemCount (DescribeTable), which DynamoDB updates
    about every six hours: approximate. Without one (no count yet, DescribeTable refused) the
    scan shows rows and rows/s without an ETA.

    Exit 0 healthy in the state, 1 drift, 2 bad usage; a read that fails after retries also
    exits 1 with the error on stderr.
    """
    table = cli.require_table()
    options = ScanOptions(segments=segments, read_units_per_second=scan_rate)
    if cli.overridden:
        checker = DriftChecker(cli.client, table, routing=cli.routing(), scan_options=options)
    else:
        checker = DriftChecker(cli.client, table, state=cli.read_state(), scan_options=options)
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
        f"  stray rows (GSI4PK outside 0..N-1): {report.stray_rows}",
        f"  anomalous personIds (not drift):    {report.anomalous_rows}",
        f"  saga rows in the base table:        {report.scanned_saga_rows}",
        f"  shard skew (max / mean):            {report.shard_skew:.2f}",
        "  rows per shard: "
        + " ".join(f"{n}:{count}" for n, count in sorted(report.rows_per_shard.items())),
    ]
    if report.control_record_missing:
        lines.append(f"  control record: MISSING (history ends at version {report.record_version})")
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


# ---- verify -----------------------------------------------------------------------------------


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
    help="Record this run's read results to FILE (never overwrites).",
)
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
@_scan_rate
@_segments
@click.pass_context
def verify_command(
    ctx: click.Context,
    sample: int,
    seed: int | None,
    as_json: bool,
    snapshot_path: Path | None,
    compare_path: Path | None,
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

    Exit 0 identical, 1 mismatch, 2 bad usage or an unreadable/unsuitable snapshot file.
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
        snapshot = _load_snapshot(compare_path, cli.require_table())
    if snapshot_path is not None:
        _check_writable(snapshot_path)
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
        _write_snapshot(snapshot_path, run.snapshot)
        written = str(snapshot_path)
    if as_json:
        emit({**run.report.to_dict(), "snapshotWritten": written})
    else:
        _print_parity(run.report, written)
    raise click.exceptions.Exit(EXIT_CLEAN if run.report.ok else EXIT_FOUND)


def _load_snapshot(path: Path, table_name: str) -> Snapshot:
    """The snapshot at `path`, refused (exit 2) before any read unless it parses and was taken
    of this table and index."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InvalidInputError(f"cannot read snapshot {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"snapshot {path} is not UTF-8 text: {err}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise InvalidInputError(f"snapshot {path} is not valid JSON: {err}") from None
    try:
        return Snapshot.from_document(document).require_taken_of(table_name, names.INDEX_NAME)
    except InvalidInputError as err:
        raise InvalidInputError(f"snapshot {path}: {err}") from None


def _check_writable(path: Path) -> None:
    """Fail before any read: never overwrite a snapshot (it may be the pre-migration baseline)."""
    if path.exists():
        raise InvalidInputError(
            f"snapshot {path} already exists: refusing to overwrite it; choose another FILE"
        )
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InvalidInputError(f"cannot write snapshot {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK):
        raise InvalidInputError(f"cannot write snapshot {path}: {parent} is not writable")


def _write_snapshot(path: Path, snapshot: Snapshot) -> None:
    """Written whole or not at all: a temporary file in the same directory, linked into place
    (link fails instead of replacing a file that appeared meanwhile)."""
    parent = path.parent if str(path.parent) else Path(".")
    data = json.dumps(snapshot.to_document(), indent=2, sort_keys=True, ensure_ascii=False)
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, before the link
            "w", encoding="utf-8", dir=parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        )
    except OSError as err:
        raise SagaIndexError(f"cannot write snapshot {path}: {err}") from None
    try:
        with handle:
            handle.write(data + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.link(handle.name, path)
    except FileExistsError:
        raise InvalidInputError(
            f"snapshot {path} appeared while verifying: refusing to overwrite it"
        ) from None
    except OSError as err:
        raise SagaIndexError(f"cannot write snapshot {path}: {err}; nothing was written") from None
    finally:
        Path(handle.name).unlink(missing_ok=True)
    log.info("snapshot written to %s", path)


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
