"""The open index's checks judge rows as they should: each kind of difference is named, and a
difference that GSI lag explains is dropped by the re-check (checks/open_index.py)."""

from __future__ import annotations

from typing import Any

from saga_index.index import Person
from saga_index.layout_change.checks.open_index import OpenIndexReader, compare
from saga_index.layout_change.record import OpenIndex, OpenIndexState
from saga_index.store.dynamo import ScanOptions

INDEX = OpenIndex(OpenIndexState.ADDING, 8)
KEY_1 = Person.of("p-1").open_index_pk(8)


def _row(pk: str, person: str, state: str = "OPENED", key: str | None = None) -> dict[str, Any]:
    row = {"PK": pk, "SK": "META", "personId": person, "state": state}
    if key is not None:
        row["OpenSagaPK"] = key
    return row


def test_given_a_consistent_table_then_nothing_differs() -> None:
    rows = [_row("RSAGA#a", "p-1", key=KEY_1), _row("RSAGA#b", "p-2", state="SIGNED")]
    assert compare(rows, {KEY_1: {"RSAGA#a"}}, INDEX) == []


def test_every_kind_of_difference_is_named_by_its_row() -> None:
    other = "RenewalSagaOpen#0" if KEY_1 != "RenewalSagaOpen#0" else "RenewalSagaOpen#1"
    rows = [
        _row("RSAGA#unstamped", "p-1"),
        _row("RSAGA#wrong", "p-1", key=other),
        _row("RSAGA#closed", "p-1", state="EXPIRED", key=KEY_1),
        _row("RSAGA#lagging", "p-1", key=KEY_1),
    ]
    entries = {KEY_1: {"RSAGA#closed", "RSAGA#gone"}, other: {"RSAGA#wrong"}}
    found = {d.pk: d.reason for d in compare(rows, entries, INDEX)}
    assert set(found) == {
        "RSAGA#unstamped",
        "RSAGA#wrong",
        "RSAGA#closed",
        "RSAGA#lagging",
        "RSAGA#gone",
    }
    assert "not 'RenewalSaga" in found["RSAGA#wrong"]
    assert "a closed saga carries" in found["RSAGA#closed"]
    assert "holds under no key" in found["RSAGA#lagging"]
    assert "not in the base table" in found["RSAGA#gone"]


def test_given_the_rollback_then_any_stamp_or_entry_differs() -> None:
    rows = [_row("RSAGA#a", "p-1", key=KEY_1), _row("RSAGA#b", "p-2")]
    found = compare(rows, {KEY_1: {"RSAGA#a"}}, None)
    assert [d.pk for d in found] == ["RSAGA#a"]
    assert "the row carries" in found[0].reason


class _Lagging(OpenIndexReader):
    """The index misses a stamped row on the first read and has it on the second."""

    def __init__(self) -> None:
        super().__init__(None, "t", ScanOptions(), recheck_delay_seconds=1.0, sleep=self.slept)  # type: ignore[arg-type]
        self.reads = 0
        self.waited: list[float] = []

    def slept(self, seconds: float) -> None:
        self.waited.append(seconds)

    def rows(self) -> list[dict[str, Any]]:
        return [_row("RSAGA#a", "p-1", key=KEY_1), _row("RSAGA#b", "p-2")]

    def entries(self, partitions: Any) -> dict[str, set[str]]:
        self.reads += 1
        return {KEY_1: {"RSAGA#a"}} if self.reads > 1 else {}

    def row(self, pk: str) -> dict[str, Any] | None:
        return {"RSAGA#a": _row("RSAGA#a", "p-1", key=KEY_1)}.get(pk)


def test_given_gsi_lag_then_the_recheck_drops_what_it_explains_and_keeps_the_rest() -> None:
    reader = _Lagging()
    report = reader.check(INDEX, stamps_expected=True)
    assert report.ok
    assert reader.waited == [1.0]

    stuck = _Lagging()
    stuck.entries = lambda partitions: {}  # type: ignore[method-assign]
    report = stuck.check(INDEX, stamps_expected=True)
    assert [d.pk for d in report.differences] == ["RSAGA#a"]
    assert "RSAGA#a" in report.examples()
