"""The open-saga index's checks (docs/control-contract.md, "The open-saga index"): what the
completing moves of the open index require, read from the table.

  parity   (adding -> open) every open saga carries its person's OpenSagaPK under the index's N
           and is in the open index under it; no closed saga, and nothing else, is in the index
  empty    (removing -> off) no row of the base table carries OpenSagaPK, and the index holds
           nothing

The base table is read with a paced, consistent parallel Scan (complete, or an error: never a
partial answer); the open index with a Query of each of its N keys, to the last page. Index
reads are eventually consistent: a row stamped or closed just before the read may not have
reached the index yet, so the rows that differ are re-read after `recheck_delay_seconds` (the
base row with a consistent GetItem, the index keys again) and only those that still differ
fail the check. Each difference names the row (its PK) and what is wrong with it.

The drift guard watches the open index with the same rule (checks/drift/_open_check.py): it
reads the index's keys paced (`pacer`, by `deadline`), hands `compare` only the scanned rows
the rule can find wrong (`concerns_open_index`), and re-reads the differences with `recheck`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from saga_index.index import OPEN_STATES, Person, keys, names
from saga_index.layout_change.record import OpenIndex
from saga_index.store.dynamo import (
    KeyReadPacer,
    SagaTableScanner,
    ScanOptions,
    attribute_list,
    deserialize,
    on_open_index_key,
    query_pages,
    request_expressions,
    serialize,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DEFAULT_RECHECK_DELAY_SECONDS = 2.0
EXAMPLES = 5
_ROW_ATTRIBUTES = ("personId", "state", names.OPEN_INDEX_PARTITION_KEY)
# A re-read row: its PK (compare() keys the rows by it) and the attributes it judges.
_RECHECK_ATTRIBUTES = {
    "#pk": "PK",
    "#personId": "personId",
    "#state": "state",
    "#open": names.OPEN_INDEX_PARTITION_KEY,
}


@dataclass(frozen=True)
class OpenIndexDifference:
    """One row the open index gets wrong: its table PK and what is wrong. `open_saga`: the row
    is an open saga (the open index misses it, or holds it under another key); False: the
    index or the row holds a key it must not (a closed saga, a row the table no longer has).
    `in_table`: the base table has the row. `person_id`: the row's personId when it routes
    (keys.person_anomaly: none), the person a repair of its key names."""

    pk: str
    reason: str
    open_saga: bool = False
    in_table: bool = True
    person_id: str | None = None


@dataclass(frozen=True)
class OpenIndexReport:
    """What one check read and what still differed after the re-check."""

    rows: int  # saga rows of the base table
    open_rows: int
    indexed: int  # entries read from the open index
    differences: tuple[OpenIndexDifference, ...]

    @property
    def ok(self) -> bool:
        return not self.differences

    def examples(self, count: int = EXAMPLES) -> str:
        return "; ".join(f"{d.pk}: {d.reason}" for d in self.differences[:count])


def row_difference(
    row: Mapping[str, Any] | None, index: OpenIndex | None, indexed_under: set[str]
) -> str | None:
    """What is wrong with one saga row (None: the base table has no such row), given the open
    index keys it was found under; None when nothing is. `index` None: no row may carry the
    key and the index must hold nothing (the rollback's end)."""
    key_name = names.OPEN_INDEX_PARTITION_KEY
    is_open = row is not None and row.get("state") in OPEN_STATES
    stamped = None if row is None else row.get(key_name)
    expected = None
    if row is not None and is_open and index is not None:
        try:
            expected = index.key_for(Person.of(str(row.get("personId"))))
        except ValueError as err:
            return f"an open saga whose personId cannot be keyed ({err})"
    if stamped != expected:
        if expected is not None:
            return f"an open saga with {key_name} = {stamped!r}, not {expected!r}"
        what = "a closed saga" if index is not None else "the row"
        return f"{what} carries {key_name} = {stamped!r}; it must not"
    if indexed_under != (set() if expected is None else {expected}):
        if expected is not None:
            return f"an open saga the open index holds under {sorted(indexed_under) or 'no key'}"
        where = "not in the base table" if row is None else "not an open saga"
        return f"in the open index under {sorted(indexed_under)}, {where}"
    return None


def compare(
    rows: Iterable[Mapping[str, Any]], entries: Mapping[str, set[str]], index: OpenIndex | None
) -> list[OpenIndexDifference]:
    """Every difference between the base table's saga rows and the open index's entries (per
    OpenSagaPK, the table PKs under it), in PK order."""
    under: dict[str, set[str]] = {}
    for key, pks in entries.items():
        for pk in pks:
            under.setdefault(pk, set()).add(key)
    by_pk = {str(row["PK"]): row for row in rows}
    differences = []
    for pk in sorted(set(by_pk) | set(under)):
        row = by_pk.get(pk)
        reason = row_difference(row, index, under.get(pk, set()))
        if reason is not None:
            routes = row is not None and keys.person_anomaly(row) is None
            differences.append(
                OpenIndexDifference(
                    pk,
                    reason,
                    open_saga=row is not None and row.get("state") in OPEN_STATES,
                    in_table=row is not None,
                    person_id=str(row["personId"]) if row is not None and routes else None,
                )
            )
    return differences


def concerns_open_index(row: Mapping[str, Any], listed: set[str]) -> bool:
    """Whether `row_difference` can find this saga row wrong: it is open, carries OpenSagaPK,
    or the open index lists its PK (`listed`). Any other row (closed, unstamped, not in the
    index) is right in every state, so a comparison need not hold it."""
    return (
        row.get("state") in OPEN_STATES
        or row.get(names.OPEN_INDEX_PARTITION_KEY) is not None
        or str(row.get("PK")) in listed
    )


@dataclass
class OpenIndexReader:
    """Reads the base table's saga rows and the open index's entries of one table."""

    client: DynamoDBClient
    table: str
    options: ScanOptions
    recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS
    sleep: Callable[[float], None] = time.sleep
    # Paces the index's Queries per key (the drift guard's pace) and stops them at `deadline`
    # (KeyReadIncompleteError); None: read at once, as the completing moves do.
    pacer: KeyReadPacer | None = None
    deadline: float | None = None

    def rows(self) -> list[dict[str, Any]]:
        scanner = SagaTableScanner(
            self.client,
            self.table,
            options=ScanOptions(
                segments=self.options.segments,
                read_units_per_second=self.options.read_units_per_second,
                page_size=self.options.page_size,
                consistent_read=True,
            ),
            attributes=_ROW_ATTRIBUTES,
        )
        return scanner.scan().items

    def entries(self, partitions: Iterable[str]) -> dict[str, set[str]]:
        """The table PKs under each OpenSagaPK, every page of each (eventually consistent)."""
        found: dict[str, set[str]] = {}
        for key in partitions:
            request = {
                "TableName": self.table,
                "IndexName": names.OPEN_INDEX_NAME,
                **request_expressions(
                    key_condition=on_open_index_key(key),
                    projection=attribute_list({"#pk": "PK"}),
                ),
            }
            pages = (
                query_pages(self.client, request)
                if self.pacer is None
                else self.pacer.pages(self.client.query, request, key, deadline=self.deadline)
            )
            found[key] = {
                str(deserialize(item)["PK"]) for page in pages for item in page.get("Items", [])
            }
        return found

    def row(self, pk: str) -> dict[str, Any] | None:
        """One saga row re-read, consistently, projected to what the comparison judges (the
        backfill's verify step may read no other attribute of a saga row: infra/backfill.py)."""
        response = self.client.get_item(
            TableName=self.table,
            Key=serialize({"PK": pk, "SK": keys.SAGA_SK}),
            ConsistentRead=True,
            **request_expressions(projection=attribute_list(_RECHECK_ATTRIBUTES)),
        )
        item = response.get("Item")
        return None if item is None else deserialize(item)

    def check(self, index: OpenIndex, *, stamps_expected: bool) -> OpenIndexReport:
        """Compare the table with the open index (its N keys); `stamps_expected` False: no row
        may carry OpenSagaPK and the index must hold nothing. Differences are re-read once."""
        expected = index if stamps_expected else None
        rows = self.rows()
        partitions = index.partitions()
        entries = self.entries(partitions)
        differences = compare(rows, entries, expected)
        if differences and self.recheck_delay_seconds > 0:
            self.sleep(self.recheck_delay_seconds)
            differences = self.recheck(differences, partitions, expected)
        return OpenIndexReport(
            rows=len(rows),
            open_rows=sum(1 for row in rows if row.get("state") in OPEN_STATES),
            indexed=sum(len(pks) for pks in entries.values()),
            differences=tuple(differences),
        )

    def recheck(
        self,
        differences: list[OpenIndexDifference],
        partitions: tuple[str, ...],
        expected: OpenIndex | None,
    ) -> list[OpenIndexDifference]:
        """Of `differences`, those that still differ: the index keys read again, each row
        with a consistent GetItem."""
        entries = self.entries(partitions)
        suspects = [d.pk for d in differences]
        rows = [row for row in (self.row(pk) for pk in suspects) if row is not None]
        pks = set(suspects)
        narrowed = {key: found & pks for key, found in entries.items()}
        return [d for d in compare(rows, narrowed, expected) if d.pk in pks]
