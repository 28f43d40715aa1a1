"""The open-saga index's backfill, run in this process (`saga-index open-index backfill`): the
open rows that predate `adding` get their OpenSagaPK, closed rows lose a stale one, and in
`removing` every stamp is removed (docs/control-contract.md, "The open-saga index").

One paced, consistent, parallel Scan of the base table; each row that needs a write gets ONE
conditional UpdateItem, metered to `max_writes_per_second` across all segments:

  stamp an open row    SET OpenSagaPK    IF state = the state the Scan read
  clear a closed row   REMOVE OpenSagaPK IF state = the state the Scan read
  clear (removing)     REMOVE OpenSagaPK IF attribute_exists(OpenSagaPK)

The state condition is the layout backfill's conditional re-stamp: a row the Scan read open and
a writer closed meanwhile (its close removed the key) is never stamped again; its write is
refused and counted as `changed`. It runs only once the state's switch settled (effectiveAt +
the in-flight margin: every writer stamps or removes as the state says), and it re-reads the
record with every page: a move of the open index meanwhile stops the run (no write after it).
A dry run counts the writes it would make and writes nothing.

Unlike the layout backfill it holds no lease and no fence (nothing in it runs in Step Functions),
and a stopped run starts again from the beginning; what a stale run can still write before it
stops is one page's rows, and the completing move's checks judge the table after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from saga_index.index import (
    OPEN_STATES,
    InvalidInputError,
    Person,
    RetryLaterError,
    SagaIndexError,
    names,
)
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlState,
    ControlStore,
    ControlTiming,
    OpenIndexState,
    WallClock,
    format_time,
    utc_now,
)
from saga_index.layout_change.transitions import settled_at
from saga_index.store.dynamo import (
    Expression,
    PageRead,
    SagaTableScanner,
    ScanOptions,
    is_condition_failed,
    request_expressions,
    serialize,
)

DEFAULT_OPEN_STAMP_RATE = 50.0
_KEY = names.OPEN_INDEX_PARTITION_KEY
STAMP_IF_STILL = (
    Expression("SET #open = :key", names={"#open": _KEY}, slots=frozenset({":key"})),
    Expression("#state = :seen", names={"#state": "state"}, slots=frozenset({":seen"})),
)
CLEAR_IF_STILL = (
    Expression("REMOVE #open", names={"#open": _KEY}),
    Expression("#state = :seen", names={"#state": "state"}, slots=frozenset({":seen"})),
)
CLEAR_IF_STAMPED = (
    Expression("REMOVE #open", names={"#open": _KEY}),
    Expression("attribute_exists(#open)", names={"#open": _KEY}),
)


class OpenStampsStoppedError(SagaIndexError):
    """The open index moved during the run: it stopped, writing nothing after it saw that."""


@dataclass
class OpenStampReport:
    """What one run read and wrote (a dry run: what it would have written)."""

    direction: str  # "stamp" (adding, open) | "remove" (removing)
    dry_run: bool
    scanned: int = 0
    stamped: int = 0
    removed: int = 0
    changed: int = 0  # refused: a writer changed the row after the Scan read it
    anomalies: int = 0  # open rows whose personId cannot be keyed
    examples: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "dryRun": self.dry_run,
            "scanned": self.scanned,
            "stamped": self.stamped,
            "removed": self.removed,
            "changed": self.changed,
            "anomalies": self.anomalies,
            "examples": list(self.examples),
        }


class _WritePacer:
    """At most `rate` writes a second, across the Scan's segments (the visitor is serial)."""

    def __init__(
        self, rate: float, monotonic: Callable[[], float], sleep: Callable[[float], None]
    ) -> None:
        self.interval, self.monotonic, self.sleep = 1.0 / rate, monotonic, sleep
        self.next_at: float | None = None

    def wait(self) -> None:
        now = self.monotonic()
        if self.next_at is not None and now < self.next_at:
            self.sleep(self.next_at - now)
            now = self.next_at
        self.next_at = now + self.interval


