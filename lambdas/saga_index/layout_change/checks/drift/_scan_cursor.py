"""The base-table scan's part of the drift cursor (docs/control-contract.md, "The drift
cursor"): where each segment of a scan that did not fit one run stopped, and what the scan
counted before, so the next run resumes it and the run that reaches every segment's end
publishes the scan's counts, each row counted once.

Held in the cursor item's `scan` attribute (a JSON string). Its size is bounded whatever the
table: one LastEvaluatedKey per segment (at most 64, a saga row's table key each, ~100 bytes),
six counts, and at most CURSOR_SAMPLE_LIMIT named rows per finding (five findings, each row a
table key, its saga, person and index key, or a reason: ~400 bytes at most); about 60 KB in all,
far under DynamoDB's 400 KB item limit. The open-saga index's comparison keeps no rows across
runs: each run compares the rows it scanned with the index as it read it, and only the differences
that survive their re-check (and, in `adding`, the unstamped open sagas) are added here
(_scan_check).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from saga_index.index import SagaIndexError
from saga_index.layout_change.checks import OpenIndexDifference, RowRef

# Named rows per finding a scan carries from run to run (the counts are exact); a scan that
# completes within one run names up to the report's SAMPLE_LIMIT.
CURSOR_SAMPLE_LIMIT = 25
FINDINGS = ("unindexed", "stray", "openMissing", "openStray", "openUnstamped")
# Findings a cursor saved before they existed may lack: they start empty.
_LATER_FINDINGS = ("openUnstamped",)


class ScanCursorError(SagaIndexError):
    """A scan part of the cursor that does not parse."""


@dataclass
class Found:
    """One finding so far: its exact count and the rows it names (table key order, bounded)."""

    count: int = 0
    rows: list[Any] = field(default_factory=list)

    def add(self, count: int, rows: list[Any]) -> None:
        self.count += count
        self.rows = sorted([*self.rows, *rows], key=_order)[:CURSOR_SAMPLE_LIMIT]


def _order(row: Any) -> tuple[str, str]:
    if isinstance(row, RowRef):
        return (row.pk, row.sk)
    return (str(row.pk), "")


@dataclass
class ScanProgress:
    """A scan under way across runs: per segment its LastEvaluatedKey and whether it reached its
    end, what it counted, and what its runs spent (read units). `open_index`: the open index
    its comparison judges by (None: no comparison); a scan taken under another open index, or
    with another number of segments, starts over."""

    segments: int
    open_index: str | None
    last_keys: list[dict[str, Any] | None]
    done: list[bool]
    rows: int = 0
    found: dict[str, Found] = field(default_factory=lambda: {name: Found() for name in FINDINGS})
    units: float = 0.0
    # A scan fell due while this one was under way: the next starts as soon as this completes.
    again: bool = False

    @classmethod
    def fresh(cls, segments: int, open_index: str | None) -> ScanProgress:
        return cls(segments, open_index, [None] * segments, [False] * segments)

    @property
    def begun(self) -> bool:
        return self.rows > 0 or any(self.done) or any(self.last_keys)

    @property
    def complete(self) -> bool:
        return all(self.done)

    # SegmentPositions (saga_index.store.dynamo.scan), called under the scan's visiting lock.
    def segment_done(self, segment: int) -> bool:
        return self.done[segment]

    def start_key(self, segment: int) -> dict[str, Any] | None:
        return self.last_keys[segment]

    def advanced(self, segment: int, last_key: Any) -> None:
        self.last_keys[segment] = dict(last_key) if last_key else None
        self.done[segment] = not last_key

    def to_json(self) -> dict[str, Any]:
        return {
            "segments": self.segments,
            "openIndex": self.open_index,
            # As the Scan returned them (AttributeValues): the next run's ExclusiveStartKeys.
            "lastKeys": self.last_keys,
            "done": self.done,
            "rows": self.rows,
            "units": round(self.units, 1),
            "again": self.again,
            **{
                name: {"count": f.count, "rows": [_row_json(row) for row in f.rows]}
                for name, f in self.found.items()
            },
        }

    @classmethod
    def from_json(cls, raw: Any) -> ScanProgress:
        if not isinstance(raw, dict):
            raise ScanCursorError(f"the scan's progress must be an object, got {raw!r}")
        segments, open_index = raw.get("segments"), raw.get("openIndex")
        if isinstance(segments, bool) or not isinstance(segments, int) or not 1 <= segments <= 64:
            raise ScanCursorError(f"segments must be from 1 to 64, got {segments!r}")
        if open_index is not None and not isinstance(open_index, str):
            raise ScanCursorError(f"openIndex must be a string or null, got {open_index!r}")
        last_keys, done = raw.get("lastKeys"), raw.get("done")
        if not isinstance(last_keys, list) or not isinstance(done, list):
            raise ScanCursorError("lastKeys and done must be lists, one entry per segment")
        if len(last_keys) != segments or len(done) != segments:
            raise ScanCursorError(f"lastKeys and done must have {segments} entries each")
        for key, at_end in zip(last_keys, done, strict=True):
            if key is not None and not isinstance(key, dict):
                raise ScanCursorError(f"a segment's lastKey must be an object or null: {key!r}")
            if not isinstance(at_end, bool) or (at_end and key is not None):
                raise ScanCursorError("a segment's done must be a boolean, false with a lastKey")
        progress = cls(segments, open_index, list(last_keys), list(done))
        progress.rows = _count(raw.get("rows"), "rows")
        units = raw.get("units", 0)
        if isinstance(units, bool) or not isinstance(units, int | float) or units < 0:
            raise ScanCursorError(f"units must be a number >= 0, got {units!r}")
        progress.units = float(units)
        again = raw.get("again", False)
        if not isinstance(again, bool):
            raise ScanCursorError(f"again must be a boolean, got {again!r}")
        progress.again = again
        for name in FINDINGS:
            absent = name in _LATER_FINDINGS and name not in raw
            progress.found[name] = Found() if absent else _found(raw.get(name), name)
        return progress


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScanCursorError(f"{what} must be a count, got {value!r}")
    return value


def _found(raw: Any, name: str) -> Found:
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        raise ScanCursorError(f"{name} must be an object with a count and rows, got {raw!r}")
    rows = [_row_of(row, name) for row in raw["rows"]]
    return Found(_count(raw.get("count"), f"{name}.count"), rows[:CURSOR_SAMPLE_LIMIT])


def _row_json(row: Any) -> dict[str, Any]:
    if isinstance(row, RowRef):
        return row.to_dict()
    return {
        "pk": row.pk,
        "reason": row.reason,
        "openSaga": row.open_saga,
        "inTable": row.in_table,
        "personId": row.person_id,
    }


def _row_of(raw: Any, name: str) -> Any:
    if not isinstance(raw, dict):
        raise ScanCursorError(f"a row {name} names must be an object, got {raw!r}")
    try:
        if name.startswith("open"):
            return OpenIndexDifference(
                pk=str(raw["pk"]),
                reason=str(raw["reason"]),
                open_saga=bool(raw["openSaga"]),
                in_table=bool(raw["inTable"]),
                person_id=None if raw["personId"] is None else str(raw["personId"]),
            )
        return RowRef(
            pk=str(raw["PK"]),
            sk=str(raw["SK"]),
            saga_id=raw.get("sagaId"),
            person_id=raw.get("personId"),
            gsi4pk=raw.get("gsi4pk"),
            expected_gsi4pk=raw.get("expectedGsi4pk"),
        )
    except KeyError as err:
        raise ScanCursorError(f"a row {name} names lacks {err}") from err
