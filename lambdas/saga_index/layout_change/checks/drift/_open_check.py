"""The drift guard's watch of the open-saga index (docs/observability.md, "The open index"):
while the record's open index is `open` (enumerations of open sagas read it, not GSI4), or
`adding` once its writers' switch has settled (effectiveAt plus the in-flight margin: from then
on every writer stamps OpenSagaPK on the open sagas it writes), every scanning run compares it
with the base table by the completing move's own rule (checks/open_index.py: `compare`,
`row_difference`, `OpenIndexReader.recheck`).

  1. the open index's N keys, each Query paced like the guard's GSI4 reads (its KeyReadPacer),
     stopped at the run's deadline (KeyReadIncompleteError: the run fails, no count published);
  2. the base-table scan the guard runs anyway hands each saga row to `visit`, which keeps only
     the rows the rule can find wrong (open, stamped, or listed by the index: about the open
     sagas, never the table's history);
  3. `compare`, then after `recheck_delay_seconds` (the GSI's propagation lag) the index keys
     read again and each differing row with a consistent GetItem: only what still differs is
     counted, as missing (an open saga the index does not hold under its person's key) or
     stray (an entry or a stamp that must not be there).

In `adding` the same comparison runs, judged so that only a bug pages:
  - stray rows page as in `open`: writers remove the key from every saga they close, in every
    state, and the backfill's re-stamp is conditional on the open state it read, so a closed
    saga in the index (or stamped) comes only from a writer that kept the key or a wrong
    re-stamp;
  - an open saga whose row carries no OpenSagaPK and which the index does not hold is
    `unstamped`: expected until the open-index backfill (runbook O2) reaches it, so it is
    counted apart (OpenIndexUnstampedRows, no alarm) and is not re-read (no GetItem per row
    the backfill has yet to stamp; the count is as the scan read it). The operator reads
    "unstamped 0, stray 0" before `open-index set open` (runbook O3);
  - any other open saga the index gets wrong (stamped with another key, stamped and still not
    in the index after the re-check) is missing and pages as in `open`: neither the backfill
    nor a writer that follows the record leaves one.

Why not before the switch settles, nor in `removing` or `off`: until then a writer may still
follow the state before (stamping nothing, or removing stamps), so what the index holds proves
nothing and a difference is no bug; no enumeration reads the open index in those states either.
`open-index set open` runs the parity check itself before any reader switches
(docs/control-contract.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from saga_index.index import keys, names
from saga_index.layout_change.checks import (
    OpenIndexDifference,
    OpenIndexReader,
    compare_open_index,
    concerns_open_index,
)
from saga_index.layout_change.record import (
    ControlState,
    ControlTiming,
    OpenIndex,
    OpenIndexState,
    Routing,
)
from saga_index.store.dynamo import KeyReadPacer, ScanOptions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The wait before the differences are read again: the open index is a GSI, whose copy of a
# write lags the table's (typically well under a second); a difference that outlives it is real.
DEFAULT_OPEN_RECHECK_SECONDS = 5.0
# What the comparison reads of a scanned row besides the guard's own attributes.
OPEN_CHECK_ATTRIBUTES = ("state", names.OPEN_INDEX_PARTITION_KEY)


@dataclass(frozen=True)
class OpenIndexFindings:
    """What one comparison found, after the re-check: exact counts, at most `limit` rows each."""

    index: OpenIndex
    entries: int  # entries the open index held on the first read
    missing_rows: int
    stray_rows: int
    missing: tuple[OpenIndexDifference, ...] = ()
    stray: tuple[OpenIndexDifference, ...] = ()
    # `adding` only: open sagas the backfill has yet to stamp (as the scan read them; no page).
    unstamped_rows: int = 0
    unstamped: tuple[OpenIndexDifference, ...] = ()

    @property
    def adding(self) -> bool:
        return self.index.state is OpenIndexState.ADDING


def repair_command(table_name: str, difference: OpenIndexDifference) -> str | None:
    """The `saga-index repair-anomaly` command that gives this row the open key the state's
    writers stamp (or removes one it must not carry); None when the table has no such row."""
    if not difference.in_table:
        return None
    sk = keys.SAGA_SK
    # A row whose personId routes names it; one whose does not takes its rental lease's tenant.
    person = (
        f"--person-id {shlex.quote(difference.person_id)}"
        if difference.person_id is not None
        else "--from-lease"
    )
    return (
        f"saga-index --table {shlex.quote(table_name)} repair-anomaly "
        f"--pk {shlex.quote(difference.pk)} --sk {sk} {person} --apply"
    )


@dataclass
class OpenIndexWatch:
    """One comparison of the open index with the base table, fed by the guard's scan."""

    client: DynamoDBClient
    table_name: str
    index: OpenIndex
    pacer: KeyReadPacer
    deadline: float | None
    sleep: Callable[[float], None]
    recheck_delay_seconds: float = DEFAULT_OPEN_RECHECK_SECONDS
    limit: int = 100  # rows named per kind (the report's SAMPLE_LIMIT); the counts are exact
    _entries: dict[str, set[str]] = field(default_factory=dict)
    _listed: set[str] = field(default_factory=set)
    _rows: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _reader(self) -> OpenIndexReader:
        # Its scan is never used: the guard's own scan feeds `visit`.
        return OpenIndexReader(
            self.client,
            self.table_name,
            ScanOptions(),
            recheck_delay_seconds=self.recheck_delay_seconds,
            sleep=self.sleep,
            pacer=self.pacer,
            deadline=self.deadline,
        )

    def read_index(self) -> None:
        """Step 1, before the scan: a row opened while the scan runs is then in the scan and
        perhaps not in this read, a difference the re-check settles."""
        self._entries = self._reader().entries(self.index.partitions())
        self._listed = {pk for pks in self._entries.values() for pk in pks}

    @property
    def listed(self) -> set[str]:
        """The table PKs the open index held on its first read."""
        return self._listed

    def visit(self, row: dict[str, Any]) -> None:
        """Step 2, for each saga row the scan reads (one call at a time)."""
        if concerns_open_index(row, self._listed):
            self._rows[str(row["PK"])] = row

    def findings(self, *, whole_scan: bool = True) -> OpenIndexFindings:
        """Step 3: what still differs after the re-check. `whole_scan` False: this run scanned
        only part of the table (a scan across runs), so an entry whose row it did not see may
        be a row an earlier run judged: only the entries of rows this run saw are compared."""
        entries = self._entries
        if not whole_scan:
            seen = set(self._rows)
            entries = {key: pks & seen for key, pks in entries.items()}
        differences = compare_open_index(self._rows.values(), entries, self.index)
        unstamped = [d for d in differences if self._unstamped(d)]
        differences = [d for d in differences if not self._unstamped(d)]
        if differences:
            reader = self._reader()
            if self.recheck_delay_seconds > 0:
                self.sleep(self.recheck_delay_seconds)
            differences = reader.recheck(differences, self.index.partitions(), self.index)
        missing = [d for d in differences if d.open_saga]
        stray = [d for d in differences if not d.open_saga]
        return OpenIndexFindings(
            index=self.index,
            entries=len(self._listed),
            missing_rows=len(missing),
            stray_rows=len(stray),
            missing=tuple(missing[: self.limit]),
            stray=tuple(stray[: self.limit]),
            unstamped_rows=len(unstamped),
            unstamped=tuple(unstamped[: self.limit]),
        )

    def _unstamped(self, difference: OpenIndexDifference) -> bool:
        """In `adding`: an open saga the scan read without OpenSagaPK and the index does not
        list, what the backfill has yet to stamp (in `open` the same row is missing)."""
        if self.index.state is not OpenIndexState.ADDING or not difference.open_saga:
            return False
        row = self._rows.get(difference.pk)
        return (
            row is not None
            and row.get(names.OPEN_INDEX_PARTITION_KEY) is None
            and difference.pk not in self._listed
        )