def open_index_backfill(
    store: ControlStore,
    *,
    max_writes_per_second: float = DEFAULT_OPEN_STAMP_RATE,
    scan: ScanOptions | None = None,
    dry_run: bool = False,
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> OpenStampReport:
    """Stamp (adding, open) or remove (removing) OpenSagaPK over the whole table; see the
    module docstring. InvalidInputError in `off` or for a rate that is not positive;
    RetryLaterError before the state's switch settled; OpenStampsStoppedError when the open
    index moved during the run."""
    if not max_writes_per_second > 0:
        raise InvalidInputError(f"the write rate must be positive, got {max_writes_per_second!r}")
    state = store.read()
    index = state.open_index
    if index.state is OpenIndexState.OFF:
        raise InvalidInputError(
            "the open index is off: nothing to stamp or remove (`open-index set adding` first)"
        )
    _require_settled(state, clock(), timing)
    report = OpenStampReport(
        "remove" if index.state is OpenIndexState.REMOVING else "stamp", dry_run
    )
    run = _Run(store, state, report, _WritePacer(max_writes_per_second, monotonic, sleep))
    scanner = SagaTableScanner(
        store.client,
        store.table_name,
        options=_consistent(scan or ScanOptions()),
        attributes=("personId", "state", _KEY),
        sleep=sleep,
    )
    scanner.scan_each(run.visit, on_page=run.page_read)
    if run.stopped is not None:
        raise OpenStampsStoppedError(run.stopped)
    return report


def _only(values: Mapping[str, Any], expression: Expression) -> dict[str, Any]:
    return {k: v for k, v in values.items() if k in expression.slots}


def _consistent(options: ScanOptions) -> ScanOptions:
    return ScanOptions(
        segments=options.segments,
        read_units_per_second=options.read_units_per_second,
        page_size=options.page_size,
        consistent_read=True,
    )


def _require_settled(state: ControlState, now: datetime, timing: ControlTiming) -> None:
    settled = settled_at(state, timing.in_flight_margin_seconds)
    if settled is not None and now < settled:
        raise RetryLaterError(
            f"until {format_time(settled)} (effectiveAt plus the in-flight margin) a writer "
            f"may still write as the state before open index {state.open_index} did: the "
            f"backfill starts after it; nothing written",
            retry_at=settled,
        )


@dataclass
class _Run:
    store: ControlStore
    state: ControlState
    report: OpenStampReport
    pacer: _WritePacer
    stopped: str | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def page_read(self, _page: PageRead) -> None:
        """After every page: the record read again; a move of the open index stops the run."""
        now = self.store.read()
        if now.version != self.state.version or now.open_index != self.state.open_index:
            self.stopped = (
                f"the open index moved during the run (version {self.state.version} "
                f"{self.state.open_index} -> version {now.version} {now.open_index}): stopped "
                f"after {self.report.scanned} row(s); run it again if the new state needs it"
            )

    def visit(self, row: dict[str, Any]) -> None:
        if self.stopped is not None:
            return
        self.report.scanned += 1
        action = self._action(row)
        if action is None:
            return
        kind, update, condition, values = action
        if len(self.report.examples) < 5:
            self.report.examples.append(f"{row['PK']}: {kind}")
        if not self.report.dry_run:
            self.pacer.wait()
            try:
                self.store.client.update_item(
                    TableName=self.store.table_name,
                    Key=serialize({"PK": row["PK"], "SK": row["SK"]}),
                    **request_expressions(
                        update=update.given(_only(values, update)),
                        condition=condition.given(_only(values, condition)),
                    ),
                )
            except ClientError as err:
                if not is_condition_failed(err):
                    raise
                self.report.changed += 1
                return
        if kind == "stamp":
            self.report.stamped += 1
        else:
            self.report.removed += 1

    def _action(
        self, row: Mapping[str, Any]
    ) -> tuple[str, Expression, Expression, dict[str, Any]] | None:
        stamped = row.get(_KEY)
        if self.report.direction == "remove":
            return None if stamped is None else ("remove", *CLEAR_IF_STAMPED, {})
        seen = serialize({":seen": row.get("state")})
        if row.get("state") not in OPEN_STATES:
            return None if stamped is None else ("remove", *CLEAR_IF_STILL, seen)
        index = self.state.open_index
        try:
            key = index.key_for(Person.of(str(row.get("personId"))))
        except ValueError:
            self.report.anomalies += 1
            return None
        if stamped == key:
            return None
        return ("stamp", *STAMP_IF_STILL, {**seen, **serialize({":key": key})})
