"""The scan part of the drift cursor, without a table: which scan a run reads (a due scan while
one is under way comes right after it), and what does not parse."""

from __future__ import annotations

import json

import pytest

from saga_index.layout_change.checks import OpenIndexDifference
from saga_index.layout_change.checks.drift._cursor import CursorError, DriftCursor, parse_cursor
from saga_index.layout_change.checks.drift._scan_check import take_up_scan
from saga_index.layout_change.checks.drift._scan_cursor import ScanProgress

KEY = {"PK": {"S": "RSAGA#s-1"}, "SK": {"S": "META"}}


def item(scan: object) -> dict[str, object]:
    return {
        "entityType": "RenewalSagaIndexDriftCursor",
        "format": 1,
        "recordVersion": 3,
        "layout": "sharded:sharded(16)->sharded(16)(writes sharded(16))",
        "progress": "{}",
        "scan": json.dumps(scan),
    }


def test_a_scan_due_while_one_is_under_way_starts_when_that_one_completes() -> None:
    cursor = DriftCursor(3, "layout")
    assert take_up_scan(cursor, False, 2, None) is None
    scan = take_up_scan(cursor, True, 2, None)
    assert scan is not None
    assert cursor.scan is scan
    scan.advanced(0, KEY)
    # Not due: the same scan goes on; due again while it is under way: another after it
    assert take_up_scan(cursor, False, 2, None) is scan
    assert not scan.again
    assert take_up_scan(cursor, True, 2, None) is scan
    assert scan.again
    scan.units = 40.0
    cursor.completed(10.0)
    assert cursor.last_scan_units == 40.0
    after = cursor.scan
    assert after is not None
    assert (after.begun, after.again) == (False, False)
    # And once that one completes with no scan due meanwhile, none is under way
    cursor.completed(10.0)
    assert cursor.scan is None


def test_the_scan_part_round_trips_and_what_does_not_parse_is_named() -> None:
    scan = ScanProgress.fresh(2, None)
    scan.advanced(1, KEY)
    scan.rows, scan.again = 7, True
    parsed = parse_cursor(item(scan.to_json())).scan
    assert parsed is not None
    assert (parsed.last_keys, parsed.done, parsed.rows, parsed.again) == (
        [None, KEY],
        [False, False],
        7,
        True,
    )
    bad = scan.to_json()
    bad["done"] = [True, True]  # segment 1 at its end with a key to resume from
    with pytest.raises(CursorError, match="false with a lastKey"):
        parse_cursor(item(bad))
    with pytest.raises(CursorError, match="unindexed must be an object"):
        parse_cursor(item({**scan.to_json(), "unindexed": 3}))


def test_the_unstamped_open_sagas_of_an_adding_scan_round_trip_and_an_older_cursor_parses() -> None:
    # Given a scan under way in `adding` that has counted unstamped open sagas
    scan = ScanProgress.fresh(2, "adding(16)")
    difference = OpenIndexDifference(
        "RSAGA#s-1", "an open saga with OpenSagaPK = None", open_saga=True, person_id="p-1"
    )
    scan.found["openUnstamped"].add(3, [difference])
    # Then the next run reads them back
    parsed = parse_cursor(item(scan.to_json())).scan
    assert parsed is not None
    assert parsed.found["openUnstamped"].count == 3
    assert parsed.found["openUnstamped"].rows == [difference]
    # And a scan part saved before the unstamped count existed resumes with none counted
    older = scan.to_json()
    del older["openUnstamped"]
    resumed = parse_cursor(item(older)).scan
    assert resumed is not None
    assert resumed.found["openUnstamped"].count == 0
    # While a present one that does not parse is named
    with pytest.raises(CursorError, match="openUnstamped must be an object"):
        parse_cursor(item({**scan.to_json(), "openUnstamped": 3}))
