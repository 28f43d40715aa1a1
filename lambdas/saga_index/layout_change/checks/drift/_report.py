"""What one drift run reports: raw counts, what is wrong now in the report's routing, and up
to SAMPLE_LIMIT named rows per finding (the metrics it becomes: docs/observability.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.index import keys
from saga_index.layout_change.checks import RowRef, Verdict
from saga_index.layout_change.checks.drift._open_check import (
    OpenIndexFindings,
    difference_to_dict,
)
from saga_index.layout_change.record import Phase, Routing

SAMPLE_LIMIT = 100  # rows listed per finding in a report; the counts are always exact


@dataclass(frozen=True)
class DriftReport:
    """Raw counts (legacy_rows, rows_per_shard) and what is wrong now in the report's routing."""

    table_name: str
    index_name: str
    routing: Routing
    shard_count: int
    legacy_rows: int
    rows_per_shard: dict[int, int]
    misrouted_rows: int
    anomalous_rows: int
    unexpected_legacy_rows: int = 0
    unexpected_sharded_rows: int = 0
    control_record_missing: bool = False
    # The version whose history item the routing came from when the STATE item is missing.
    record_version: int | None = None
    misrouted: tuple[RowRef, ...] = ()
    unexpected_legacy: tuple[RowRef, ...] = ()
    unexpected_sharded: tuple[RowRef, ...] = ()
    # None when this run did not scan the base table.
    unindexed_rows: int | None = None
    stray_rows: int | None = None
    scanned_saga_rows: int | None = None
    unindexed: tuple[RowRef, ...] = ()
    stray: tuple[RowRef, ...] = ()
    requests: int = 0
    # What the paced index reads cost (ConsumedCapacity); the 3N Limit-1 probes of the keys
    # above N (0.5 read units each) aside.
    index_read_units: float = 0.0
    # The open-saga index against the base table (_open_check): a scanning run's, while the
    # record's open index is `open`, or `adding` once its writers' switch settled; None otherwise
    # (before that a difference proves nothing).
    open_index: OpenIndexFindings | None = None

    @property
    def phase(self) -> Phase:
        return self.routing.phase

    @property
    def scanned(self) -> bool:
        return self.unindexed_rows is not None

    @property
    def open_index_missing_rows(self) -> int | None:
        """Open sagas the open index does not hold under their person's key (in `adding`, only
        those the backfill does not explain: not the unstamped): a scanning run's count (0
        while it is not compared); None when the run did not scan."""
        if not self.scanned:
            return None
        return 0 if self.open_index is None else self.open_index.missing_rows

    @property
    def open_index_unstamped_rows(self) -> int | None:
        """In `adding`: open sagas without OpenSagaPK the index does not hold, the backfill's
        work left (expected, not drift); 0 in other states; None when the run did not scan."""
        if not self.scanned:
            return None
        return 0 if self.open_index is None else self.open_index.unstamped_rows

    @property
    def open_index_stray_rows(self) -> int | None:
        """Entries or stamps the open index must not have (closed sagas, gone rows); as above."""
        if not self.scanned:
            return None
        return 0 if self.open_index is None else self.open_index.stray_rows

    @property
    def sharded_rows(self) -> int:
        return sum(self.rows_per_shard.values())

    @property
    def shard_skew(self) -> float:
        """max / mean of rows per shard; 0.0 when no row is sharded (nothing to be skewed)."""
        return shard_skew(self.rows_per_shard, self.shard_count)

    def findings(self) -> list[str]:
        """What is wrong now, one sentence each; empty when healthy."""
        phase = self.phase.value
        out: list[str] = []
        if self.control_record_missing:
            out.append(
                f"the control record's STATE item is missing (history ends at version "
                f"{self.record_version}): readers read every layout that history names; restore "
                "the record from its history"
            )
        if self.unexpected_legacy_rows:
            out.append(
                f"{self.unexpected_legacy_rows} row(s) still carry the legacy GSI4PK "
                f"{keys.LEGACY_GSI4PK!r} in phase {phase}, where no reader reads it"
            )
        if self.unexpected_sharded_rows:
            where = (
                "where readers read only the legacy partition"
                if not self.routing.source.is_sharded and not self.routing.target.is_sharded
                else "under a shard key no reader of the state reads"
            )
            out.append(
                f"{self.unexpected_sharded_rows} row(s) carry a sharded GSI4PK in phase "
                f"{phase}, {where}"
            )
        if self.misrouted_rows:
            out.append(
                f"{self.misrouted_rows} row(s) sit under a shard key that is not their person's "
                f"key in any layout of phase {phase}: their person's by-person read never "
                "finds them"
            )
        if self.unindexed_rows:
            out.append(
                f"{self.unindexed_rows} saga row(s) have no GSI4PK or no GSI4SK: "
                "they are in no index partition, invisible to every read"
            )
        if self.stray_rows:
            out.append(
                f"{self.stray_rows} saga row(s) carry a GSI4PK that is neither the legacy key "
                "nor a shard key: no enumeration reads their partition"
            )
        return out + self._open_index_findings()

    def _open_index_findings(self) -> list[str]:
        found = self.open_index
        if found is None:
            return []
        out: list[str] = []
        repair = "repair each row with its repairCommand (saga-index ... repair-anomaly ...)"
        # In `adding` the sweeps still read GSI4: these rows would be wrong once they switch.
        miss, read = (
            ("would miss them once they read it", "would read them once they read it")
            if found.adding
            else ("miss them", "read them")
        )
        if found.missing_rows:
            out.append(
                f"{found.missing_rows} open saga(s) are not in the open index {found.index} "
                "under their person's OpenSagaPK, on two reads a GSI lag apart: the sweeps' "
                f"open-saga reads (getAllOpenSagas) {miss}; {repair}"
            )
        if found.stray_rows:
            out.append(
                f"{found.stray_rows} row(s) are in the open index {found.index} or carry "
                f"OpenSagaPK though they are no open saga: the sweeps {read}; {repair}"
            )
        return out

    @property
    def healthy(self) -> bool:
        return not self.findings()

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table_name,
            "index": self.index_name,
            "phase": self.phase.value,
            "source": str(self.routing.source),
            "target": str(self.routing.target),
            "shardCount": self.shard_count,
            "healthy": self.healthy,
            "findings": self.findings(),
            "controlRecordMissing": self.control_record_missing,
            "legacyRows": self.legacy_rows,
            "shardedRows": self.sharded_rows,
            "unexpectedLegacyRows": self.unexpected_legacy_rows,
            "unexpectedShardedRows": self.unexpected_sharded_rows,
            "misroutedRows": self.misrouted_rows,
            "anomalousRows": self.anomalous_rows,
            "unindexedRows": self.unindexed_rows,
            "strayRows": self.stray_rows,
            "scanned": self.scanned,
            "scannedSagaRows": self.scanned_saga_rows,
            "rowsPerShard": {str(n): count for n, count in sorted(self.rows_per_shard.items())},
            "shardSkew": round(self.shard_skew, 4),
            "misrouted": [ref.to_dict() for ref in self.misrouted],
            "unexpectedLegacy": [ref.to_dict() for ref in self.unexpected_legacy],
            "unexpectedSharded": [ref.to_dict() for ref in self.unexpected_sharded],
            "unindexed": [ref.to_dict() for ref in self.unindexed],
            "stray": [ref.to_dict() for ref in self.stray],
            "sampleLimit": SAMPLE_LIMIT,
            "requests": self.requests,
            "indexReadUnits": round(self.index_read_units, 1),
            **self._open_index_dict(),
        }

    def _open_index_dict(self) -> dict[str, Any]:
        found = self.open_index
        named = {
            "openIndexMissing": () if found is None else found.missing,
            "openIndexStray": () if found is None else found.stray,
            "openIndexUnstamped": () if found is None else found.unstamped,
        }
        return {
            "openIndex": None if found is None else str(found.index),
            "openIndexEntries": None if found is None else found.entries,
            "openIndexMissingRows": self.open_index_missing_rows,
            "openIndexStrayRows": self.open_index_stray_rows,
            "openIndexUnstampedRows": self.open_index_unstamped_rows,
            **{
                key: [difference_to_dict(self.table_name, d) for d in rows]
                for key, rows in named.items()
            },
        }


