"""The drift guard's base-table scan across runs, on moto: a scan that does not fit one run
resumes from the cursor item (per segment where it stopped, what it counted), each run before
the last says "incomplete, N % read" and publishes no count, and the run that reaches every
segment's end publishes the scan's counts, each row counted once. The scan's pace is the
handler's own on a fake clock (one row a page, each page a second), so nothing waits."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from moto import mock_aws

from handlers import drift_guard
from handlers.drift_guard import handler
from saga_index.index import Layout, Person, keys, names
from saga_index.layout_change.checks.drift import (
    CursorStore,
    DriftChecker,
    DriftCursor,
    DriftReadIncomplete,
    cursor_layout,
)
from saga_index.layout_change.checks.drift._cursor import CURSOR_KEY
from saga_index.layout_change.record import ControlStore, OpenIndexState
from saga_index.store.dynamo import KeyReadPace, ScanOptions
from tests.support.backends import Backend, make_backend
from tests.support.control_seed import seed_open_index, seed_state
from tests.support.lambda_harness import FakeLambdaContext, as_function, emf_datapoints
from tests.support.open_index import add_open_index

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

N = 4  # few keys: each run's index reads are few requests
SERVICE = "drift-guard"
HEALTHY, UNINDEXED, STRAY = 8, 3, 2  # 13 saga rows
BEYOND_ROWS = 30
SCAN_RATE = 0.5  # read units a second: a one-row page (estimated at half a unit) a second
MARGIN_MS = 20_000  # what the handler keeps of a run's time
RUN_BUDGET_MS = 30_000  # 10 s of scan a run: less than the whole scan
WHOLE_MS = 2_000_000
DUE, NEXT, AFTER = "2026-07-10T10:00:00Z", "2026-07-10T10:05:00Z", "2026-07-10T10:10:00Z"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def dynamo(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("scan-cursor", synthesized_template, endpoint_url=None)
        seed_state(backend.client, backend.table_name, Layout.sharded(N))
        for n in range(HEALTHY):
            backend.put_saga(f"s-ok-{n:02d}", f"p-{n:02d}", gsi4pk="shard", shard_count=N)
        for n in range(UNINDEXED):
            backend.put_saga(
                f"s-un-{n:02d}", f"p-{n:02d}", gsi4pk="shard", shard_count=N, GSI4SK=None
            )
        for n in range(STRAY):
            backend.put_saga(f"s-st-{n:02d}", f"p-{n:02d}", gsi4pk="NOT#A#KEY")
        for name, value in {
            "SAGA_TABLE_NAME": backend.table_name,
            "SAGA_INDEX_NAME": names.INDEX_NAME,
            "SAGA_INDEX_MAX_ATTEMPTS": "2",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": "RenewalSagaIndex",
            "DRIFT_SCAN_EVERY": "12",
            "DRIFT_GUARD_PERIOD_MINUTES": "5",
            # One segment: its pages are the only sleeps on the fake clock, so where each run
            # stops is the same every time (the open-index test below reads two).
            names.ENV_DRIFT_SCAN_SEGMENTS: "1",
            # moto answers no ConsumedCapacity: a one-row page is estimated at half a unit.
            names.ENV_DRIFT_SCAN_RATE: str(SCAN_RATE),
        }.items():
            monkeypatch.setenv(name, value)
        clock = FakeClock()
        monkeypatch.setattr(
            drift_guard, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
        )
        monkeypatch.setattr(drift_guard, "ScanOptions", functools.partial(ScanOptions, page_size=1))
        with as_function(monkeypatch, SERVICE):
            yield backend


def run(
    capsys: pytest.CaptureFixture[str], remaining_ms: int, scheduled: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    payload = {"job": "drift-guard", "scheduledTime": scheduled, "executionId": "e", "attempt": 1}
    result = handler(payload, FakeLambdaContext(function_name=SERVICE, remaining_ms=remaining_ms))
    points = emf_datapoints(capsys.readouterr().out)
    return result, {p.name: p.value for p in points if p.name != "RowsPerShard"}


def scan_seconds(dynamo: Backend) -> float:
    """What the last complete scan took at the pace, by the cursor's measure of it."""
    item = dynamo.client.get_item(TableName=dynamo.table_name, Key=CURSOR_KEY)["Item"]
    return float(item["lastScanUnits"]["N"]) / SCAN_RATE


def saga_rows(dynamo: Backend) -> list[dict[str, Any]]:
    return [i for i in dynamo.scan_all() if i["PK"]["S"].startswith("RSAGA#")]


