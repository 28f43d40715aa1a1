"""Drift checks of the renewal-saga index: ADR-0085's "zero saga rows keep the legacy key".

Every run (cheap: reads the index only)
  legacyRows     rows on GSI4PK = the legacy key: a COUNT Query, every page.
  rowsPerShard   rows under each of the N shard keys, read in full through the repository's
                 sharded fan-out (complete or EnumerationError); shardSkew = max / mean.
  misroutedRows  rows under shard k whose personId hashes to another shard (a writer with the
                 wrong N, an old writer): the person's by-person read never looks there.
  anomalousRows  rows under a shard key whose personId cannot be routed at all (missing, not a
                 string, GSI4SK naming someone else). Reported, not drift: the foundation returns
                 them as stored and a human repairs them.

Every K-th run (reads the whole BASE table: a rate-limited parallel Scan)
  unindexedRows  saga rows with no GSI4PK or no GSI4SK. DynamoDB leaves such rows out of the
                 index, so no Query can ever see them; only a Scan of the table finds them.
  strayRows      saga rows whose GSI4PK is neither the legacy key nor one of the N shard keys
                 ("RenewalSaga#20" under N=16, a garbled value): in the index, but in a partition
                 no enumeration reads.

What counts as drift depends on the phase (`DriftReport.findings`): legacy rows are drift only in
`sharded`, sharded rows only in `legacy`; misrouted, unindexed and stray rows are drift always.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index import keys, names
from saga_index.dynamo.scan import SagaTableScanner, ScanOptions
from saga_index.dynamo.target import IndexTarget
from saga_index.errors import EnumerationError, InvalidInputError, InvalidKeyError
from saga_index.model import Phase
from saga_index.repository import SagaRepository, count_partition

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_SCAN_EVERY = 12  # with the 5-minute schedule: one base-table scan an hour
SAMPLE_LIMIT = 100  # rows listed per finding in a report; the counts are always exact


# ---- when to scan --------------------------------------------------------------------------


def validate_scan_every(value: object) -> int:
    # names.MAX_SCAN_EVERY: the longest interval the unindexed-rows alarm can still watch.
    highest = names.MAX_SCAN_EVERY
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= highest:
        raise InvalidInputError(
            f"scan-every K must be an integer from 1 to {highest}, got {value!r}"
        )
    return value


def scan_due(scheduled_time: datetime, *, every: int, period_minutes: int = 5) -> bool:
    """True when the run scheduled at `scheduled_time` is one of the every-K-th runs that scan.

    Deterministic from the scheduled time alone (no state, and Scheduler retries of the same run
    decide the same): the run's slot is the number of whole periods since the Unix epoch, and
    slots divisible by K scan. Epoch slots have no midnight seam, so scans are exactly K periods
    apart forever (K = 12 at 5 minutes: the top of every hour, UTC).
    """
    validate_scan_every(every)
    if period_minutes < 1:
        raise InvalidInputError(f"period must be at least one minute, got {period_minutes}")
    if scheduled_time.tzinfo is None or scheduled_time.utcoffset() is None:
        raise InvalidInputError(f"scheduled time must carry a time zone, got {scheduled_time!r}")
    slot = math.floor(scheduled_time.timestamp()) // (period_minutes * 60)
    return slot % every == 0


# ---- the report -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RowRef:
    """Enough of a row to find and repair it."""

    pk: str
    sk: str
    saga_id: Any
    person_id: Any
    gsi4pk: Any
    expected_gsi4pk: str | None = None

    @classmethod
    def of(cls, item: Mapping[str, Any], expected_gsi4pk: str | None = None) -> RowRef:
        return cls(
            pk=str(item.get("PK")),
            sk=str(item.get("SK")),
            saga_id=item.get("sagaId"),
            person_id=item.get("personId"),
            gsi4pk=item.get("GSI4PK"),
            expected_gsi4pk=expected_gsi4pk,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "PK": self.pk,
            "SK": self.sk,
            "sagaId": self.saga_id,
            "personId": self.person_id,
            "gsi4pk": self.gsi4pk,
        }
        if self.expected_gsi4pk is not None:
            out["expectedGsi4pk"] = self.expected_gsi4pk
        return out


@dataclass(frozen=True)
class DriftReport:
    table_name: str
    index_name: str
    phase: Phase
    shard_count: int
    legacy_rows: int
    rows_per_shard: dict[int, int]
    misrouted_rows: int
    anomalous_rows: int
    misrouted: tuple[RowRef, ...] = ()
    # None when this run did not scan the base table.
    unindexed_rows: int | None = None
    stray_rows: int | None = None
    scanned_saga_rows: int | None = None
    unindexed: tuple[RowRef, ...] = ()
    stray: tuple[RowRef, ...] = ()
    requests: int = 0

    @property
    def scanned(self) -> bool:
        return self.unindexed_rows is not None

    @property
    def sharded_rows(self) -> int:
        return sum(self.rows_per_shard.values())

    @property
    def shard_skew(self) -> float:
        """max / mean of rows per shard; 0.0 when no row is sharded (nothing to be skewed)."""
        return shard_skew(self.rows_per_shard, self.shard_count)

    def findings(self) -> list[str]:
        """What is drift in this report's phase, one sentence each; empty when healthy."""
        out: list[str] = []
        if self.phase is Phase.SHARDED and self.legacy_rows:
            out.append(
                f"{self.legacy_rows} row(s) still carry the legacy GSI4PK "
                f"{keys.LEGACY_GSI4PK!r} in phase sharded, where no reader reads it"
            )
        if self.phase is Phase.LEGACY and self.sharded_rows:
            out.append(
                f"{self.sharded_rows} row(s) carry a sharded GSI4PK in phase legacy, "
                "where readers read only the legacy partition"
            )
        if self.misrouted_rows:
            out.append(
                f"{self.misrouted_rows} row(s) sit under a shard other than shard(personId): "
                "their person's by-person read never finds them"
            )
        if self.unindexed_rows:
            out.append(
                f"{self.unindexed_rows} saga row(s) have no GSI4PK or no GSI4SK: "
                "they are in no index partition, invisible to every read"
            )
        if self.stray_rows:
            out.append(
                f"{self.stray_rows} saga row(s) carry a GSI4PK outside the legacy key and the "
                f"{self.shard_count} shard keys: no enumeration reads their partition"
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
            "shardCount": self.shard_count,
            "healthy": self.healthy,
            "findings": self.findings(),
            "legacyRows": self.legacy_rows,
            "shardedRows": self.sharded_rows,
            "misroutedRows": self.misrouted_rows,
            "anomalousRows": self.anomalous_rows,
            "unindexedRows": self.unindexed_rows,
            "strayRows": self.stray_rows,
            "scanned": self.scanned,
            "scannedSagaRows": self.scanned_saga_rows,
            "rowsPerShard": {str(n): count for n, count in sorted(self.rows_per_shard.items())},
            "shardSkew": round(self.shard_skew, 4),
            "misrouted": [ref.to_dict() for ref in self.misrouted],
            "unindexed": [ref.to_dict() for ref in self.unindexed],
            "stray": [ref.to_dict() for ref in self.stray],
            "sampleLimit": SAMPLE_LIMIT,
            "requests": self.requests,
        }


