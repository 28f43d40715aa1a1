"""The drift guard's base-table scan (every K-th run): saga rows no index read sees, either with
no index key (unindexed) or under a GSI4PK no every-run read reaches (stray); and, while the
open-saga index is `open`, the rows its comparison needs (_open_check)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from saga_index.index import MAX_SHARD_COUNT, keys
from saga_index.layout_change.checks.drift._open_check import OpenIndexWatch
from saga_index.layout_change.checks.drift._report import DriftReport, ScanFinding
from saga_index.store.dynamo import PageListener, SagaTableScanner


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
) -> DriftReport:
    """`report` with the scan's findings (ScanIncompleteError when it passes `deadline`), and
    with `watch`, the open index's (its keys read before the scan, KeyReadIncompleteError when
    they pass `deadline`)."""
    watched = {
        keys.LEGACY_GSI4PK,
        *keys.all_shard_gsi4pks(MAX_SHARD_COUNT)[: probed_up_to(report.shard_count)],
    }
    unindexed = ScanFinding()
    stray = ScanFinding()
    if watch is not None:
        watch.read_index()

    def visit(item: dict[str, Any]) -> None:
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

    stats = scanner.scan_each(visit, deadline=deadline, on_page=on_page)
    return replace(
        report,
        unindexed_rows=unindexed.count,
        stray_rows=stray.count,
        scanned_saga_rows=stats.rows,
        unindexed=unindexed.sample(),
        stray=stray.sample(),
        requests=report.requests + stats.requests,
        open_index=None if watch is None else watch.findings(),
    )
