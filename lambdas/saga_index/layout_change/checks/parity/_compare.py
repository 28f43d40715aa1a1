"""Parity's judgement of the reads against the base table: which rows a read misses, which it
returns that it should not, which sit where their person's read never looks, and why each.
The findings: docs/observability.md, "The CLI" (`saga-index verify`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga_index.index import InvalidKeyError, keys
from saga_index.layout_change.checks import Expectations
from saga_index.layout_change.checks.parity._report import (
    CHANGED,
    EXTRA,
    MISROUTED,
    MISSING,
    SOURCE_SNAPSHOT,
    Finding,
)
from saga_index.layout_change.checks.parity._snapshot import (
    CHECK_OPEN,
    CHECK_PERSON,
    Read,
    Snapshot,
    TableKey,
)

# Base-table rows, and each read's result, by table key.
Rows = Mapping[TableKey, Mapping[str, Any]]


class BaseTableComparison:
    """Compares the reads of one routing (`expect`) with the base table's saga rows."""

    def __init__(self, expect: Expectations) -> None:
        self.expect = expect
        self.phase = expect.routing.phase
        self._readable = expect.readable()

    def findings(
        self, truth: Rows, results: Mapping[Read, Rows], reads: list[Read]
    ) -> list[Finding]:
        """Misrouted rows (from the whole table), then each read's missing and extra rows."""
        findings: list[Finding] = []
        misrouted: set[TableKey] = set()
        for key in sorted(truth):
            row = truth[key]
            expected = self._expected_shard_key(row)
            if expected is not None and expected != row.get("GSI4PK"):
                misrouted.add(key)
                findings.append(
                    Finding.of(
                        MISROUTED,
                        key,
                        row,
                        f"under {row.get('GSI4PK')!r}, which is not the person's key in any "
                        f"layout of phase {self.phase.value} (writers stamp {expected!r})",
                        expected_gsi4pk=expected,
                    )
                )
        for read in reads:
            actual = results[read]
            expected_keys = {k for k, row in truth.items() if read.qualifies(row)}
            for key in sorted(expected_keys - actual.keys()):
                if read.check == CHECK_PERSON and key in misrouted:
                    continue  # reported once, as misrouted
                row = truth[key]
                findings.append(
                    Finding.of(MISSING, key, row, self._why_missing(row, read), read=read)
                )
            for key in sorted(actual.keys() - expected_keys):
                item = actual[key]
                reason = _why_extra(truth.get(key), item, read)
                findings.append(Finding.of(EXTRA, key, item, reason, read=read))
        return findings

    def _expected_shard_key(self, row: Mapping[str, Any]) -> str | None:
        """The key writers stamp on the row's person when the row sits under a shard key the
        routing reads that is not the person's key in any of its layouts; else None."""
        gsi4pk = row.get("GSI4PK")
        if not keys.is_sharded_gsi4pk(gsi4pk) or not isinstance(row.get("GSI4SK"), str):
            return None
        if gsi4pk not in self._readable or keys.person_anomaly(row) is not None:
            # Unread keys are `missing` (with the reason); unroutable rows are anomalies.
            return None
        person = row["personId"]
        if gsi4pk in self.expect.person_keys(person):
            return None
        return self.expect.routing.write_key(person)

    def _why_missing(self, row: Mapping[str, Any], read: Read) -> str:
        gsi4pk, gsi4sk = row.get("GSI4PK"), row.get("GSI4SK")
        if not isinstance(gsi4pk, str) or not isinstance(gsi4sk, str):
            return "no GSI4PK or no GSI4SK: the row is in no index partition"
        try:
            shard_number = keys.parse_gsi4pk(gsi4pk)
        except InvalidKeyError:
            return f"GSI4PK {gsi4pk!r} is not a key any reader reads"
        if shard_number is None and not self.expect.reads_legacy:
            return f"on the legacy key, which phase {self.phase.value} does not read"
        if shard_number is not None and not any(
            layout.is_sharded for layout in self.expect.layouts
        ):
            return f"on a shard key, which phase {self.phase.value} does not read"
        if shard_number is not None and gsi4pk not in self._readable:
            return f"under shard {shard_number}, outside the {self.expect.shard_count} shards read"
        if read.check == CHECK_PERSON:
            try:
                sort_person = keys.parse_gsi4sk(gsi4sk).person_id
            except InvalidKeyError:
                sort_person = None
            if sort_person != read.person_id:
                return f"GSI4SK {gsi4sk!r} does not name person {read.person_id!r}"
        return "in the base table but not returned by the read"


def _why_extra(truth_row: Mapping[str, Any] | None, item: Mapping[str, Any], read: Read) -> str:
    if not is_saga_key(keys.table_key_of(item)):
        return "not a saga row (table key is not RSAGA#<id> / META) but under the saga index"
    if truth_row is None:
        return "returned by the index but not in the base table"
    if read.check == CHECK_OPEN:
        return f"state is {truth_row.get('state')!r} in the base table, not an open state"
    if read.check == CHECK_PERSON:
        return f"belongs to person {truth_row.get('personId')!r} in the base table"
    return "returned by the read but not a saga in the base table"


def is_saga_key(key: TableKey) -> bool:
    """Whether `key` is a saga row's table key (RSAGA#<id> / META)."""
    try:
        keys.parse_saga_table_key(*key)
    except InvalidKeyError:
        return False
    return True


# --- Parity against a snapshot (the ADR's "identical to pre-migration"): what each read returns
# now against what it returned then; a difference the base table explains (a saga opened,
# closed or moved since) is changed, not a mismatch


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