def shard_skew(rows_per_shard: Mapping[int, int], shard_count: int) -> float:
    total = sum(rows_per_shard.values())
    if total == 0:
        return 0.0
    mean = total / shard_count
    return max(rows_per_shard.values()) / mean


# ---- the checks -----------------------------------------------------------------------------


class DriftChecker:
    """Runs the drift checks against one table. The client is injected (thread-safe)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        phase: Phase | str,
        shard_count: int,
        index_name: str = names.INDEX_NAME,
        scan_options: ScanOptions | None = None,
        max_workers: int = 16,
        page_size: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not table_name:
            raise InvalidInputError("table_name is required")
        if page_size is not None and page_size < 1:
            raise InvalidInputError(f"page_size must be >= 1, got {page_size}")
        self.page_size = page_size
        self.phase = Phase.parse(phase)
        self.target = IndexTarget(client, table_name, index_name, shard_count)
        self.max_workers = max_workers
        self.scanner = SagaTableScanner(
            client, table_name, options=scan_options, clock=clock, sleep=sleep
        )

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        phase: Phase | str,
        scan_options: ScanOptions | None = None,
        max_workers: int = 16,
        page_size: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> DriftChecker:
        return cls(
            target.client,
            target.table_name,
            phase=phase,
            shard_count=target.shard_count,
            index_name=target.index_name,
            scan_options=scan_options,
            max_workers=max_workers,
            page_size=page_size,
            clock=clock,
            sleep=sleep,
        )

    def check(self, *, scan_unindexed: bool, deadline: float | None = None) -> DriftReport:
        """The every-run checks, plus the base-table scan when `scan_unindexed`.

        Raises EnumerationError (naming the partitions or segments) when any read fails after
        botocore's retries, and ScanIncompleteError when the scan passes `deadline`.
        """
        legacy_rows, legacy_requests = self.count_legacy_rows()
        target = self.target
        sharded = SagaRepository.from_target(
            target, phase=Phase.SHARDED, max_workers=self.max_workers, page_size=self.page_size
        ).get_all_sagas()
        rows_per_shard = dict.fromkeys(range(target.shard_count), 0)
        misrouted: list[RowRef] = []
        anomalous = 0
        for item in sharded.items:
            gsi4pk = item.get("GSI4PK")
            shard_number = keys.parse_gsi4pk(str(gsi4pk))
            if shard_number is None or shard_number not in rows_per_shard:
                # The repository only reads keys 0..N-1; anything else is a bug upstream.
                raise InvalidKeyError(f"shard read returned a row under {gsi4pk!r}")
            rows_per_shard[shard_number] += 1
            if keys.person_anomaly(item) is not None:
                anomalous += 1
                continue
            expected = keys.shard_gsi4pk_for_person(item["personId"], target.shard_count)
            if expected != gsi4pk:
                misrouted.append(RowRef.of(item, expected))
        report = DriftReport(
            table_name=target.table_name,
            index_name=target.index_name,
            phase=self.phase,
            shard_count=target.shard_count,
            legacy_rows=legacy_rows,
            rows_per_shard=rows_per_shard,
            misrouted_rows=len(misrouted),
            anomalous_rows=anomalous,
            misrouted=tuple(misrouted[:SAMPLE_LIMIT]),
            requests=legacy_requests + sharded.requests,
        )
        if not scan_unindexed:
            return report
        return self._with_scan(report, deadline)

    def count_legacy_rows(self) -> tuple[int, int]:
        """(rows on the legacy key, requests): a COUNT Query to its last page."""
        try:
            return count_partition(
                self.target.client,
                self.target.table_name,
                keys.LEGACY_GSI4PK,
                index_name=self.target.index_name,
                page_size=self.page_size,
            )
        except (ClientError, BotoCoreError) as err:
            raise EnumerationError({keys.LEGACY_GSI4PK: err}) from err

    def _with_scan(self, report: DriftReport, deadline: float | None) -> DriftReport:
        scan = self.scanner.scan(deadline=deadline)
        readable = {keys.LEGACY_GSI4PK, *keys.all_shard_gsi4pks(self.target.shard_count)}
        unindexed: list[RowRef] = []
        stray: list[RowRef] = []
        for item in scan.items:
            gsi4pk, gsi4sk = item.get("GSI4PK"), item.get("GSI4SK")
            if not isinstance(gsi4pk, str) or not isinstance(gsi4sk, str):
                # DynamoDB indexes a row only when both key attributes are present strings.
                unindexed.append(RowRef.of(item))
            elif gsi4pk not in readable:
                stray.append(RowRef.of(item))
        return replace(
            report,
            unindexed_rows=len(unindexed),
            stray_rows=len(stray),
            scanned_saga_rows=len(scan.items),
            unindexed=tuple(unindexed[:SAMPLE_LIMIT]),
            stray=tuple(stray[:SAMPLE_LIMIT]),
            requests=report.requests + scan.requests,
        )
