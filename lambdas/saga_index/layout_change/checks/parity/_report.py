"""What one parity run reports: each finding (missing, extra, misrouted; changed since a
snapshot) by table key, and the re-check that confirmed them (docs/observability.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.layout_change.checks.parity._snapshot import Read, Snapshot, TableKey
from saga_index.layout_change.record import Phase

MISSING, EXTRA, MISROUTED, CHANGED = "missing", "extra", "misrouted", "changed"
SOURCE_TABLE, SOURCE_SNAPSHOT = "base-table", "snapshot"


@dataclass(frozen=True)
class Finding:
    kind: str
    key: TableKey
    reason: str
    read: Read | None = None
    source: str = SOURCE_TABLE
    saga_id: Any = None
    person_id: Any = None
    gsi4pk: Any = None
    expected_gsi4pk: str | None = None

    @classmethod
    def of(
        cls,
        kind: str,
        key: TableKey,
        row: Mapping[str, Any] | None,
        reason: str,
        *,
        read: Read | None = None,
        source: str = SOURCE_TABLE,
        expected_gsi4pk: str | None = None,
    ) -> Finding:
        """The finding about the row at `key`, naming what `row` (if any) holds."""
        row = row or {}
        return cls(
            kind=kind,
            key=key,
            reason=reason,
            read=read,
            source=source,
            saga_id=row.get("sagaId"),
            person_id=row.get("personId"),
            gsi4pk=row.get("GSI4PK"),
            expected_gsi4pk=expected_gsi4pk,
        )

    @property
    def identity(self) -> tuple[str, str, str, TableKey]:
        return (self.kind, self.source, self.read.label if self.read else "", self.key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "PK": self.key[0],
            "SK": self.key[1],
            "sagaId": self.saga_id,
            "personId": self.person_id,
            "gsi4pk": self.gsi4pk,
            "reason": self.reason,
            "source": self.source,
        }
        if self.read is not None:
            out["read"] = self.read.label
        if self.expected_gsi4pk is not None:
            out["expectedGsi4pk"] = self.expected_gsi4pk
        return out


@dataclass(frozen=True)
class ParityReport:
    table_name: str
    index_name: str
    phase: Phase
    shard_count: int
    persons: tuple[str, ...]
    seed: int | None
    truth_rows: int
    read_counts: Mapping[str, int]
    missing: tuple[Finding, ...]
    extra: tuple[Finding, ...]
    misrouted: tuple[Finding, ...]
    changed: tuple[Finding, ...] = ()
    rechecked: int = 0
    resolved_on_recheck: int = 0
    recheck_delay_seconds: float = 0.0
    snapshot_created_at: str | None = None

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.misrouted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "table": self.table_name,
            "index": self.index_name,
            "phase": self.phase.value,
            "shardCount": self.shard_count,
            "truthRows": self.truth_rows,
            "reads": dict(self.read_counts),
            "persons": list(self.persons),
            "seed": self.seed,
            "counts": {
                MISSING: len(self.missing),
                EXTRA: len(self.extra),
                MISROUTED: len(self.misrouted),
                CHANGED: len(self.changed),
            },
            MISSING: [f.to_dict() for f in self.missing],
            EXTRA: [f.to_dict() for f in self.extra],
            MISROUTED: [f.to_dict() for f in self.misrouted],
            CHANGED: [f.to_dict() for f in self.changed],
            "recheck": {
                "rechecked": self.rechecked,
                "resolved": self.resolved_on_recheck,
                "delaySeconds": self.recheck_delay_seconds,
            },
            "comparedWithSnapshot": self.snapshot_created_at,
        }


@dataclass(frozen=True)
class ParityRun:
    report: ParityReport
    snapshot: Snapshot  # the results of this run, ready to be recorded