def test_a_scan_that_needs_three_runs_completes_in_three_and_says_incomplete_before(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one whole scan (the measure of "% read")
    whole, first = run(capsys, WHOLE_MS, DUE)
    assert whole["complete"] is True
    assert (first["UnindexedRows"], first["StrayRows"]) == (UNINDEXED, STRAY)
    # When the next due scan gets 35 % of the whole scan's time per run, the runs after it
    # not due (each run may pass its deadline by one page's wait)
    budget_ms = MARGIN_MS + int(1000 * scan_seconds(dynamo) * 0.35)
    one, after_one = run(capsys, budget_ms, DUE)
    two, after_two = run(capsys, budget_ms, NEXT)
    three, after_three = run(capsys, budget_ms, AFTER)
    # Then the first two say incomplete with how much is read, and publish no count
    assert (one["complete"], two["complete"]) == (False, False)
    assert 30 <= one["percentRead"] < two["percentRead"] < 99  # 99: the cap while incomplete
    for metrics, percent in ((after_one, one["percentRead"]), (after_two, two["percentRead"])):
        assert metrics["DriftReadIncomplete"] == 1
        assert metrics["DriftReadPercent"] == pytest.approx(percent, abs=0.1)
        assert not {"UnindexedRows", "StrayRows", "ScannedSagaRows", "LegacyRows"} & set(metrics)
    # And the third, not due, completes the scan and counts every row exactly once
    assert three["complete"] is True
    assert (three["unindexedRows"], three["strayRows"]) == (UNINDEXED, STRAY)
    assert after_three["ScannedSagaRows"] == HEALTHY + UNINDEXED + STRAY
    assert (after_three["UnindexedRows"], after_three["StrayRows"]) == (UNINDEXED, STRAY)
    assert after_three["DriftReadIncomplete"] == 0
    # And the run after it, not due, does not scan
    _, after_four = run(capsys, RUN_BUDGET_MS, AFTER)
    assert "UnindexedRows" not in after_four


def test_a_scan_part_that_does_not_parse_is_discarded_and_the_scan_starts_over(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a cursor item claiming this state whose scan part is no object of its format
    layout = cursor_layout(
        DriftChecker(dynamo.client, dynamo.table_name, phase="sharded", shard_count=N).routing
    )
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={
            **CURSOR_KEY,
            "entityType": {"S": "RenewalSagaIndexDriftCursor"},
            "format": {"N": "1"},
            "recordVersion": {"N": "1"},
            "layout": {"S": layout},
            "progress": {"S": "{}"},
            "scan": {"S": json.dumps({"segments": 2, "lastKeys": [None], "done": [False]})},
        },
    )
    before = saga_rows(dynamo)
    # When the guard runs, not due
    result, metrics = run(capsys, WHOLE_MS, NEXT)
    # Then it says why, reads from the start (no scan: none is due), and writes no saga row
    assert "does not parse" in caplog.text
    assert "lastKeys and done must have 2 entries each" in caplog.text
    assert result["complete"] is True
    assert "UnindexedRows" not in metrics
    assert saga_rows(dynamo) == before
    item = dynamo.client.get_item(TableName=dynamo.table_name, Key=CURSOR_KEY)["Item"]
    assert "scan" not in item


def test_a_scan_taken_under_another_record_version_or_open_index_starts_over(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a scan stopped part-way under version 1
    stopped, _ = run(capsys, RUN_BUDGET_MS, DUE)
    assert stopped["complete"] is False
    store = CursorStore(dynamo.client, dynamo.table_name)
    layout = cursor_layout(
        DriftChecker(dynamo.client, dynamo.table_name, phase="sharded", shard_count=N).routing
    )
    assert store.resume(1, layout).scan is not None
    # Then under version 2 it starts over at once (nothing of it kept), and the log says why
    fresh = store.resume(2, layout).scan
    assert fresh is not None
    assert (fresh.rows, fresh.last_keys, fresh.done) == (0, [None], [False])
    assert "taken under record version 1" in caplog.text
    # And under the same version, a scan taken under another open index starts over
    cursor = store.resume(1, layout)
    assert cursor.scan is not None
    cursor.scan.open_index = "open(sharded(4))"
    cursor.scan.rows = 7
    checker = DriftChecker(
        dynamo.client,
        dynamo.table_name,
        phase="sharded",
        shard_count=N,
        scan_options=ScanOptions(segments=1),
    )
    report = checker.check(scan_unindexed=False, cursor=cursor)
    assert "drift scan starts over" in caplog.text
    assert report.scanned_saga_rows == HEALTHY + UNINDEXED + STRAY


@pytest.mark.parametrize(
    ("open_state", "counted"),
    [
        (OpenIndexState.OPEN, "open_index_missing_rows"),
        # In `adding` the same rows are the backfill's work left: unstamped, not missing.
        (OpenIndexState.ADDING, "open_index_unstamped_rows"),
    ],
)
def test_an_open_index_difference_is_counted_once_across_the_runs_of_a_scan(
    dynamo: Backend, open_state: OpenIndexState, counted: str
) -> None:
    # Given the open index `open` (or `adding`, settled), and the open sagas it misses (no
    # OpenSagaPK), found by a whole scan (the measure of a run's time)
    add_open_index(dynamo.client, dynamo.table_name)
    seed_state(dynamo.client, dynamo.table_name, Layout.sharded(N))
    seed_open_index(dynamo.client, dynamo.table_name, Layout.sharded(N), N, state=open_state)
    for n in range(HEALTHY):
        person = f"p-{n:02d}"
        stamp = {names.OPEN_INDEX_PARTITION_KEY: Person.of(person).open_index_pk(N)}
        dynamo.put_saga(f"s-ok-{n:02d}", person, gsi4pk="shard", shard_count=N, **stamp)
    clock = FakeClock()
    state = ControlStore(dynamo.client, dynamo.table_name).read()
    checker = DriftChecker(
        dynamo.client,
        dynamo.table_name,
        state=state,
        scan_options=ScanOptions(segments=2, read_units_per_second=SCAN_RATE, page_size=1),
        clock=clock.monotonic,
        sleep=clock.sleep,
        open_recheck_seconds=0.5,
    )
    store = CursorStore(dynamo.client, dynamo.table_name)
    cursor = DriftCursor(state.version, cursor_layout(checker.routing))
    whole = checker.check(scan_unindexed=True, cursor=cursor)
    cursor.completed(whole.index_read_units)
    assert getattr(whole, counted) == UNINDEXED + STRAY
    # When each run gets 35 % of the whole scan's time
    budget = 0.35 * (cursor.last_scan_units or 0) / SCAN_RATE
    runs = 0
    while True:
        runs += 1
        try:
            report = checker.check(
                scan_unindexed=runs == 1, deadline=clock.now + budget, cursor=cursor
            )
            break
        except DriftReadIncomplete:
            assert runs < 5
            # As the handler does: the next run reads the cursor the last one saved.
            store.save(cursor, "2026-07-10T10:00:00Z")
            cursor = store.resume(cursor.record_version, cursor.layout)
    # Then it took three runs, and the open sagas the index misses are each counted once
    assert runs == 3
    assert getattr(report, counted) == UNINDEXED + STRAY
    assert (report.open_index_missing_rows, report.open_index_unstamped_rows) == (
        (UNINDEXED + STRAY, 0) if open_state is OpenIndexState.OPEN else (0, UNINDEXED + STRAY)
    )
    assert report.open_index_stray_rows == 0
    assert report.unindexed_rows == UNINDEXED
    assert report.scanned_saga_rows == HEALTHY + UNINDEXED + STRAY


def test_a_key_above_n_that_needs_more_than_a_run_is_read_across_runs_counted_once(
    dynamo: Backend,
) -> None:
    # Given 30 rows on shard key N+1, which no reader of sharded(4) reads (the probes find it)
    beyond = keys.sharded_gsi4pk(N + 1)
    for n in range(BEYOND_ROWS):
        dynamo.put_saga(f"s-by-{n:02d}", f"p-{n:02d}", gsi4pk=beyond)
    clock = FakeClock()
    checker = DriftChecker(
        dynamo.client,
        dynamo.table_name,
        phase="sharded",
        shard_count=N,
        page_size=1,
        # One read unit a second on each key once a page's worth is spent: a page a second.
        index_pace=KeyReadPace(units_per_key=129),
        max_workers=1,
        clock=clock.monotonic,
        sleep=clock.sleep,
    )
    store = CursorStore(dynamo.client, dynamo.table_name)
    cursor = store.resume(1, cursor_layout(checker.routing))
    # When each run has 25 s, less than the key's 30 pages
    runs = 0
    while True:
        runs += 1
        try:
            report = checker.check(scan_unindexed=False, deadline=clock.now + 25, cursor=cursor)
            break
        except DriftReadIncomplete:
            assert runs < 5
            store.save(cursor, "2026-07-10T10:05:00Z")
            cursor = store.resume(1, cursor.layout)
    # Then it took more than one run, and every row on it is counted once
    assert runs >= 2
    assert report.unexpected_sharded_rows == BEYOND_ROWS
