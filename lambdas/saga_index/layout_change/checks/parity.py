"""Parity: do the readers return exactly what the base table holds? (ADR-0085 "Verification")

Truth is the base table itself: every saga row (table key RSAGA#<id> / META), read by a
consistent, rate-limited parallel Scan. Against it, the repository is read along a routing (the
control record's, or the one a reader in a named phase follows) exactly as production reads:

  all-sagas    get_all_sagas()          must return every saga row
  open-sagas   get_all_open_sagas()     must return every saga row whose state is open
  by-person    get_sagas_by_person(p)   for a sample of persons: every saga row of p

Findings, by table key:
  missing    in the base table (and qualifying) but not returned: a reader cannot see it.
  extra      returned but not in the base table as such (not a saga row, another person's,
             no longer open, deleted).
  misrouted  (from the truth, whole table) a row under a shard key the routing reads that is not
             its person's key in any layout of the routing: its person's by-person read never
             finds it (a row still on its source key while rows move is not misrouted).

GSI reads are eventually consistent, so a first-pass mismatch may be a write still propagating:
every finding is re-checked once after a short delay (the rows re-fetched with consistent
GetItem, the affected reads repeated) and counts only when it is still there.

A snapshot records the results of the reads; a later run compares against it (the ADR's
"identical to pre-migration"). A difference the base table explains (a saga opened, closed or
moved since) is listed as `changed`, not as a mismatch; a row returned at the snapshot that is
gone from the base table, or still there but not returned, is `missing`.

A progress display may listen (`ParityVerifier.verify`'s `on_scan_page` and `on_read`); the
listeners change nothing that is read or reported.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from saga_index.index import keys, names
from saga_index.index.errors import InvalidInputError, InvalidKeyError, InvalidPersonIdError
from saga_index.index.layout import StatePhase
from saga_index.index.model import Phase
from saga_index.layout_change.checks.drift import Expectations, ReadsDone
from saga_index.layout_change.checks.parity_snapshot import (
    CHECK_ALL,
    CHECK_OPEN,
    CHECK_PERSON,
    InvalidSnapshotError,
    Read,
    Snapshot,
    TableKey,
)
from saga_index.layout_change.record.routing import Routing
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.dynamo.scan import PageListener, SagaTableScanner, ScanOptions
from saga_index.store.dynamo.target import IndexTarget
from saga_index.store.repository import SagaRepository, resolve_routing, routing_phase

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

MISSING, EXTRA, MISROUTED, CHANGED = "missing", "extra", "misrouted", "changed"
SOURCE_TABLE, SOURCE_SNAPSHOT = "base-table", "snapshot"

DEFAULT_SAMPLE = 20
DEFAULT_RECHECK_DELAY_SECONDS = 2.0


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


def _finding(
    kind: str,
    key: TableKey,
    row: Mapping[str, Any] | None,
    reason: str,
    *,
    read: Read | None = None,
    source: str = SOURCE_TABLE,
    expected_gsi4pk: str | None = None,
) -> Finding:
    row = row or {}
    return Finding(
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


# ---- the report -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParityReport:
    table_name: str
    index_name: str
    phase: StatePhase
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


def sample_persons(
    rows: Iterable[Mapping[str, Any]], sample: int, seed: int | None
) -> tuple[str, ...]:
    """Up to `sample` distinct routable personIds, chosen by `seed` (sorted)."""
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise InvalidInputError(f"sample must be a non-negative integer, got {sample!r}")
    persons: set[str] = set()
    for row in rows:
        person = row.get("personId")
        try:
            persons.add(keys.validate_person_id(person))
        except InvalidPersonIdError:
            continue
    ordered = sorted(persons)
    chosen = random.Random(seed).sample(ordered, min(sample, len(ordered)))
    return tuple(sorted(chosen))


# ---- the verifier -----------------------------------------------------------------------------


@dataclass
class _State:
    truth: dict[TableKey, dict[str, Any]]
    results: dict[Read, dict[TableKey, dict[str, Any]]] = field(default_factory=dict)


class ParityVerifier:
    """Reads the base table and the repository, and compares them. The client is injected.

    Reads follow `routing`, or the routing of `phase` + `shard_count`; exactly one of the two.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        routing: Routing | None = None,
        phase: Phase | StatePhase | str | None = None,
        shard_count: int = names.DEFAULT_SHARD_COUNT,
        index_name: str = names.INDEX_NAME,
        scan_options: ScanOptions | None = None,
        recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not table_name:
            raise InvalidInputError("table_name is required")
        if recheck_delay_seconds < 0:
            raise InvalidInputError(
                f"recheck delay must be >= 0 seconds, got {recheck_delay_seconds!r}"
            )
        self.expect = Expectations(resolve_routing(routing, phase, shard_count))
        self.phase = routing_phase(self.expect.routing)
        # The N reported and recorded: the largest shard count the routing names.
        self.target = IndexTarget(client, table_name, index_name, self.expect.shard_count)
        self.recheck_delay_seconds = recheck_delay_seconds
        self._sleep = sleep
        self._now = now
        options = scan_options or ScanOptions(consistent_read=True)
        # `sleep` is the re-check delay only; the scan's rate limiter keeps real time.
        self.scanner = SagaTableScanner(client, table_name, options=options)
        self._readable = self.expect.readable()
        self.repository = SagaRepository.from_target(self.target, routing=self.expect.routing)

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        routing: Routing | None = None,
        phase: Phase | StatePhase | str | None = None,
        scan_options: ScanOptions | None = None,
        recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> ParityVerifier:
        return cls(
            target.client,
            target.table_name,
            routing=routing,
            phase=phase,
            shard_count=target.shard_count,
            index_name=target.index_name,
            scan_options=scan_options,
            recheck_delay_seconds=recheck_delay_seconds,
            sleep=sleep,
            now=now,
        )

    def verify(
        self,
        *,
        sample: int = DEFAULT_SAMPLE,
        seed: int | None = None,
        snapshot: Snapshot | None = None,
        on_scan_page: PageListener | None = None,
        on_read: ReadsDone | None = None,
    ) -> ParityRun:
        """Compare the reads with the base table (and with `snapshot` when given, whose persons
        are then the by-person sample). Raises EnumerationError when any read fails.

        `on_scan_page` hears of every page of the base-table scan; `on_read` hears (0, reads
        in all) when the repository's reads start, after the scan, and (reads done, reads in
        all) after each (the re-check's repeated reads are not counted)."""
        if snapshot is not None:
            self._check_snapshot_matches(snapshot)
        scan = self.scanner.scan(on_page=on_scan_page)
        state = _State(truth={keys.table_key_of(i): i for i in scan.items})
        persons = (
            snapshot.persons
            if snapshot is not None
            else sample_persons(state.truth.values(), sample, seed)
        )
        reads = [Read(CHECK_ALL), Read(CHECK_OPEN), *(Read(CHECK_PERSON, p) for p in persons)]
        if on_read is not None:
            on_read(0, len(reads))
        for done, read in enumerate(reads, start=1):
            state.results[read] = self._read(read)
            if on_read is not None:
                on_read(done, len(reads))
        findings = self._compare(state, reads)
        rechecked = resolved = 0
        if findings:
            rechecked = len(findings)
            log.info(
                "parity mismatches found; re-checking once after %.1f s (GSI propagation)",
                self.recheck_delay_seconds,
                extra={"mismatches": rechecked},
            )
            self._sleep(self.recheck_delay_seconds)
            self._refresh(state, findings)
            first_pass = {f.identity for f in findings}
            findings = [f for f in self._compare(state, reads) if f.identity in first_pass]
            resolved = rechecked - len(findings)
        if snapshot is not None:
            findings += self._compare_snapshot(state, reads, snapshot, findings)
        by_kind: dict[str, list[Finding]] = {MISSING: [], EXTRA: [], MISROUTED: [], CHANGED: []}
        for finding in findings:
            by_kind[finding.kind].append(finding)
        report = ParityReport(
            table_name=self.target.table_name,
            index_name=self.target.index_name,
            phase=self.phase,
            shard_count=self.target.shard_count,
            persons=tuple(persons),
            seed=seed,
            truth_rows=len(state.truth),
            read_counts={read.label: len(state.results[read]) for read in reads},
            missing=tuple(by_kind[MISSING]),
            extra=tuple(by_kind[EXTRA]),
            misrouted=tuple(by_kind[MISROUTED]),
            changed=tuple(by_kind[CHANGED]),
            rechecked=rechecked,
            resolved_on_recheck=resolved,
            recheck_delay_seconds=self.recheck_delay_seconds if rechecked else 0.0,
            snapshot_created_at=snapshot.created_at if snapshot is not None else None,
        )
        current = Snapshot(
            table_name=self.target.table_name,
            index_name=self.target.index_name,
            phase=self.phase.value,
            shard_count=self.target.shard_count,
            created_at=self._now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            persons=tuple(persons),
            results={read: frozenset(state.results[read]) for read in reads},
        )
        return ParityRun(report=report, snapshot=current)

    # ---- reads --------------------------------------------------------------------------------

    def _read(self, read: Read) -> dict[TableKey, dict[str, Any]]:
        if read.check == CHECK_ALL:
            result = self.repository.get_all_sagas()
        elif read.check == CHECK_OPEN:
            result = self.repository.get_all_open_sagas()
        else:
            result = self.repository.get_sagas_by_person(str(read.person_id))
        return {keys.table_key_of(item): item for item in result.items}

    def _refresh(self, state: _State, findings: list[Finding]) -> None:
        """Re-fetch every row involved (consistent GetItem) and repeat every affected read."""
        for key in sorted({f.key for f in findings}):
            response = self.target.client.get_item(
                TableName=self.target.table_name,
                Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
                ConsistentRead=True,
            )
            raw = response.get("Item")
            row = deserialize(raw) if raw else None
            if row is not None and _is_saga_key(key):
                state.truth[key] = row
            else:
                state.truth.pop(key, None)
        for read in sorted({f.read for f in findings if f.read is not None}):
            state.results[read] = self._read(read)

    # ---- comparisons --------------------------------------------------------------------------

    def _compare(self, state: _State, reads: list[Read]) -> list[Finding]:
        findings: list[Finding] = []
        misrouted: set[TableKey] = set()
        for key in sorted(state.truth):
            row = state.truth[key]
            expected = self._expected_shard_key(row)
            if expected is not None and expected != row.get("GSI4PK"):
                misrouted.add(key)
                findings.append(
                    _finding(
                        MISROUTED,
                        key,
                        row,
                        f"under {row.get('GSI4PK')!r}, which is not the person's key in any "
                        f"layout of phase {self.phase.value} (writers stamp {expected!r})",
                        expected_gsi4pk=expected,
                    )
                )
        for read in reads:
            actual = state.results[read]
            expected_keys = {k for k, row in state.truth.items() if read.qualifies(row)}
            for key in sorted(expected_keys - actual.keys()):
                if read.check == CHECK_PERSON and key in misrouted:
                    continue  # reported once, as misrouted
                row = state.truth[key]
                findings.append(
                    _finding(MISSING, key, row, self._why_missing(row, read), read=read)
                )
            for key in sorted(actual.keys() - expected_keys):
                item = actual[key]
                reason = self._why_extra(state.truth.get(key), item, read)
                findings.append(_finding(EXTRA, key, item, reason, read=read))
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
            return f"under shard {shard_number}, outside the {self.target.shard_count} shards read"
        if read.check == CHECK_PERSON:
            try:
                sort_person = keys.parse_gsi4sk(gsi4sk).person_id
            except InvalidKeyError:
                sort_person = None
            if sort_person != read.person_id:
                return f"GSI4SK {gsi4sk!r} does not name person {read.person_id!r}"
        return "in the base table but not returned by the read"

    @staticmethod
    def _why_extra(truth_row: Mapping[str, Any] | None, item: Mapping[str, Any], read: Read) -> str:
        if not _is_saga_key(keys.table_key_of(item)):
            return "not a saga row (table key is not RSAGA#<id> / META) but under the saga index"
        if truth_row is None:
            return "returned by the index but not in the base table"
        if read.check == CHECK_OPEN:
            return f"state is {truth_row.get('state')!r} in the base table, not an open state"
        if read.check == CHECK_PERSON:
            return f"belongs to person {truth_row.get('personId')!r} in the base table"
        return "returned by the read but not a saga in the base table"

    def _compare_snapshot(
        self, state: _State, reads: list[Read], snapshot: Snapshot, findings: list[Finding]
    ) -> list[Finding]:
        seen = {(f.kind, f.read, f.key) for f in findings}
        out: list[Finding] = []
        for read in reads:
            before = snapshot.results.get(read, frozenset())
            now = set(state.results[read])
            for key in sorted(before - now):
                row = state.truth.get(key)
                if row is None:
                    reason = "returned at the snapshot; no longer in the base table"
                    out.append(_finding(MISSING, key, None, reason, read=read, source="snapshot"))
                elif read.qualifies(row):
                    if (MISSING, read, key) not in seen:
                        reason = "returned at the snapshot and still qualifies; not returned now"
                        out.append(
                            _finding(MISSING, key, row, reason, read=read, source="snapshot")
                        )
                else:
                    reason = f"no longer qualifies in the base table: {_describe(row)}"
                    out.append(_finding(CHANGED, key, row, reason, read=read, source="snapshot"))
            for key in sorted(now - before):
                row = state.truth.get(key)
                if row is not None and read.qualifies(row):
                    reason = "new or changed since the snapshot; the base table agrees"
                    out.append(_finding(CHANGED, key, row, reason, read=read, source="snapshot"))
                elif (EXTRA, read, key) not in seen:
                    item = state.results[read][key]
                    reason = "not returned at the snapshot, and the base table does not agree"
                    out.append(_finding(EXTRA, key, item, reason, read=read, source="snapshot"))
        return out

    def _check_snapshot_matches(self, snapshot: Snapshot) -> None:
        if (
            snapshot.table_name != self.target.table_name
            or snapshot.index_name != self.target.index_name
        ):
            raise InvalidSnapshotError(
                f"the snapshot was taken of table {snapshot.table_name!r} index "
                f"{snapshot.index_name!r}; this run reads table {self.target.table_name!r} index "
                f"{self.target.index_name!r}"
            )


def _is_saga_key(key: TableKey) -> bool:
    try:
        keys.parse_saga_table_key(*key)
    except InvalidKeyError:
        return False
    return True


def _describe(row: Mapping[str, Any]) -> str:
    return f"state {row.get('state')!r}, personId {row.get('personId')!r}"
