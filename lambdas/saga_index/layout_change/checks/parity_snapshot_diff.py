"""Parity against a snapshot (the ADR's "identical to pre-migration"): what each read returns now
against what it returned then. A difference the base table explains (a saga opened, closed or
moved since) is `changed`, not a mismatch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga_index.layout_change.checks.parity_compare import Rows
from saga_index.layout_change.checks.parity_report import (
    CHANGED,
    EXTRA,
    MISSING,
    SOURCE_SNAPSHOT,
    Finding,
)
from saga_index.layout_change.checks.parity_snapshot import Read, Snapshot


def compare_with_snapshot(
    truth: Rows,
    results: Mapping[Read, Rows],
    reads: list[Read],
    snapshot: Snapshot,
    findings: list[Finding],
) -> list[Finding]:
    """The findings of `reads` against `snapshot`, leaving out a row `findings` (the run's against
    the base table) already reports as missing or extra for the same read."""
    seen = {(f.kind, f.read, f.key) for f in findings}
    out: list[Finding] = []
    for read in reads:
        before = snapshot.results.get(read, frozenset())
        now = set(results[read])
        for key in sorted(before - now):
            row = truth.get(key)
            if row is None:
                reason = "returned at the snapshot; no longer in the base table"
                out.append(
                    Finding.of(MISSING, key, None, reason, read=read, source=SOURCE_SNAPSHOT)
                )
            elif read.qualifies(row):
                if (MISSING, read, key) not in seen:
                    reason = "returned at the snapshot and still qualifies; not returned now"
                    out.append(
                        Finding.of(MISSING, key, row, reason, read=read, source=SOURCE_SNAPSHOT)
                    )
            else:
                reason = f"no longer qualifies in the base table: {_describe(row)}"
                out.append(Finding.of(CHANGED, key, row, reason, read=read, source=SOURCE_SNAPSHOT))
        for key in sorted(now - before):
            row = truth.get(key)
            if row is not None and read.qualifies(row):
                reason = "new or changed since the snapshot; the base table agrees"
                out.append(Finding.of(CHANGED, key, row, reason, read=read, source=SOURCE_SNAPSHOT))
            elif (EXTRA, read, key) not in seen:
                item = results[read][key]
                reason = "not returned at the snapshot, and the base table does not agree"
                out.append(Finding.of(EXTRA, key, item, reason, read=read, source=SOURCE_SNAPSHOT))
    return out


def _describe(row: Mapping[str, Any]) -> str:
    return f"state {row.get('state')!r}, personId {row.get('personId')!r}"