def difference_to_dict(table_name: str, difference: OpenIndexDifference) -> dict[str, Any]:
    return {
        "pk": difference.pk,
        "reason": difference.reason,
        "personId": difference.person_id,
        "repairCommand": repair_command(table_name, difference),
    }


def watched_open_index(
    state: ControlState | None, routing: Routing, now: datetime, timing: ControlTiming
) -> OpenIndex | None:
    """The open index a scanning run compares with the table: the one enumerations read
    (`open`), else one being added once its writers' switch has settled (`now` at or past its
    effectiveAt plus `timing`'s in-flight margin: the instant a completing move may be judged,
    transitions.settled_at); None otherwise. Judged by a routing alone (the CLI's
    --phase overrides) only `open` is compared: a routing does not say when a state settled."""
    if routing.open_reads is not None:
        return routing.open_reads
    if state is None or state.open_index.state is not OpenIndexState.ADDING:
        return None
    effective_at = state.effective_at
    margin = timedelta(seconds=timing.in_flight_margin_seconds)
    if effective_at is None or now < effective_at + margin:
        return None
    return state.open_index


class OpenWatchSource(Protocol):
    """What the watch needs of the checker (DriftChecker is one)."""

    client: DynamoDBClient
    table_name: str
    open_recheck_seconds: float
    open_watched: OpenIndex | None


def open_watch(
    checker: OpenWatchSource,
    pacer: KeyReadPacer,
    deadline: float | None,
    sleep: Callable[[float], None],
    limit: int,
) -> OpenIndexWatch | None:
    """The watch of a scanning run, when the checker compares an open index (watched_open_index)."""
    index = checker.open_watched
    if index is None:
        return None
    return OpenIndexWatch(
        checker.client,
        checker.table_name,
        index,
        pacer,
        deadline,
        sleep,
        recheck_delay_seconds=checker.open_recheck_seconds,
        limit=limit,
    )