def shard_skew(rows_per_shard: Mapping[int, int], shard_count: int) -> float:
    total = sum(rows_per_shard.values())
    if total == 0:
        return 0.0
    mean = total / shard_count
    return max(rows_per_shard.values()) / mean


# --- What a drift run keeps of the rows it reads: exact counts, and at most SAMPLE_LIMIT named
# rows per finding, so its memory does not grow with the table

# The wrong-now verdicts whose rows a report names.
NAMED_VERDICTS = (Verdict.MISROUTED, Verdict.UNEXPECTED_LEGACY, Verdict.UNEXPECTED_SHARDED)


class ReadTally:
    """One read's exact counts by verdict, and at most SAMPLE_LIMIT named rows per finding."""

    def __init__(self) -> None:
        self.rows = 0
        self.requests = 0
        self.counts: Counter[Verdict] = Counter()
        self.samples: dict[Verdict, list[RowRef]] = {verdict: [] for verdict in NAMED_VERDICTS}

    def sample(self, verdict: Verdict, item: Mapping[str, Any], routing: Routing) -> None:
        """Name `item` under `verdict` (a named one) while the sample has room."""
        sample = self.samples.get(verdict)
        if sample is None or len(sample) >= SAMPLE_LIMIT:
            return
        # Where writers would put it now (None: its personId cannot be routed at all).
        goes_to = None
        if keys.person_anomaly(item) is None:
            goes_to = routing.write_key(item["personId"])
        sample.append(RowRef.of(item, goes_to))

    def merge(self, other: ReadTally) -> None:
        self.requests += other.requests
        self.counts.update(other.counts)
        for verdict, refs in other.samples.items():
            sample = self.samples[verdict]
            sample.extend(refs[: max(0, SAMPLE_LIMIT - len(sample))])


class ScanFinding:
    """A scan finding: its exact count and its first rows by table key (at most SAMPLE_LIMIT,
    so the sample does not depend on the order the segments arrive in)."""

    def __init__(self, count: int = 0, rows: tuple[RowRef, ...] = ()) -> None:
        """Empty, or carrying what earlier runs of the same scan found (a scan across runs)."""
        self.count = count
        self._rows: list[RowRef] = list(rows)

    def add(self, item: Mapping[str, Any]) -> None:
        self.count += 1
        self._rows.append(RowRef.of(item))
        if len(self._rows) >= 2 * SAMPLE_LIMIT:  # amortised: at most 2 x SAMPLE_LIMIT held
            self._trim()

    def sample(self) -> tuple[RowRef, ...]:
        self._trim()
        return tuple(self._rows)

    def _trim(self) -> None:
        self._rows.sort(key=lambda ref: (ref.pk, ref.sk))
        del self._rows[SAMPLE_LIMIT:]
