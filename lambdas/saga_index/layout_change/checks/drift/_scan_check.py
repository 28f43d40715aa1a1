"""The drift guard's base-table scan (every K-th run): saga rows no index read sees, either with
no index key (unindexed) or under a GSI4PK that is no key at all or a shard key no every-run read
reaches (stray); and, while the open-saga index is compared (`open`, or `adding` once settled),
the rows its comparison needs (_open_check).

With the guard's cursor (`progress`), a scan that does not fit one run stops at its deadline at
a page's end, the cursor holding where each segment stopped and what was counted before, and the
next run resumes it (ScanStopped); only the run that reaches every segment's end reports the
scan's counts, each row counted once: a page is either read before the cut (counted, and its
segment resumes after it) or after it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from saga_index.index import MAX_SHARD_COUNT, keys
from saga_index.layout_change.checks.drift._open_check import OpenIndexFindings, OpenIndexWatch
from saga_index.layout_change.checks.drift._report import DriftReport, ScanFinding
from saga_index.layout_change.checks.drift._scan_cursor import (
    CURSOR_SAMPLE_LIMIT,
    Found,
    ScanProgress,
)
from saga_index.store.dynamo import PageListener, SagaTableScanner, ScanIncompleteError

if TYPE_CHECKING:
    from saga_index.layout_change.checks.drift._cursor import DriftCursor
    from saga_index.layout_change.record import OpenIndex

log = logging.getLogger(__name__)


class ScanStopped(Exception):
    """The scan met the run's deadline: `progress` holds where it stands; no count is reported."""

    def __init__(self, progress: ScanProgress) -> None:
        self.progress = progress
        done = sum(progress.done)
        super().__init__(f"{done} of {progress.segments} scan segment(s) read to their end")


def probed_up_to(shard_count: int) -> int:
    """The every-run reads reach the shard keys below this: the state's N and the 3N keys of
    the next two splits."""
    return min(4 * shard_count, MAX_SHARD_COUNT)


def with_scan(
    scanner: SagaTableScanner,
    report: DriftReport,
    deadline: float | None,
    on_page: PageListener | None,
    watch: OpenIndexWatch | None = None,
    progress: ScanProgress | None = None,
    clock: Callable[[], float] | None = None,
) -> DriftReport:
    """`report` with the scan's findings, and with `watch`, the open index's (its keys read
    before the scan, KeyReadIncompleteError when they pass `deadline`). Without `progress`, a
    scan that passes `deadline` is ScanIncompleteError; with it, ScanStopped (the progress
    saved by the caller resumes it), and the scan stops early enough for the open index's
    re-check to fit before `deadline` (as long again as its first read took: `clock`)."""
    watched = {
        keys.LEGACY_GSI4PK,
        *keys.all_shard_gsi4pks(MAX_SHARD_COUNT)[: probed_up_to(report.shard_count)],
    }
    carried = progress.found if progress is not None else None
    unindexed = ScanFinding() if carried is None else _resumed(carried["unindexed"])
    stray = ScanFinding() if carried is None else _resumed(carried["stray"])
    began = progress is not None and progress.begun
    scan_deadline = deadline
    if watch is not None:
        started = clock() if clock is not None else 0.0
        watch.read_index()
        if progress is not None and deadline is not None and clock is not None:
            scan_deadline = deadline - (clock() - started) - watch.recheck_delay_seconds
    rows = 0

    def visit(item: dict[str, Any]) -> None:
        nonlocal rows
        rows += 1
        if watch is not None:
            watch.visit(item)
        gsi4pk, gsi4sk = item.get("GSI4PK"), item.get("GSI4SK")
        if not isinstance(gsi4pk, str) or not isinstance(gsi4sk, str):
            # DynamoDB indexes a row only when both key attributes are present strings.
            unindexed.add(item)
        elif gsi4pk not in watched:
            # No key at all, or a shard key no every-run read reaches (at or above 4N; the
            # keys below were counted by the every-run reads: _beyond).
            stray.add(item)

    try:
        stats = scanner.scan_each(
            visit, deadline=scan_deadline, on_page=on_page, positions=progress
        )
    except ScanIncompleteError as stopped:
        if progress is None:
            raise
        _carry(progress, rows, stopped.read_units, unindexed, stray, watch, whole=False)
        raise ScanStopped(progress) from stopped
    open_index = None
    if progress is None:
        open_index = None if watch is None else watch.findings()
    else:
        _carry(progress, rows, stats.read_units, unindexed, stray, watch, whole=not began)
        open_index = None if watch is None else _open_findings(watch, progress)
    return replace(
        report,
        unindexed_rows=unindexed.count,
        stray_rows=stray.count,
        scanned_saga_rows=stats.rows if progress is None else progress.rows,
        unindexed=unindexed.sample(),
        stray=stray.sample(),
        requests=report.requests + stats.requests,
        open_index=open_index,
    )


