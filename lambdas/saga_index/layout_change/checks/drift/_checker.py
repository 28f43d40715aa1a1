"""The drift checker: what is wrong NOW in the renewal-saga index, judged against the state the
control record names (its routing), never a deploy phase. The checks, what they cost and the
metrics they become: docs/observability.md, "The drift guard".

Every run reads the index only (eventually consistent: a row re-stamped in the last moments may
be counted under its old key or both): the legacy key (a COUNT; read page by page only while no
layout of the state is legacy), the N shard keys (N = the largest shard count the state names,
else 16), judging each row by `Expectations`, and one Limit-1 Query per shard key from N to 4N
(the keys of the next two splits, where a lost record's rows sit), where any row is unexpected
(no reader of the state reads it). Every K-th run (`scan_due`) also scans the BASE table for
saga rows with no index key (unindexed) or with a GSI4PK that is no key at all or a shard key
at or above 4N (stray), and compares the open-saga index with it while that is `open`, or
`adding` once settled (_open_check). Anomalous rows (a personId that cannot be routed) on a read
key are reported, not drift (a human repairs them); on a key no reader reads they are drift.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import (
    DEFAULT_SHARD_COUNT,
    EnumerationError,
    InvalidInputError,
    InvalidKeyError,
    keys,
    names,
)
from saga_index.layout_change.checks import Expectations, ReadCounter, ReadsDone, Verdict
from saga_index.layout_change.checks.drift._beyond import read_beyond
from saga_index.layout_change.checks.drift._cursor import DriftCursor, KeyProgress, ReadTracker
from saga_index.layout_change.checks.drift._open_check import (
    DEFAULT_OPEN_RECHECK_SECONDS,
    OPEN_CHECK_ATTRIBUTES,
    open_watch,
    watched_open_index,
)
from saga_index.layout_change.checks.drift._report import SAMPLE_LIMIT, DriftReport, ReadTally
from saga_index.layout_change.checks.drift._scan_check import ScanStopped, take_up_scan, with_scan
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlState,
    ControlTiming,
    Phase,
    RecordCondition,
    Routing,
    resolve_routing,
    routing_for,
    utc_now,
)
from saga_index.store import count_partition, read_partitions
from saga_index.store.dynamo import (
    KeyReadIncompleteError,
    KeyReadPace,
    KeyReadPacer,
    PageListener,
    SagaTableScanner,
    ScanOptions,
    attribute_list,
    deserialize,
    on_index_partition,
    request_expressions,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

JUDGED_PAGE_ROWS = 1000  # rows per page of an index read whose rows are judged
# What the checks read of a row: judge() and RowRef (the scan's and the index reads' projection).
_JUDGED_ATTRIBUTES = ("PK", "SK", "sagaId", "personId", "GSI4PK", "GSI4SK")


class DriftChecker:
    """Runs the drift checks against one table (the client injected: thread-safe), judged
    against `state` (the control record's: its routing, and whether the STATE item is missing),
    a `routing`, or `phase` + `shard_count` (what a reader in that phase follows): exactly one.
    `now` (None: this process's wall clock) and `timing`'s in-flight margin say whether an
    `adding` open index's switch has settled (_open_check).
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        state: ControlState | None = None,
        routing: Routing | None = None,
        phase: Phase | str | None = None,
        shard_count: int = DEFAULT_SHARD_COUNT,
        index_name: str = names.INDEX_NAME,
        scan_options: ScanOptions | None = None,
        index_pace: KeyReadPace | None = None,
        max_workers: int = 16,
        page_size: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        open_recheck_seconds: float = DEFAULT_OPEN_RECHECK_SECONDS,
        now: datetime | None = None,
        timing: ControlTiming = DEFAULT_TIMING,
    ) -> None:
        if not table_name:
            raise InvalidInputError("table_name is required")
        if page_size is not None and page_size < 1:
            raise InvalidInputError(f"page_size must be >= 1, got {page_size}")
        at = utc_now() if now is None else now
        if state is not None:
            if routing is not None or phase is not None:
                raise InvalidInputError("give exactly one of state, routing or phase")
            routing = routing_for(state, at)
        self.expect = Expectations(resolve_routing(routing, phase, shard_count))
        self.open_watched = watched_open_index(state, self.routing, at, timing)
        self.record_missing = state is not None and state.condition is RecordCondition.MISSING
        self.record_version = state.version if state is not None else None
        self.client = client
        self.table_name = table_name
        self.index_name = index_name
        self.page_size = page_size
        self.max_workers = max_workers
        self.index_pace = index_pace or KeyReadPace()
        self.open_recheck_seconds = open_recheck_seconds
        self._clock = clock
        self._sleep = sleep
        self.scanner = SagaTableScanner(
            client,
            table_name,
            options=scan_options,
            clock=clock,
            sleep=sleep,
            attributes=(*_JUDGED_ATTRIBUTES, *OPEN_CHECK_ATTRIBUTES),
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
        cursor: DriftCursor | None = None,
    ) -> DriftReport:
        """The every-run checks, plus the base-table scan when `scan_unindexed`.

        Memory does not grow with the table: every read goes page by page, projected to what
        the judgement reads (or COUNT only), keeping exact counts and at most SAMPLE_LIMIT rows
        per finding. A row the index shows under two keys at once (a re-stamp between its two
        index writes) is counted under both.

        Every index read is paced per key (`index_pace`: at most its units_per_key in any
        second on any one key, store.dynamo.key_pace), keys in parallel on max_workers threads.

        Raises EnumerationError (naming the partitions or segments) when any read fails after
        botocore's retries, KeyReadIncompleteError when an index key's paced read cannot finish
        before `deadline`, and ScanIncompleteError when the scan passes it.

        `on_index_read` hears (partitions read, to read) after the legacy key's COUNT and after
        each partition's read; `on_scan_page` hears of every page of the scan.

        With a `cursor` (the guard's, across runs), each index read and the scan resume where
        the cursor says they stopped, a scan under way is read on whether or not one is due,
        and a read or scan that meets `deadline` stops at its last page and raises
        DriftReadIncomplete (what was read is in the cursor); the counts of a report then
        include what earlier runs of the same read counted.
        """
        expect = self.expect
        pacer = KeyReadPacer(self.index_pace, clock=self._clock, sleep=self._sleep)
        track = ReadTracker(cursor, pacer)
        segments = self.scanner.options.segments
        scan = take_up_scan(cursor, scan_unindexed, segments, self.open_watched)
        legacy_rows, requests = self.count_legacy_rows(
            pacer, deadline, track.progress("count:" + keys.LEGACY_GSI4PK)
        )
        track.stop_unless_done()
        tally = ReadTally()
        read_legacy = bool(legacy_rows and not expect.reads_legacy)
        shard_count = expect.shard_count
        shard_keys = list(keys.all_shard_gsi4pks(shard_count))
        reads = ReadCounter(on_index_read, total=1 + int(read_legacy) + len(shard_keys))
        reads.finished()  # the legacy key's COUNT
        if read_legacy:
            # Only then is the legacy key read, and each row judged (anomalous or unexpected):
            # while a layout is legacy it holds every unmoved saga, and its COUNT is all the
            # dashboard needs.
            legacy = self._read_partitions([keys.LEGACY_GSI4PK], reads, pacer, deadline, track)
            track.stop_unless_done()
            tally.merge(legacy[keys.LEGACY_GSI4PK])
        per_key = self._read_partitions(shard_keys, reads, pacer, deadline, track)
        track.stop_unless_done()
        rows_per_shard = {}
        for number, gsi4pk in enumerate(shard_keys):
            rows_per_shard[number] = per_key[gsi4pk].rows
            tally.merge(per_key[gsi4pk])
        tally.merge(read_beyond(self, shard_count, pacer, deadline, track))
        track.stop_unless_done()
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
            index_read_units=pacer.units_spent,
        )
        if not scan_unindexed and scan is None:
            return report
        watch = open_watch(self, pacer, deadline, self._sleep, SAMPLE_LIMIT)
        try:
            return with_scan(self.scanner, report, deadline, on_scan_page, watch, scan, self._clock)
        except ScanStopped:
            track.stop()
            raise

    def _read_partitions(
        self,
        partitions: list[str],
        reads: ReadCounter,
        pacer: KeyReadPacer,
        deadline: float | None,
        track: ReadTracker,
    ) -> dict[str, ReadTally]:
        """Each partition's tally, read in parallel on a bounded pool (each worker holds one
        page at a time), each key paced by `pacer`; EnumerationError naming every partition that
        failed. `reads` counts each partition read to its end."""
        progress = {gsi4pk: track.progress("read:" + gsi4pk) for gsi4pk in partitions}

        def tally_and_count(gsi4pk: str) -> ReadTally:
            tally = self.tally_partition(gsi4pk, pacer, deadline, progress[gsi4pk])
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

    def tally_partition(
        self,
        gsi4pk: str,
        pacer: KeyReadPacer,
        deadline: float | None,
        progress: KeyProgress | None = None,
    ) -> ReadTally:
        """The key's tally; with `progress`, resumed from it and kept in it page by page, a
        read that meets the deadline returning what it has (progress.done False)."""
        tally = progress.tally() if progress is not None else ReadTally()
        if progress is not None and progress.done:
            return tally
        try:
            self._tally_pages(gsi4pk, pacer, deadline, tally, progress)
        except KeyReadIncompleteError:
            if progress is None:
                raise
        return tally

    def _tally_pages(
        self,
        gsi4pk: str,
        pacer: KeyReadPacer,
        deadline: float | None,
        tally: ReadTally,
        progress: KeyProgress | None,
    ) -> None:
        start_key = progress.last_key if progress is not None else None
        if gsi4pk != keys.LEGACY_GSI4PK and gsi4pk not in self.expect.readable():
            # Every row under a shard key no reader reads is unexpected, whoever it belongs
            # to: a COUNT, and one page of rows to name when there are any.
            base = tally.rows

            def counted(count: int, last_key: Any) -> None:
                tally.rows = tally.counts[Verdict.UNEXPECTED_SHARDED] = base + count
                if progress is not None:
                    progress.record(tally, last_key)

            count, tally.requests = self._count(gsi4pk, pacer, deadline, start_key, counted)
            count += base
            if count:
                tally.requests += 1
                sample = self._query_page(gsi4pk, SAMPLE_LIMIT, pacer, deadline)
                for item in sample.get("Items", []):
                    tally.sample(Verdict.UNEXPECTED_SHARDED, deserialize(item), self.routing)
            tally.rows = count
            tally.counts[Verdict.UNEXPECTED_SHARDED] = count
            return
        request = self._judged_query(gsi4pk)
        if start_key:
            request["ExclusiveStartKey"] = start_key
        for page in pacer.pages(self.client.query, request, gsi4pk, deadline=deadline):
            tally.requests += 1
            for raw in page.get("Items", []):
                item = deserialize(raw)
                if item.get("GSI4PK") != gsi4pk:
                    raise InvalidKeyError(f"a read of {gsi4pk!r} returned a row under {item!r}")
                tally.rows += 1
                verdict = self.expect.judge(item)
                tally.counts[verdict] += 1
                tally.sample(verdict, item, self.routing)
            if progress is not None:
                progress.record(tally, page.get("LastEvaluatedKey"))

    def _judged_query(self, gsi4pk: str) -> dict[str, Any]:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.index_name,
            **request_expressions(
                key_condition=on_index_partition(gsi4pk),
                # Only what judge() and RowRef read: a saga row's other attributes never load.
                projection=attribute_list(
                    {f"#a{n}": name for n, name in enumerate(_JUDGED_ATTRIBUTES)}
                ),
            ),
        }
        # Bounded pages: up to max_workers partitions are read at once, each holding about two
        # pages (the one judged and the one arriving); a 1 MB page of projected rows is ~6,000.
        request["Limit"] = self.page_size or JUDGED_PAGE_ROWS
        return request

    def _query_page(
        self, gsi4pk: str, limit: int, pacer: KeyReadPacer, deadline: float | None
    ) -> Mapping[str, Any]:
        """The first page of `limit` rows only (LastEvaluatedKey ignored: rows to name)."""
        request = self._judged_query(gsi4pk)
        request["Limit"] = limit
        for page in pacer.pages(self.client.query, request, gsi4pk, deadline=deadline):
            return page
        return {}

    def _count(
        self,
        gsi4pk: str,
        pacer: KeyReadPacer | None,
        deadline: float | None,
        start_key: Mapping[str, Any] | None = None,
        on_page: Callable[[int, Any], None] | None = None,
    ) -> tuple[int, int]:
        return count_partition(
            self.client,
            self.table_name,
            gsi4pk,
            index_name=self.index_name,
            page_size=self.page_size,
            pacer=pacer,
            deadline=deadline,
            start_key=start_key,
            on_page=on_page,
        )

    def count_legacy_rows(
        self,
        pacer: KeyReadPacer | None = None,
        deadline: float | None = None,
        progress: KeyProgress | None = None,
    ) -> tuple[int, int]:
        """(rows on the legacy key, requests): a COUNT Query to its last page, paced by
        `pacer` when given; with `progress`, resumed from it and kept in it page by page (a
        count that meets the deadline returns what it has, progress.done False)."""
        tally = progress.tally() if progress is not None else ReadTally()
        if progress is not None and progress.done:
            return tally.rows, 0
        base = tally.rows

        def counted(count: int, last_key: Any) -> None:
            tally.rows = base + count
            if progress is not None:
                progress.record(tally, last_key)

        start_key = progress.last_key if progress is not None else None
        try:
            count, requests = self._count(keys.LEGACY_GSI4PK, pacer, deadline, start_key, counted)
        except (ClientError, BotoCoreError) as err:
            raise EnumerationError({keys.LEGACY_GSI4PK: err}) from err
        except KeyReadIncompleteError:
            if progress is None:
                raise
            return tally.rows, 0
        return base + count, requests
