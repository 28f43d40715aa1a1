"""The parity verifier: do the readers return exactly what the base table holds? (ADR-0085
"Verification"; the command: docs/observability.md, "The CLI", `saga-index verify`.)

Truth is the base table itself: every saga row (table key RSAGA#<id> / META), read by a
consistent, rate-limited parallel Scan. Against it, the repository is read along a routing (the
control record's, or the one a reader in a named phase follows) exactly as production reads:

  all-sagas    get_all_sagas()          must return every saga row
  open-sagas   get_all_open_sagas()     must return every saga row whose state is open
  by-person    get_sagas_by_person(p)   for a sample of persons (`sample_persons`): every saga
                                        row of p

The judgement is `_compare`'s (against the base table, or against a snapshot). GSI reads
are eventually consistent, so a first-pass mismatch may be a write still propagating: every
finding is re-checked once after a short delay (the rows re-fetched with consistent GetItem, the
affected reads repeated) and counts only when it is still there.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    InvalidInputError,
    InvalidPersonIdError,
    keys,
    names,
)
from saga_index.layout_change.checks import Expectations, ReadsDone
from saga_index.layout_change.checks.parity._compare import (
    BaseTableComparison,
    compare_with_snapshot,
    is_saga_key,
)
from saga_index.layout_change.checks.parity._report import (
    CHANGED,
    EXTRA,
    MISROUTED,
    MISSING,
    Finding,
    ParityReport,
    ParityRun,
)
from saga_index.layout_change.checks.parity._snapshot import (
    CHECK_ALL,
    CHECK_OPEN,
    CHECK_PERSON,
    Read,
    Snapshot,
    TableKey,
)
from saga_index.layout_change.record import Phase, Routing, resolve_routing
from saga_index.store import SagaRepository
from saga_index.store.dynamo import (
    IndexTarget,
    PageListener,
    SagaTableScanner,
    ScanOptions,
    deserialize,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_RECHECK_DELAY_SECONDS = 2.0
# How many persons' by-person reads a run checks (sample_persons, below).
DEFAULT_SAMPLE = 20


@dataclass
class _Observed:
    """What one run has read: the base table's saga rows, and each read's result, by table key."""

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
        phase: Phase | str | None = None,
        shard_count: int = DEFAULT_SHARD_COUNT,
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
        self.phase = self.expect.routing.phase
        # The N reported and recorded: the largest shard count the routing names.
        self.target = IndexTarget(client, table_name, index_name, self.expect.shard_count)
        self.recheck_delay_seconds = recheck_delay_seconds
        self._sleep = sleep
        self._now = now
        options = scan_options or ScanOptions(consistent_read=True)
        # `sleep` is the re-check delay only; the scan's rate limiter keeps real time.
        self.scanner = SagaTableScanner(client, table_name, options=options)
        self.comparison = BaseTableComparison(self.expect)
        self.repository = SagaRepository.from_target(self.target, plan=self.expect.routing)

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        routing: Routing | None = None,
        phase: Phase | str | None = None,
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
            snapshot.require_taken_of(self.target.table_name, self.target.index_name)
        scan = self.scanner.scan(on_page=on_scan_page)
        observed = _Observed(truth={keys.table_key_of(i): i for i in scan.items})
        persons = (
            snapshot.persons
            if snapshot is not None
            else sample_persons(observed.truth.values(), sample, seed)
        )
        reads = [Read(CHECK_ALL), Read(CHECK_OPEN), *(Read(CHECK_PERSON, p) for p in persons)]
        self._read_all(observed, reads, on_read)
        first_pass = self._compare(observed, reads)
        confirmed = self._recheck(observed, reads, first_pass) if first_pass else []
        against_snapshot = (
            compare_with_snapshot(observed.truth, observed.results, reads, snapshot, confirmed)
            if snapshot is not None
            else []
        )
        report = self._report(
            observed,
            reads,
            persons,
            seed,
            findings=confirmed + against_snapshot,
            rechecked=len(first_pass),
            resolved=len(first_pass) - len(confirmed),
            snapshot=snapshot,
        )
        return ParityRun(report=report, snapshot=self._snapshot_of(observed, persons, reads))

    # ---- the steps ----------------------------------------------------------------------------

    def _read_all(self, observed: _Observed, reads: list[Read], on_read: ReadsDone | None) -> None:
        if on_read is not None:
            on_read(0, len(reads))
        for done, read in enumerate(reads, start=1):
            observed.results[read] = self._read(read)
            if on_read is not None:
                on_read(done, len(reads))

    def _read(self, read: Read) -> dict[TableKey, dict[str, Any]]:
        if read.check == CHECK_ALL:
            result = self.repository.get_all_sagas()
        elif read.check == CHECK_OPEN:
            result = self.repository.get_all_open_sagas()
        else:
            result = self.repository.get_sagas_by_person(str(read.person_id))
        return {keys.table_key_of(item): item for item in result.items}

    def _compare(self, observed: _Observed, reads: list[Read]) -> list[Finding]:
        return self.comparison.findings(observed.truth, observed.results, reads)

    def _recheck(
        self, observed: _Observed, reads: list[Read], first_pass: list[Finding]
    ) -> list[Finding]:
        """The findings of `first_pass` still there after the delay: a GSI write may have been
        propagating when the reads ran."""
        log.info(
            "parity mismatches found; re-checking once after %.1f s (GSI propagation)",
            self.recheck_delay_seconds,
            extra={"mismatches": len(first_pass)},
        )
        self._sleep(self.recheck_delay_seconds)
        self._refresh(observed, first_pass)
        identities = {f.identity for f in first_pass}
        return [f for f in self._compare(observed, reads) if f.identity in identities]

    def _refresh(self, observed: _Observed, findings: list[Finding]) -> None:
        """Re-fetch every row involved (consistent GetItem) and repeat every affected read."""
        for key in sorted({f.key for f in findings}):
            response = self.target.client.get_item(
                TableName=self.target.table_name,
                Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
                ConsistentRead=True,
            )
            raw = response.get("Item")
            row = deserialize(raw) if raw else None
            if row is not None and is_saga_key(key):
                observed.truth[key] = row
            else:
                observed.truth.pop(key, None)
        for read in sorted({f.read for f in findings if f.read is not None}):
            observed.results[read] = self._read(read)

    def _report(
        self,
        observed: _Observed,
        reads: list[Read],
        persons: tuple[str, ...],
        seed: int | None,
        *,
        findings: list[Finding],
        rechecked: int,
        resolved: int,
        snapshot: Snapshot | None,
    ) -> ParityReport:
        by_kind: dict[str, list[Finding]] = {MISSING: [], EXTRA: [], MISROUTED: [], CHANGED: []}
        for finding in findings:
            by_kind[finding.kind].append(finding)
        return ParityReport(
            table_name=self.target.table_name,
            index_name=self.target.index_name,
            phase=self.phase,
            shard_count=self.target.shard_count,
            persons=tuple(persons),
            seed=seed,
            truth_rows=len(observed.truth),
            read_counts={read.label: len(observed.results[read]) for read in reads},
            missing=tuple(by_kind[MISSING]),
            extra=tuple(by_kind[EXTRA]),
            misrouted=tuple(by_kind[MISROUTED]),
            changed=tuple(by_kind[CHANGED]),
            rechecked=rechecked,
            resolved_on_recheck=resolved,
            recheck_delay_seconds=self.recheck_delay_seconds if rechecked else 0.0,
            snapshot_created_at=snapshot.created_at if snapshot is not None else None,
        )

    def _snapshot_of(
        self, observed: _Observed, persons: tuple[str, ...], reads: list[Read]
    ) -> Snapshot:
        """The results of this run, ready to be recorded."""
        return Snapshot(
            table_name=self.target.table_name,
            index_name=self.target.index_name,
            phase=self.phase.value,
            shard_count=self.target.shard_count,
            created_at=self._now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            persons=tuple(persons),
            results={read: frozenset(observed.results[read]) for read in reads},
        )


# --- Which persons' by-person reads a parity run checks: a seeded sample of the routable
# personIds in the base table, so a run can be repeated exactly (--seed)


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
