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
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index import keys
from saga_index.dynamo import deserialize
from saga_index.errors import EnumerationError, InvalidInputError, InvalidKeyError, SagaIndexError
from saga_index.model import Phase
from saga_index.repository import SagaRepository, count_partition
from saga_index.shard import validate_shard_count

log = logging.getLogger(__name__)

# Metric names, shared by the drift-guard handler (EMF) and infra/alarms.py (alarms, dashboard).
DRIFT_GUARD_SERVICE = "drift-guard"
METRIC_LEGACY_ROWS = "LegacyRows"
METRIC_SHARDED_ROWS = "ShardedRows"
METRIC_MISROUTED_ROWS = "MisroutedRows"
METRIC_ANOMALOUS_ROWS = "AnomalousRows"
METRIC_ROWS_PER_SHARD = "RowsPerShard"
METRIC_SHARD_SKEW = "ShardSkew"
# Published only on the runs that scan the base table (every K-th run).
METRIC_UNINDEXED_ROWS = "UnindexedRows"
METRIC_STRAY_ROWS = "StrayRows"
METRIC_SCANNED_SAGA_ROWS = "ScannedSagaRows"
DIMENSION_TABLE = "TableName"
DIMENSION_INDEX = "IndexName"
DIMENSION_SHARD = "Shard"

DEFAULT_SCAN_EVERY = 12  # with the 5-minute schedule: one base-table scan an hour
# CloudWatch caps an alarm's period x evaluation periods at one day; the unindexed alarm's
# period is two scan intervals (see infra/alarms.py), so K x 5 min x 2 <= 24 h.
MAX_SCAN_EVERY = 144
SAMPLE_LIMIT = 100  # rows listed per finding in a report; the counts are always exact

_SAGA_PROJECTION = ("PK", "SK", "sagaId", "personId", "state", "GSI4PK", "GSI4SK", "entityType")


class ScanIncompleteError(SagaIndexError):
    """The base-table scan ran out of time: no partial count is ever reported as a result."""

    def __init__(self, unfinished: list[str], rows_read: int, budget_seconds: float) -> None:
        self.unfinished = list(unfinished)
        self.rows_read = rows_read
        super().__init__(
            f"base-table scan did not finish within {budget_seconds:.0f} s: "
            f"{len(self.unfinished)} segment(s) unfinished ({', '.join(self.unfinished)}) after "
            f"{rows_read} saga row(s); raise the scan rate or the time budget, no partial "
            "result returned"
        )


# ---- when to scan --------------------------------------------------------------------------


