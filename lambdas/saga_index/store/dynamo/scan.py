"""The rate-limited parallel Scan of the base table's saga rows (drift and parity read it).

A Scan reads the whole table, so it is paced: a ReadRateLimiter keeps the average read rate at
ScanOptions.read_units_per_second across all segments, from what each page cost. `scan` returns
every saga row (table key RSAGA#<id> / META); `scan_each` hands each saga row to a visitor as its
page arrives and keeps none (a caller that only counts holds one page per segment, whatever the
size of the table). Either completes or raises: a failed segment stops the others
(EnumerationError), and a deadline that passes first is ScanIncompleteError; no partial result
is ever returned as complete. Both take an optional `on_page` listener that hears of every page
as it is read (a `PageRead`: what DynamoDB examined, the saga rows among it, what it cost), for
a progress display; it changes nothing the scan reads or returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import (
    EnumerationError,
    InvalidInputError,
    InvalidKeyError,
    SagaIndexError,
    keys,
)
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.dynamo.expressions import Expression, attribute_list, request_expressions
from saga_index.store.dynamo.pages import paced_pages
from saga_index.store.dynamo.scan_budget import ReadRateLimiter, ScanOptions, _read_units

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

_SAGA_PROJECTION = ("PK", "SK", "sagaId", "personId", "state", "GSI4PK", "GSI4SK", "entityType")


class ScanIncompleteError(SagaIndexError):
    """The base-table scan ran out of time: no partial count is ever reported as a result."""

    def __init__(
        self,
        unfinished: list[str],
        rows_read: int,
        budget_seconds: float,
        read_units: float = 0.0,
    ) -> None:
        self.unfinished = list(unfinished)
        self.rows_read = rows_read
        # What the pages read before the deadline cost: a scan that resumes counts them.
        self.read_units = read_units
        super().__init__(
            f"base-table scan did not finish within {budget_seconds:.0f} s: "
            f"{len(self.unfinished)} segment(s) unfinished ({', '.join(self.unfinished)}) after "
            f"{rows_read} saga row(s); raise the scan rate or the time budget, no partial "
            "result returned"
        )


@dataclass(frozen=True)
class PageRead:
    """One Scan page, as a progress display counts it."""

    scanned: int  # items DynamoDB examined (ScannedCount): what DescribeTable's ItemCount counts
    rows: int  # saga rows among them (handed to the visitor)
    read_units: float  # what the page cost (ConsumedCapacity, or the estimate without it)


# Hears of every page of a scan, one call at a time, on the worker thread of the page's
# segment. It must not raise: its exception is not a read error and propagates out of the scan.
PageListener = Callable[[PageRead], None]


class SegmentPositions(Protocol):
    """Where each segment of a scan that spans runs stands (the drift guard's cursor keeps it):
    a segment at its end is not read again, another starts after its last key. `advanced`
    hears of each page after its rows were visited, under the same lock as the visitor, so
    what the visitor counted and where each segment stands always agree at a page's end,
    which is the only place a scan stops."""

    def segment_done(self, segment: int) -> bool: ...

    def start_key(self, segment: int) -> Mapping[str, Any] | None: ...

    def advanced(self, segment: int, last_key: Mapping[str, Any] | None) -> None: ...


@dataclass(frozen=True)
class ScanStats:
    """What a scan read and what it cost."""

    rows: int  # saga rows handed to the visitor
    requests: int
    scanned_count: int
    read_units: float
    seconds_waited: float


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
    """Parallel Scan of the base table returning its saga rows (table key RSAGA#<id> / META),
    projected to `attributes` (PK and SK are always read: they pick the saga rows)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        options: ScanOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        attributes: Sequence[str] = _SAGA_PROJECTION,
    ) -> None:
        if not table_name:
            raise InvalidInputError("table_name is required")
        self.client = client
        self.table_name = table_name
        self.options = options or ScanOptions()
        self.attributes = tuple(dict.fromkeys(("PK", "SK", *attributes)))
        self._clock = clock
        self._sleep = sleep

    def scan(
        self, *, deadline: float | None = None, on_page: PageListener | None = None
    ) -> TableScan:
        """All saga rows, sorted by table key, or an error: EnumerationError naming the failed
        segments, or ScanIncompleteError when `deadline` (a value of the injected clock) passes
        first. `on_page` hears of every page as it is read."""
        items: list[dict[str, Any]] = []
        stats = self.scan_each(items.append, deadline=deadline, on_page=on_page)
        items.sort(key=keys.table_key_of)
        return TableScan(
            items=items,
            requests=stats.requests,
            scanned_count=stats.scanned_count,
            read_units=stats.read_units,
            seconds_waited=stats.seconds_waited,
        )

    def scan_each(
        self,
        visit: Callable[[dict[str, Any]], None],
        *,
        deadline: float | None = None,
        on_page: PageListener | None = None,
        positions: SegmentPositions | None = None,
    ) -> ScanStats:
        """Hand every saga row (deserialised) to `visit`, one call at a time (calls never
        overlap, in no particular order), keeping none. Errors as `scan`'s; rows already
        visited when one is raised are no result. `on_page`, when given, hears of each page
        after its rows were visited (calls never overlap either). With `positions`, each
        segment resumes where they say and they hear of every page: what was visited before
        ScanIncompleteError is then the part of a scan the next run does not read again."""
        options = self.options
        limiter = ReadRateLimiter(
            options.read_units_per_second, clock=self._clock, sleep=self._sleep
        )
        stop = threading.Event()
        visiting = threading.Lock()
        listener = _Serialised(on_page) if on_page is not None else None
        total = options.segments
        started = self._clock()
        failures: dict[str, BaseException] = {}
        unfinished: list[str] = []
        reads = [_SegmentRead() for _ in range(total)]
        with ThreadPoolExecutor(max_workers=total, thread_name_prefix="saga-scan") as pool:
            futures = {
                n: pool.submit(
                    self._scan_segment,
                    n,
                    limiter,
                    stop,
                    deadline,
                    visit,
                    visiting,
                    reads[n],
                    listener,
                    positions,
                )
                for n in range(total)
                if positions is None or not positions.segment_done(n)
            }
            for n, future in futures.items():
                name = f"segment {n} of {total}"
                try:
                    future.result()
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
        rows = sum(r.rows for r in reads)
        if unfinished:
            raise ScanIncompleteError(
                unfinished, rows, (deadline or started) - started, limiter.units_spent
            )
        return ScanStats(
            rows=rows,
            requests=sum(r.requests for r in reads),
            scanned_count=sum(r.scanned_count for r in reads),
            read_units=limiter.units_spent,
            seconds_waited=limiter.seconds_waited,
        )

    def _request(self, segment: int) -> dict[str, Any]:
        aliases = {f"#a{n}": attr for n, attr in enumerate(self.attributes)}
        by_attr = {attr: alias for alias, attr in aliases.items()}
        # Only saga rows cross the wire; the read cost is the same either way (a Scan is
        # charged for what it examines), so the rate limiter uses ConsumedCapacity.
        saga_rows_only = Expression(
            f"begins_with({by_attr['PK']}, :saga) AND {by_attr['SK']} = :meta",
            names={by_attr["PK"]: "PK", by_attr["SK"]: "SK"},
            slots=frozenset({":saga", ":meta"}),
        ).given({":saga": {"S": keys.SAGA_PK_PREFIX}, ":meta": {"S": keys.SAGA_SK}})
        return {
            "TableName": self.table_name,
            "Segment": segment,
            "TotalSegments": self.options.segments,
            "Limit": self.options.page_size,
            "ConsistentRead": self.options.consistent_read,
            "ReturnConsumedCapacity": "TOTAL",
            **request_expressions(projection=attribute_list(aliases), filter=saga_rows_only),
            # Said explicitly: the drift guard's role may Scan only with dynamodb:Select =
            # SPECIFIC_ATTRIBUTES (infra/drift.py), and IAM evaluates the request's value.
            "Select": "SPECIFIC_ATTRIBUTES",
        }

    def _scan_segment(
        self,
        segment: int,
        limiter: ReadRateLimiter,
        stop: threading.Event,
        deadline: float | None,
        visit: Callable[[dict[str, Any]], None],
        visiting: threading.Lock,
        read: _SegmentRead,
        listener: _Serialised | None = None,
        positions: SegmentPositions | None = None,
    ) -> None:
        def before_each_page() -> None:
            if stop.is_set():
                raise _Stopped
            if deadline is not None and self._clock() >= deadline:
                raise _DeadlinePassed
            limiter.wait()

        request = self._request(segment)
        start_key = None if positions is None else positions.start_key(segment)
        if start_key:
            request["ExclusiveStartKey"] = dict(start_key)
        for response in paced_pages(self.client.scan, request, before_each=before_each_page):
            read.requests += 1
            raw_items = response.get("Items", [])
            scanned = int(response.get("ScannedCount", len(raw_items)))
            read.scanned_count += scanned
            units = _read_units(response, consistent=self.options.consistent_read)
            limiter.spend(units)
            rows = 0
            for raw in raw_items:
                item = deserialize(raw)
                if _is_saga_row(item):
                    read.rows += 1
                    rows += 1
                    with visiting:
                        visit(item)
            if positions is not None:
                with visiting:
                    positions.advanced(segment, response.get("LastEvaluatedKey"))
            if listener is not None:
                listener(PageRead(scanned=scanned, rows=rows, read_units=units))


class _DeadlinePassed(Exception):
    pass


class _Serialised:
    """A page listener called by one segment at a time."""

    def __init__(self, listener: PageListener) -> None:
        self._listener = listener
        self._lock = threading.Lock()

    def __call__(self, page: PageRead) -> None:
        with self._lock:
            self._listener(page)


@dataclass
class _SegmentRead:
    rows: int = 0
    requests: int = 0
    scanned_count: int = 0


def _is_saga_row(item: Mapping[str, Any]) -> bool:
    try:
        keys.parse_saga_table_key(item.get("PK"), item.get("SK"))  # type: ignore[arg-type]
    except InvalidKeyError:
        return False
    return True
