"""Drift checks of the renewal-saga index: what is wrong NOW, judged against the state the control
record names (its routing: the layouts readers read and writers stamp), never a deploy phase.

Every run (cheap: reads the index only)
  legacyRows     rows on GSI4PK = the legacy key: a COUNT Query, every page (raw).
  rowsPerShard   rows under each shard key 0..N-1 (complete or EnumerationError), N = the
                 largest shard count the state names, or the default 16 when it names none;
                 shardSkew = max / mean (raw). A key some reader of the state reads is read page
                 by page, projected to what the checks judge; any other is a COUNT Query (plus
                 one page of rows to name when it holds any).
  unexpectedLegacyRows  saga rows with a usable personId on the legacy key while no layout of the
                 state is legacy (the legacy key is then read page by page; otherwise only
                 counted).
  unexpectedShardedRows rows under one of those shard keys that no layout of the state reads
                 (any of them while the state is legacy).
  misroutedRows  rows under a shard key the state reads that is not their person's key in any
                 layout of the state (a writer with the wrong N, an old writer): the person's
                 by-person read never looks there. While rows move, a row still on its source key
                 is "not yet moved", not misrouted.
  anomalousRows  rows read in full whose personId cannot be routed (missing, not a string,
                 GSI4SK naming someone else). Reported, not drift: the foundation returns them as
                 stored and a human repairs them.

Every K-th run (reads the whole BASE table: a rate-limited parallel Scan)
  unindexedRows  saga rows with no GSI4PK or no GSI4SK. DynamoDB leaves such rows out of the
                 index, so no Query can ever see them; only a Scan of the table finds them.
  strayRows      saga rows whose GSI4PK is neither the legacy key nor one of the N shard keys
                 read every run ("RenewalSaga#20" under N=16, a garbled value).

Memory does not grow with the table: counts are exact, at most SAMPLE_LIMIT rows are named per
finding, and no read keeps more than the page in hand.

Every wrong-now count is drift in every state (`DriftReport.findings`), and so is a control record
whose STATE item is missing while history exists (`control_record_missing`).

A progress display may listen (`DriftChecker.check`'s `on_index_read` and `on_scan_page`); the
listeners change nothing that is read or reported.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import keys, names
from saga_index.index.errors import EnumerationError, InvalidInputError, InvalidKeyError
from saga_index.index.layout import LEGACY, Layout, StatePhase
from saga_index.index.model import Phase
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState, RecordCondition
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.dynamo.pages import query_pages
from saga_index.store.dynamo.scan import PageListener, SagaTableScanner, ScanOptions
from saga_index.store.repository import (
    count_partition,
    read_partitions,
    resolve_routing,
    routing_phase,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_SCAN_EVERY = 12  # with the 5-minute schedule: one base-table scan an hour
SAMPLE_LIMIT = 100  # rows listed per finding in a report; the counts are always exact
JUDGED_PAGE_ROWS = 1000  # rows per page of an index read whose rows are judged

# Hears (reads finished, reads in all) each time one read of a step finishes, one call at a
# time; for a progress display. It must not raise.
ReadsDone = Callable[[int, int], None]


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


# ---- what a state expects --------------------------------------------------------------------


class Verdict(StrEnum):
    """Where a row on the legacy key or a shard key stands in a state."""

    OK = "ok"
    UNEXPECTED_LEGACY = "unexpected-legacy"
    UNEXPECTED_SHARDED = "unexpected-sharded"
    MISROUTED = "misrouted"
    ANOMALOUS = "anomalous"


@dataclass(frozen=True)
class Expectations:
    """Where a state's rows may sit: the keys its readers read and each person's keys."""

    routing: Routing

    @property
    def layouts(self) -> tuple[Layout, ...]:
        return tuple(dict.fromkeys((self.routing.source, self.routing.target)))

    @property
    def reads_legacy(self) -> bool:
        return LEGACY in self.layouts

    @property
    def shard_count(self) -> int:
        """The N whose shard keys the guard reads every run: the largest the state names, else
        the default (a legacy state still watches the keys a sharded writer would stamp)."""
        counts = [layout.shard_count for layout in self.layouts if layout.shard_count]
        return max(counts, default=names.DEFAULT_SHARD_COUNT)

    def readable(self) -> frozenset[str]:
        """Every GSI4PK an enumeration of this state reads."""
        return frozenset(self.routing.enumeration_keys())

    def person_keys(self, person_id: str) -> frozenset[str]:
        """The keys a row of this person may carry in this state: one per layout."""
        return frozenset(layout.key_for(person_id) for layout in self.layouts)

    def judge(self, item: Mapping[str, Any]) -> Verdict:
        """What is wrong now with a row on the legacy key or a shard key (InvalidKeyError for
        any other GSI4PK: those are the scan's stray rows). A row on a key no reader of the
        state reads is unexpected whoever it belongs to; on a key that is read, a row whose
        personId cannot be routed is anomalous."""
        gsi4pk = item.get(names.INDEX_PARTITION_KEY)
        if not isinstance(gsi4pk, str) or (
            gsi4pk != keys.LEGACY_GSI4PK and keys.parse_gsi4pk(gsi4pk) is None
        ):
            raise InvalidKeyError(f"not a legacy or shard key: {gsi4pk!r}")
        if gsi4pk not in self.readable():
            if gsi4pk == keys.LEGACY_GSI4PK:
                # Only a row the backfill can move must be gone before `sharded`.
                if keys.person_anomaly(item) is not None:
                    return Verdict.ANOMALOUS
                return Verdict.UNEXPECTED_LEGACY
            return Verdict.UNEXPECTED_SHARDED
        if keys.person_anomaly(item) is not None:
            return Verdict.ANOMALOUS
        if gsi4pk not in self.person_keys(item["personId"]):
            return Verdict.MISROUTED
        return Verdict.OK


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

    @property
    def phase(self) -> StatePhase:
        return routing_phase(self.routing)

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
        }


def shard_skew(rows_per_shard: Mapping[int, int], shard_count: int) -> float:
    total = sum(rows_per_shard.values())
    if total == 0:
        return 0.0
    mean = total / shard_count
    return max(rows_per_shard.values()) / mean


# ---- the checks -----------------------------------------------------------------------------


class DriftChecker:
    """Runs the drift checks against one table. The client is injected (thread-safe).

    Judged against `state` (the control record's: its routing, and whether the STATE item is
    missing), a `routing`, or `phase` + `shard_count` (what a reader in that phase follows);
    exactly one of the three.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        state: ControlState | None = None,
        routing: Routing | None = None,
        phase: Phase | StatePhase | str | None = None,
        shard_count: int = names.DEFAULT_SHARD_COUNT,
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
        if state is not None:
            if routing is not None or phase is not None:
                raise InvalidInputError("give exactly one of state, routing or phase")
            routing = routing_for(state)
        self.expect = Expectations(resolve_routing(routing, phase, shard_count))
        self.record_missing = state is not None and state.condition is RecordCondition.MISSING
        self.record_version = state.version if state is not None else None
        self.client = client
        self.table_name = table_name
        self.index_name = index_name
        self.page_size = page_size
        self.max_workers = max_workers
        self.scanner = SagaTableScanner(
            client,
            table_name,
            options=scan_options,
            clock=clock,
            sleep=sleep,
            attributes=_JUDGED_ATTRIBUTES,
        )

    @property
    def routing(self) -> Routing:
        return self.expect.routing

    def check(
        self,
        *,
        scan_unindexed: bool,
        deadline: float | None = None,
        on_index_read: ReadsDone | None = None,
        on_scan_page: PageListener | None = None,
    ) -> DriftReport:
        """The every-run checks, plus the base-table scan when `scan_unindexed`.

        Memory does not grow with the table: every read goes page by page, projected to what
        the judgement reads (or COUNT only where only a count is needed), keeping exact counts
        and at most SAMPLE_LIMIT rows per finding. A row the index shows under two keys at once
        (a re-stamp between its two index writes) is counted under both.

        Raises EnumerationError (naming the partitions or segments) when any read fails after
        botocore's retries, and ScanIncompleteError when the scan passes `deadline`.

        `on_index_read` hears (partitions read, partitions to read) after the legacy key's
        COUNT and after each partition's read; the number to read is known after that COUNT
        (whether the legacy key is read too). `on_scan_page` hears of every page of the scan.
        """
        expect = self.expect
        legacy_rows, requests = self.count_legacy_rows()
        tally = _Tally()
        read_legacy = bool(legacy_rows and not expect.reads_legacy)
        shard_count = expect.shard_count
        shard_keys = list(keys.all_shard_gsi4pks(shard_count))
        reads = _ReadCounter(on_index_read, total=1 + int(read_legacy) + len(shard_keys))
        reads.finished()  # the legacy key's COUNT
        if read_legacy:
            # Only then is the legacy key read, and each row judged (anomalous or unexpected):
            # while a layout is legacy it holds every unmoved saga, and its COUNT is all the
            # dashboard needs.
            tally.merge(self._read_partitions([keys.LEGACY_GSI4PK], reads)[keys.LEGACY_GSI4PK])
        per_key = self._read_partitions(shard_keys, reads)
        rows_per_shard = {}
        for number, gsi4pk in enumerate(shard_keys):
            rows_per_shard[number] = per_key[gsi4pk].rows
            tally.merge(per_key[gsi4pk])
        report = DriftReport(
            table_name=self.table_name,
            index_name=self.index_name,
            routing=self.routing,
            shard_count=shard_count,
            legacy_rows=legacy_rows,
            rows_per_shard=rows_per_shard,
            misrouted_rows=tally.counts[Verdict.MISROUTED],
            anomalous_rows=tally.counts[Verdict.ANOMALOUS],
            unexpected_legacy_rows=tally.counts[Verdict.UNEXPECTED_LEGACY],
            unexpected_sharded_rows=tally.counts[Verdict.UNEXPECTED_SHARDED],
            control_record_missing=self.record_missing,
            record_version=self.record_version if self.record_missing else None,
            misrouted=tuple(tally.samples[Verdict.MISROUTED]),
            unexpected_legacy=tuple(tally.samples[Verdict.UNEXPECTED_LEGACY]),
            unexpected_sharded=tuple(tally.samples[Verdict.UNEXPECTED_SHARDED]),
            requests=requests + tally.requests,
        )
        if not scan_unindexed:
            return report
        return self._with_scan(report, deadline, on_scan_page)

    def _read_partitions(self, partitions: list[str], reads: _ReadCounter) -> dict[str, _Tally]:
        """Each partition's tally, read in parallel on a bounded pool (each worker holds one
        page at a time); EnumerationError naming every partition that failed. `reads` counts
        each partition read to its end."""

        def tally_and_count(gsi4pk: str) -> _Tally:
            tally = self._tally_partition(gsi4pk)
            reads.finished()
            return tally

        return read_partitions(
            partitions,
            tally_and_count,
            max_workers=self.max_workers,
            thread_name_prefix="drift-read",
            logger=log,
            failure_message="drift read failed on %s: %s",
        )

    def _tally_partition(self, gsi4pk: str) -> _Tally:
        tally = _Tally()
        if gsi4pk != keys.LEGACY_GSI4PK and gsi4pk not in self.expect.readable():
            # Every row under a shard key no reader reads is unexpected, whoever it belongs
            # to: a COUNT, and one page of rows to name when there are any.
            count, tally.requests = self._count(gsi4pk)
            if count:
                tally.requests += 1
                for item in self._query_page(gsi4pk, limit=SAMPLE_LIMIT).get("Items", []):
                    self._sample(tally, Verdict.UNEXPECTED_SHARDED, deserialize(item))
            tally.rows = count
            tally.counts[Verdict.UNEXPECTED_SHARDED] = count
            return tally
        for page in query_pages(self.client, self._judged_query(gsi4pk)):
            tally.requests += 1
            for raw in page.get("Items", []):
                item = deserialize(raw)
                if item.get("GSI4PK") != gsi4pk:
                    raise InvalidKeyError(f"a read of {gsi4pk!r} returned a row under {item!r}")
                tally.rows += 1
                verdict = self.expect.judge(item)
                tally.counts[verdict] += 1
                self._sample(tally, verdict, item)
        return tally

    def _sample(self, tally: _Tally, verdict: Verdict, item: Mapping[str, Any]) -> None:
        sample = tally.samples.get(verdict)
        if sample is None or len(sample) >= SAMPLE_LIMIT:
            return
        # Where writers would put it now (None: its personId cannot be routed at all).
        goes_to = None
        if keys.person_anomaly(item) is None:
            goes_to = self.routing.write_key(item["personId"])
        sample.append(RowRef.of(item, goes_to))

    def _judged_query(self, gsi4pk: str) -> dict[str, Any]:
        aliases = {f"#a{n}": name for n, name in enumerate(_JUDGED_ATTRIBUTES)}
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.index_name,
            "KeyConditionExpression": "#pk = :pk",
            # Only what judge() and RowRef read: a saga row's other attributes never load.
            "ProjectionExpression": ", ".join(aliases),
            "ExpressionAttributeNames": {"#pk": names.INDEX_PARTITION_KEY, **aliases},
            "ExpressionAttributeValues": {":pk": {"S": gsi4pk}},
        }
        # Bounded pages: up to max_workers partitions are read at once, each holding about two
        # pages (the one judged and the one arriving); a 1 MB page of projected rows is ~6,000.
        request["Limit"] = self.page_size or JUDGED_PAGE_ROWS
        return request

    def _query_page(self, gsi4pk: str, *, limit: int) -> Mapping[str, Any]:
        request = self._judged_query(gsi4pk)
        request["Limit"] = limit
        response: Mapping[str, Any] = self.client.query(**request)
        return response

    def _count(self, gsi4pk: str) -> tuple[int, int]:
        return count_partition(
            self.client,
            self.table_name,
            gsi4pk,
            index_name=self.index_name,
            page_size=self.page_size,
        )

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

    def _with_scan(
        self, report: DriftReport, deadline: float | None, on_page: PageListener | None
    ) -> DriftReport:
        watched = {keys.LEGACY_GSI4PK, *keys.all_shard_gsi4pks(report.shard_count)}
        unindexed = _Finding()
        stray = _Finding()

        def visit(item: dict[str, Any]) -> None:
            gsi4pk, gsi4sk = item.get("GSI4PK"), item.get("GSI4SK")
            if not isinstance(gsi4pk, str) or not isinstance(gsi4sk, str):
                # DynamoDB indexes a row only when both key attributes are present strings.
                unindexed.add(item)
            elif gsi4pk not in watched:
                stray.add(item)

        stats = self.scanner.scan_each(visit, deadline=deadline, on_page=on_page)
        return replace(
            report,
            unindexed_rows=unindexed.count,
            stray_rows=stray.count,
            scanned_saga_rows=stats.rows,
            unindexed=unindexed.sample(),
            stray=stray.sample(),
            requests=report.requests + stats.requests,
        )