def validate_scan_every(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SCAN_EVERY:
        raise InvalidInputError(
            f"scan-every K must be an integer from 1 to {MAX_SCAN_EVERY}, got {value!r}"
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


# ---- the rate-limited parallel scan of saga rows -------------------------------------------


class ReadRateLimiter:
    """Paces reads to an average of `units_per_second` read capacity units (thread-safe).

    A page's cost is only known after it returns, so each page pushes the next start time back by
    cost / rate, and every segment waits for that time before its next request: the average
    never exceeds the budget, and a burst is at most one page per segment.
    """

    def __init__(
        self,
        units_per_second: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not units_per_second > 0 or math.isinf(units_per_second):
            raise InvalidInputError(
                f"scan rate must be a positive number of read units per second, "
                f"got {units_per_second!r}"
            )
        self.units_per_second = float(units_per_second)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._ready_at = clock()
        self.units_spent = 0.0
        self.seconds_waited = 0.0

    def wait(self) -> None:
        with self._lock:
            delay = self._ready_at - self._clock()
            if delay > 0:
                self.seconds_waited += delay
        if delay > 0:
            self._sleep(delay)

    def spend(self, units: float) -> None:
        with self._lock:
            now = self._clock()
            self._ready_at = max(self._ready_at, now) + units / self.units_per_second
            self.units_spent += units


@dataclass(frozen=True)
class ScanOptions:
    """How hard the base-table scan may read. Defaults suit a 5-minute Lambda run."""

    segments: int = 4
    read_units_per_second: float = 400.0
    page_size: int = 1000
    consistent_read: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.segments, bool) or not 1 <= self.segments <= 64:
            raise InvalidInputError(f"scan segments must be from 1 to 64, got {self.segments!r}")
        if not 1 <= self.page_size <= 10_000:
            raise InvalidInputError(
                f"scan page size must be from 1 to 10000, got {self.page_size!r}"
            )
        if not self.read_units_per_second > 0 or math.isinf(self.read_units_per_second):
            raise InvalidInputError(
                "scan rate must be a positive number of read units per second, "
                f"got {self.read_units_per_second!r}"
            )


@dataclass(frozen=True)
class TableScan:
    """Every saga row of the base table (projected to the key and routing attributes)."""

    items: list[dict[str, Any]]
    requests: int
    scanned_count: int
    read_units: float
    seconds_waited: float


class _Stopped(Exception):
    """Another segment failed: this one stops without reading further."""


class SagaTableScanner:
    """Parallel Scan of the base table returning its saga rows (table key RSAGA#<id> / META)."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        options: ScanOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not table_name:
            raise InvalidInputError("table_name is required")
        self.client = client
        self.table_name = table_name
        self.options = options or ScanOptions()
        self._clock = clock
        self._sleep = sleep

    def scan(self, *, deadline: float | None = None) -> TableScan:
        """All saga rows, or an error: EnumerationError naming the failed segments, or
        ScanIncompleteError when `deadline` (a value of the injected clock) passes first."""
        options = self.options
        limiter = ReadRateLimiter(
            options.read_units_per_second, clock=self._clock, sleep=self._sleep
        )
        stop = threading.Event()
        total = options.segments
        started = self._clock()
        failures: dict[str, BaseException] = {}
        unfinished: list[str] = []
        reads: list[_SegmentRead] = []
        with ThreadPoolExecutor(max_workers=total, thread_name_prefix="saga-scan") as pool:
            futures = {
                n: pool.submit(self._scan_segment, n, limiter, stop, deadline) for n in range(total)
            }
            for n, future in futures.items():
                name = f"segment {n} of {total}"
                try:
                    reads.append(future.result())
                except (ClientError, BotoCoreError) as err:
                    stop.set()
                    failures[name] = err
                except _DeadlinePassed:
                    stop.set()
                    unfinished.append(name)
                except _Stopped:
                    unfinished.append(name)
        if failures:
            for name, failure in failures.items():
                log.error(
                    "saga table scan failed",
                    extra={"segment": name, "error": f"{type(failure).__name__}: {failure}"},
                )
            raise EnumerationError(failures)
        rows = sum(len(r.items) for r in reads)
        if unfinished:
            raise ScanIncompleteError(unfinished, rows, (deadline or started) - started)
        items = [item for read in reads for item in read.items]
        items.sort(key=keys.table_key_of)
        return TableScan(
            items=items,
            requests=sum(r.requests for r in reads),
            scanned_count=sum(r.scanned_count for r in reads),
            read_units=limiter.units_spent,
            seconds_waited=limiter.seconds_waited,
        )

    def _request(self, segment: int) -> dict[str, Any]:
        names = {f"#a{n}": attr for n, attr in enumerate(_SAGA_PROJECTION)}
        by_attr = {attr: alias for alias, attr in names.items()}
        return {
            "TableName": self.table_name,
            "Segment": segment,
            "TotalSegments": self.options.segments,
            "Limit": self.options.page_size,
            "ConsistentRead": self.options.consistent_read,
            "ReturnConsumedCapacity": "TOTAL",
            "ProjectionExpression": ", ".join(names),
            # Only saga rows cross the wire; the read cost is the same either way (a Scan is
            # charged for what it examines), so the rate limiter uses ConsumedCapacity.
            "FilterExpression": f"begins_with({by_attr['PK']}, :saga) AND {by_attr['SK']} = :meta",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {
                ":saga": {"S": keys.SAGA_PK_PREFIX},
                ":meta": {"S": keys.SAGA_SK},
            },
        }

    def _scan_segment(
        self,
        segment: int,
        limiter: ReadRateLimiter,
        stop: threading.Event,
        deadline: float | None,
    ) -> _SegmentRead:
        request = self._request(segment)
        read = _SegmentRead()
        while True:
            if stop.is_set():
                raise _Stopped
            if deadline is not None and self._clock() >= deadline:
                raise _DeadlinePassed
            limiter.wait()
            response = self.client.scan(**request)
            read.requests += 1
            raw_items = response.get("Items", [])
            read.scanned_count += int(response.get("ScannedCount", len(raw_items)))
            limiter.spend(_read_units(response, consistent=self.options.consistent_read))
            for raw in raw_items:
                item = deserialize(raw)
                if _is_saga_row(item):
                    read.items.append(item)
            last_key = response.get("LastEvaluatedKey")
            if not last_key:
                return read
            request["ExclusiveStartKey"] = last_key


class _DeadlinePassed(Exception):
    pass


@dataclass
class _SegmentRead:
    items: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    scanned_count: int = 0


def _is_saga_row(item: Mapping[str, Any]) -> bool:
    try:
        keys.parse_saga_table_key(item.get("PK"), item.get("SK"))  # type: ignore[arg-type]
    except InvalidKeyError:
        return False
    return True


def _read_units(response: Mapping[str, Any], *, consistent: bool) -> float:
    """What a page cost. DynamoDB reports it when asked (ReturnConsumedCapacity); servers that do
    not get an estimate: returned bytes plus 1 KB per filtered-out row, per started 4 KB."""
    consumed = response.get("ConsumedCapacity")
    if isinstance(consumed, Mapping) and consumed.get("CapacityUnits") is not None:
        return float(consumed["CapacityUnits"])
    items = response.get("Items", [])
    size = sum(_item_bytes(raw) for raw in items)
    filtered = max(0, int(response.get("ScannedCount", len(items))) - len(items))
    size += filtered * 1024
    units = max(1, math.ceil(size / 4096))
    return float(units if consistent else units / 2)


def _item_bytes(raw: Mapping[str, Any]) -> int:
    return sum(len(name.encode()) + len(repr(value).encode()) for name, value in raw.items())


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
        client: Any,
        table_name: str,
        *,
        phase: Phase | str,
        shard_count: int,
        index_name: str = keys.INDEX_NAME,
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
        self.client = client
        self.table_name = table_name
        self.phase = Phase.parse(phase)
        self.shard_count = validate_shard_count(shard_count)
        self.index_name = index_name
        self.max_workers = max_workers
        self.scanner = SagaTableScanner(
            client, table_name, options=scan_options, clock=clock, sleep=sleep
        )

    def check(self, *, scan_unindexed: bool, deadline: float | None = None) -> DriftReport:
        """The every-run checks, plus the base-table scan when `scan_unindexed`.

        Raises EnumerationError (naming the partitions or segments) when any read fails after
        botocore's retries, and ScanIncompleteError when the scan passes `deadline`.
        """
        legacy_rows, legacy_requests = self.count_legacy_rows()
        sharded = SagaRepository(
            self.client,
            self.table_name,
            phase=Phase.SHARDED,
            shard_count=self.shard_count,
            index_name=self.index_name,
            max_workers=self.max_workers,
            page_size=self.page_size,
        ).get_all_sagas()
        rows_per_shard = dict.fromkeys(range(self.shard_count), 0)
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
            expected = keys.shard_gsi4pk_for_person(item["personId"], self.shard_count)
            if expected != gsi4pk:
                misrouted.append(RowRef.of(item, expected))
        report = DriftReport(
            table_name=self.table_name,
            index_name=self.index_name,
            phase=self.phase,
            shard_count=self.shard_count,
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
                self.client,
                self.table_name,
                keys.LEGACY_GSI4PK,
                index_name=self.index_name,
                page_size=self.page_size,
            )
        except (ClientError, BotoCoreError) as err:
            raise EnumerationError({keys.LEGACY_GSI4PK: err}) from err

    def _with_scan(self, report: DriftReport, deadline: float | None) -> DriftReport:
        scan = self.scanner.scan(deadline=deadline)
        readable = {keys.LEGACY_GSI4PK, *keys.all_shard_gsi4pks(self.shard_count)}
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
