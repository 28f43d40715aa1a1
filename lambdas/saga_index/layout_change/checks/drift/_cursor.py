"""The drift guard's read cursor: where a read of the index that did not finish in one run
stopped, so the next run resumes it (docs/control-contract.md, "The drift cursor").

  PK = "RSAGA_INDEX#DRIFT#CURSOR", SK = "CURSOR"  (its own partition key: outside the control
  partition and the fence slots, and no saga read sees it)

Attributes: `entityType`, `format` (CURSOR_FORMAT), `recordVersion` (the control record's version
the read was taken under; -1 when the record has none), `layout` (the routing it judges by),
`takenAt`, `progress` (a JSON string: per read, the Query's LastEvaluatedKey, whether the read
reached its end, and what it counted so far) and `lastReadUnits` (what the last complete read
cost, the measure of "N % read"); while a base-table scan is under way, `scan` (a JSON string:
per segment its LastEvaluatedKey, and what the scan counted so far: _scan_cursor), and
`lastScanUnits` (what the last complete scan cost). A cursor taken under another record version
or layout is discarded; one that does not parse is discarded with an error in the log; either
way the read starts over, and nothing but this item is written.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from saga_index.index import SagaIndexError, names
from saga_index.layout_change.checks import Verdict
from saga_index.layout_change.checks.drift._report import ReadTally
from saga_index.layout_change.checks.drift._scan_cursor import ScanCursorError, ScanProgress
from saga_index.store.dynamo import deserialize, serialize, to_plain_json

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from saga_index.layout_change.record import Routing
    from saga_index.store.dynamo import KeyReadPacer

log = logging.getLogger(__name__)

CURSOR_FORMAT = 1
ENTITY_DRIFT_CURSOR = "RenewalSagaIndexDriftCursor"
CURSOR_KEY = {"PK": {"S": names.DRIFT_CURSOR_PK}, "SK": {"S": names.DRIFT_CURSOR_SK}}


class CursorError(SagaIndexError):
    """A cursor item that does not parse."""


@dataclass
class KeyProgress:
    """One read of one key (a COUNT or a judged read): where it stopped, what it counted."""

    last_key: dict[str, Any] | None = None
    done: bool = False
    rows: int = 0
    counts: Counter[Verdict] = field(default_factory=Counter)

    def tally(self) -> ReadTally:
        """A tally that starts from what earlier runs counted (their named rows are not kept)."""
        tally = ReadTally()
        tally.rows = self.rows
        tally.counts.update(self.counts)
        return tally

    def record(self, tally: ReadTally, last_key: Any) -> None:
        """After a page: where the read stands (None: it reached the key's end)."""
        self.rows = tally.rows
        self.counts = Counter(tally.counts)
        self.last_key = dict(last_key) if last_key else None
        self.done = not last_key

    def to_json(self) -> dict[str, Any]:
        return {
            # As the Query returned it (AttributeValues): the next run's ExclusiveStartKey.
            "lastKey": self.last_key,
            "done": self.done,
            "rows": self.rows,
            "counts": {verdict.value: n for verdict, n in self.counts.items() if n},
        }

    @classmethod
    def from_json(cls, raw: Any) -> KeyProgress:
        if not isinstance(raw, dict):
            raise CursorError(f"a key's progress must be an object, got {raw!r}")
        last_key = raw.get("lastKey")
        rows, done = raw.get("rows"), raw.get("done")
        if last_key is not None and not isinstance(last_key, dict):
            raise CursorError(f"lastKey must be an object or null, got {last_key!r}")
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise CursorError(f"rows must be a count, got {rows!r}")
        if not isinstance(done, bool) or done == (last_key is not None):
            raise CursorError(f"done ({done!r}) must be true exactly when lastKey is null")
        counts: Counter[Verdict] = Counter()
        for name, n in dict(raw.get("counts") or {}).items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise CursorError(f"count of {name!r} must be a count, got {n!r}")
            try:
                counts[Verdict(name)] = n
            except ValueError as err:
                raise CursorError(f"{name!r} is no verdict") from err
        return cls(last_key, done, rows, counts)


@dataclass
class DriftCursor:
    """The read in progress (`reads`, by "count:<key>" / "read:<key>", and `scan` when it
    scans the base table) under one record version and layout, and what the last complete
    read (and scan) cost."""

    record_version: int
    layout: str
    reads: dict[str, KeyProgress] = field(default_factory=dict)
    last_read_units: float | None = None
    # What the runs of this read spent so far (their paced index reads; the scan's own apart).
    units_read: float = 0.0
    scan: ScanProgress | None = None
    last_scan_units: float | None = None

    def progress(self, read: str) -> KeyProgress:
        return self.reads.setdefault(read, KeyProgress())

    def stopped(self, units: float) -> None:
        """A run ended with the read unfinished, having spent `units` on the index."""
        self.units_read += units

    def completed(self, units: float) -> None:
        """A run finished the read, having spent `units` on the index: the next read starts
        over, measured against this one (and against this scan, when it scanned)."""
        self.last_read_units = self.units_read + units
        self.units_read = 0.0
        self.reads = {}
        scan = self.scan
        if scan is not None:
            self.last_scan_units = scan.units
            self.scan = ScanProgress.fresh(scan.segments, scan.open_index) if scan.again else None

    @property
    def reads_done(self) -> int:
        return sum(p.done for p in self.reads.values())

    def percent_read(self) -> float | None:
        """Of the last complete read's units, and while a scan is under way the last complete
        scan's too (capped below 100 while incomplete); None before any read, or while
        scanning any scan, has completed: no measure."""
        if not self.last_read_units:
            return None
        whole, spent = self.last_read_units, self.units_read
        if self.scan is not None:
            if not self.last_scan_units:
                return None
            whole, spent = whole + self.last_scan_units, spent + self.scan.units
        return min(99.0, 100.0 * spent / whole)


def parse_cursor(item: dict[str, Any]) -> DriftCursor:
    """The cursor an item holds (deserialised); CursorError naming what does not parse."""
    if item.get("entityType") != ENTITY_DRIFT_CURSOR or item.get("format") != CURSOR_FORMAT:
        raise CursorError(
            f"not a format-{CURSOR_FORMAT} {ENTITY_DRIFT_CURSOR} item: entityType "
            f"{item.get('entityType')!r}, format {item.get('format')!r}"
        )
    version, layout = item.get("recordVersion"), item.get("layout")
    last, spent = item.get("lastReadUnits"), item.get("unitsRead", 0)
    last_scan = item.get("lastScanUnits")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CursorError(f"recordVersion must be an integer, got {version!r}")
    if not isinstance(layout, str) or not layout:
        raise CursorError(f"layout must be a non-empty string, got {layout!r}")
    if last is not None and (isinstance(last, bool) or not isinstance(last, int | float)):
        raise CursorError(f"lastReadUnits must be a number, got {last!r}")
    if isinstance(spent, bool) or not isinstance(spent, int | float) or spent < 0:
        raise CursorError(f"unitsRead must be a number >= 0, got {spent!r}")
    if last_scan is not None and (
        isinstance(last_scan, bool) or not isinstance(last_scan, int | float)
    ):
        raise CursorError(f"lastScanUnits must be a number, got {last_scan!r}")
    try:
        raw = json.loads(item.get("progress", ""))
    except (TypeError, ValueError) as err:
        raise CursorError(f"progress is not JSON: {err}") from err
    if not isinstance(raw, dict):
        raise CursorError(f"progress must be an object, got {raw!r}")
    reads = {str(name): KeyProgress.from_json(value) for name, value in raw.items()}
    scan = None
    if item.get("scan") is not None:
        try:
            scan = ScanProgress.from_json(json.loads(item["scan"]))
        except (TypeError, ValueError) as err:
            raise CursorError(f"scan is not JSON: {err}") from err
        except ScanCursorError as err:
            raise CursorError(f"scan: {err}") from err
    return DriftCursor(
        version,
        layout,
        reads,
        float(last) if last is not None else None,
        float(spent),
        scan,
        float(last_scan) if last_scan is not None else None,
    )


def cursor_layout(routing: Routing) -> str:
    """The routing a read judges by, as the cursor names it: a cursor taken under another is
    discarded."""
    return f"{routing.phase.value}:{routing.source}->{routing.target}(writes {routing.writes})"


class CursorStore:
    """Reads and writes the one cursor item (GetItem consistent, PutItem: nothing else)."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def resume(self, record_version: int, layout: str) -> DriftCursor:
        """The read to resume, or a fresh one (saying in the log why an item was discarded);
        a fresh one keeps the last complete read's cost when the item holds one."""
        response = self.client.get_item(
            TableName=self.table_name, Key=CURSOR_KEY, ConsistentRead=True
        )
        if "Item" not in response:
            return DriftCursor(record_version, layout)
        try:
            cursor = parse_cursor(to_plain_json(deserialize(response["Item"])))
        except (CursorError, TypeError, ValueError) as err:
            log.error("drift cursor discarded, the read starts over: it does not parse: %s", err)
            return DriftCursor(record_version, layout)
        if (cursor.record_version, cursor.layout) != (record_version, layout):
            if cursor.reads or cursor.scan is not None:
                log.warning(
                    "drift cursor discarded, the read starts over: taken under record version "
                    "%s, layout %s; now version %s, layout %s",
                    cursor.record_version,
                    cursor.layout,
                    record_version,
                    layout,
                )
            # A scan under way starts over at once, not at the next due run: what it read
            # was judged by another state, and the hour it was due for is not over.
            scan = cursor.scan
            return DriftCursor(
                record_version,
                layout,
                last_read_units=cursor.last_read_units,
                scan=None if scan is None else ScanProgress.fresh(scan.segments, scan.open_index),
                last_scan_units=cursor.last_scan_units,
            )
        return cursor

    def save(self, cursor: DriftCursor, taken_at: str) -> None:
        progress = {name: p.to_json() for name, p in cursor.reads.items()}
        item: dict[str, Any] = {
            "PK": names.DRIFT_CURSOR_PK,
            "SK": names.DRIFT_CURSOR_SK,
            "entityType": ENTITY_DRIFT_CURSOR,
            "format": CURSOR_FORMAT,
            "recordVersion": cursor.record_version,
            "layout": cursor.layout,
            "takenAt": taken_at,
            "progress": json.dumps(progress, sort_keys=True),
            "unitsRead": Decimal(str(round(cursor.units_read, 1))),
        }
        if cursor.last_read_units is not None:
            item["lastReadUnits"] = Decimal(str(round(cursor.last_read_units, 1)))
        if cursor.last_scan_units is not None:
            item["lastScanUnits"] = Decimal(str(round(cursor.last_scan_units, 1)))
        if cursor.scan is not None:
            item["scan"] = json.dumps(cursor.scan.to_json(), sort_keys=True)
        self.client.put_item(TableName=self.table_name, Item=serialize(item))


class DriftReadIncomplete(Exception):
    """A run's index reads stopped at the deadline with a key unread to its end: the cursor
    holds where each stopped and what it counted; no verdict is published."""

    def __init__(self, cursor: DriftCursor) -> None:
        self.cursor = cursor
        percent = cursor.percent_read()
        said = f"{percent:.0f} % read" if percent is not None else "percent unknown"
        scan = cursor.scan
        scanned = (
            ""
            if scan is None
            else f"; the base-table scan: {sum(scan.done)} of {scan.segments} segments done"
        )
        super().__init__(
            f"the drift read is incomplete ({said}; {cursor.reads_done} of "
            f"{len(cursor.reads)} reads begun are done{scanned}): the next run resumes it"
        )


class ReadTracker:
    """The progress of each read of one run when a cursor is kept (None without one)."""

    def __init__(self, cursor: DriftCursor | None, pacer: KeyReadPacer) -> None:
        self.cursor = cursor
        self.pacer = pacer
        self._this_run: list[KeyProgress] = []

    def progress(self, read: str) -> KeyProgress | None:
        if self.cursor is None:
            return None
        progress = self.cursor.progress(read)
        self._this_run.append(progress)
        return progress

    def stop_unless_done(self) -> None:
        """DriftReadIncomplete when a read this run took up is not at its end (the run's units
        counted)."""
        if not all(p.done for p in self._this_run):
            self.stop()

    def stop(self) -> None:
        """DriftReadIncomplete (the run's index units counted); only with a cursor."""
        cursor = self.cursor
        if cursor is not None:
            cursor.stopped(self.pacer.units_spent)
            raise DriftReadIncomplete(cursor)