# What the checks read of a row: judge() and RowRef (the scan's and the index reads' projection).
_JUDGED_ATTRIBUTES = ("PK", "SK", "sagaId", "personId", "GSI4PK", "GSI4SK")
# The wrong-now verdicts whose rows a report names.
_NAMED = (Verdict.MISROUTED, Verdict.UNEXPECTED_LEGACY, Verdict.UNEXPECTED_SHARDED)


class _ReadCounter:
    """Counts the reads of one step and tells `listener` (if any), one call at a time."""

    def __init__(self, listener: ReadsDone | None, *, total: int) -> None:
        self._listener = listener
        self._total = total
        self._done = 0
        self._lock = threading.Lock()

    def finished(self) -> None:
        if self._listener is None:
            return
        with self._lock:
            self._done += 1
            self._listener(self._done, self._total)


class _Tally:
    """One read's exact counts by verdict, and at most SAMPLE_LIMIT named rows per finding."""

    def __init__(self) -> None:
        self.rows = 0
        self.requests = 0
        self.counts: Counter[Verdict] = Counter()
        self.samples: dict[Verdict, list[RowRef]] = {verdict: [] for verdict in _NAMED}

    def merge(self, other: _Tally) -> None:
        self.requests += other.requests
        self.counts.update(other.counts)
        for verdict, refs in other.samples.items():
            sample = self.samples[verdict]
            sample.extend(refs[: max(0, SAMPLE_LIMIT - len(sample))])


class _Finding:
    """A scan finding: its exact count and its first rows by table key (at most SAMPLE_LIMIT,
    so the sample does not depend on the order the segments arrive in)."""

    def __init__(self) -> None:
        self.count = 0
        self._rows: list[RowRef] = []

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