def _resumed(found: Found) -> ScanFinding:
    return ScanFinding(found.count, tuple(found.rows))


def _carry(
    progress: ScanProgress,
    rows: int,
    units: float,
    unindexed: ScanFinding,
    stray: ScanFinding,
    watch: OpenIndexWatch | None,
    *,
    whole: bool,
) -> None:
    """Into `progress`, what this run's part of the scan found (the open index's differences
    only after their re-check: none of its rows is kept across runs)."""
    progress.rows += rows
    progress.units += units
    if watch is not None:
        # Its re-check was reserved before the scan (as long as the first read took, and the
        # GSI lag); the scan may pass its own deadline by one page's wait for the scan's pace,
        # which the handler's margin absorbs: the re-check is not refused for that.
        watch.deadline = None
    for name, finding in (("unindexed", unindexed), ("stray", stray)):
        progress.found[name] = Found(finding.count, list(finding.sample()[:CURSOR_SAMPLE_LIMIT]))
    if watch is not None:
        found = watch.findings(whole_scan=whole)
        progress.found["openMissing"].add(found.missing_rows, list(found.missing))
        progress.found["openStray"].add(found.stray_rows, list(found.stray))
        progress.found["openUnstamped"].add(found.unstamped_rows, list(found.unstamped))


def _open_findings(watch: OpenIndexWatch, progress: ScanProgress) -> OpenIndexFindings:
    """The comparison's findings over every run of the scan (exact counts, the rows the cursor
    kept and this run's, in key order)."""
    missing, stray = progress.found["openMissing"], progress.found["openStray"]
    unstamped = progress.found["openUnstamped"]
    return OpenIndexFindings(
        index=watch.index,
        entries=len(watch.listed),
        missing_rows=missing.count,
        stray_rows=stray.count,
        missing=tuple(missing.rows[: watch.limit]),
        stray=tuple(stray.rows[: watch.limit]),
        unstamped_rows=unstamped.count,
        unstamped=tuple(unstamped.rows[: watch.limit]),
    )


def take_up_scan(
    cursor: DriftCursor | None, due: bool, segments: int, open_index: OpenIndex | None
) -> ScanProgress | None:
    """The scan this run reads with the guard's cursor: the one under way (when it was taken
    with these segments and this open index; else it starts over, saying so), or a new one
    when a scan is due (kept in the cursor from the start, so a run that does not reach the
    scan still leaves it for the next); None without a cursor or a scan to read. A scan due
    while one that earlier runs began is under way starts when that one completes: a scan
    longer than the interval is followed by the next at once, not at the next due run."""
    if cursor is None:
        return None
    judged_by = None if open_index is None else str(open_index)
    scan = cursor.scan
    if scan is not None and (scan.segments, scan.open_index) != (segments, judged_by):
        log.warning(
            "drift scan starts over: taken with %s segment(s) under open index %s; now %s "
            "segment(s), open index %s",
            scan.segments,
            scan.open_index,
            segments,
            judged_by,
        )
        scan = None
    if scan is None and (due or cursor.scan is not None):
        scan = ScanProgress.fresh(segments, judged_by)
    elif scan is not None and due and scan.begun:
        scan.again = True
    cursor.scan = scan
    return scan
