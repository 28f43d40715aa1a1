"""The drift guard's watch of the open-saga index (docs/observability.md, "The open index"):
while the record's open index is `open` (enumerations of open sagas read it, not GSI4), every
scanning run compares it with the base table by the completing move's own rule
(checks/open_index.py: `compare`, `row_difference`, `OpenIndexReader.recheck`).

  1. the open index's N keys, each Query paced like the guard's GSI4 reads (its KeyReadPacer),
     stopped at the run's deadline (KeyReadIncompleteError: the run fails, no count published);
  2. the base-table scan the guard runs anyway hands each saga row to `visit`, which keeps only
     the rows the rule can find wrong (open, stamped, or listed by the index: about the open
     sagas, never the table's history);
  3. `compare`, then after `recheck_delay_seconds` (the GSI's propagation lag) the index keys
     read again and each differing row with a consistent GetItem: only what still differs is
     counted, as missing (an open saga the index does not hold under its person's key) or
     stray (an entry or a stamp that must not be there).

Why not in other states: while `adding` and `removing` every enumeration of open sagas still
reads GSI4, so a row the open index gets wrong hides no saga from anyone, and `open-index set
open` runs the same comparison before any reader switches (docs/control-contract.md).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from saga_index.index import keys, names
from saga_index.layout_change.checks import (
    OpenIndexDifference,
    OpenIndexReader,
    compare_open_index,
    concerns_open_index,
)
from saga_index.layout_change.record import OpenIndex, Routing
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
        )


def difference_to_dict(table_name: str, difference: OpenIndexDifference) -> dict[str, Any]:
    return {
        "pk": difference.pk,
        "reason": difference.reason,
        "personId": difference.person_id,
        "repairCommand": repair_command(table_name, difference),
    }


class OpenWatchSource(Protocol):
    """What the watch needs of the checker (DriftChecker is one)."""

    client: DynamoDBClient
    table_name: str
    open_recheck_seconds: float

    @property
    def routing(self) -> Routing: ...


def open_watch(
    checker: OpenWatchSource,
    pacer: KeyReadPacer,
    deadline: float | None,
    sleep: Callable[[float], None],
    limit: int,
) -> OpenIndexWatch | None:
    """The watch of a scanning run, when the checker's routing reads the open index."""
    index = checker.routing.open_reads
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
