"""The progress display (saga_index_cli.progress) and what the scans tell it: rows/s, ETA, the
log cadence on a non-terminal (an injected clock, no sleeps), the live bar on a terminal."""

from __future__ import annotations

import io
import logging
import re
import threading
from typing import Any

import pytest
from rich.console import Console

from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.store.dynamo.scan import PageRead, SagaTableScanner, ScanOptions
from saga_index_cli import progress
from saga_index_cli.backfill.output import RunProgress
from saga_index_cli.progress import LiveProgress, StepReading, format_seconds

LOGGER = "saga_index.cli.progress"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def quiet(clock: FakeClock, *, log_interval: float = 10.0) -> LiveProgress:
    """The non-terminal display on the fake clock."""
    return LiveProgress(live=False, log_interval=log_interval, clock=clock)


# ---- rate and ETA ---------------------------------------------------------------------------


def test_the_rate_is_the_average_since_the_step_started_and_the_eta_what_is_left_at_it() -> None:
    clock = FakeClock()
    step = quiet(clock).step("scan", total=1000, unit="rows", approximate=True)
    clock.now += 10
    step.update(completed=250)
    reading = step.reading()
    assert reading.rate == 25.0
    assert reading.eta_seconds == 30.0
    assert reading.describe() == "scan: 250 of ~1,000 rows (25.0 %), 25.0 rows/s, ETA 0:00:30"


def test_without_a_total_a_step_shows_rows_and_rate_but_no_eta() -> None:
    clock = FakeClock()
    step = quiet(clock).step("scan", total=None, unit="rows")
    clock.now += 4
    step.update(advance=10, detail="3 saga rows")
    reading = step.reading()
    assert reading.eta_seconds is None
    assert reading.describe() == "scan: 10 rows, 2.5 rows/s, 3 saga rows"


@pytest.mark.parametrize(
    ("reading", "eta"),
    [
        # nothing done yet, or no time passed: no rate, so no ETA
        (StepReading("s", "rows", 0, 100, False, 5.0), None),
        (StepReading("s", "rows", 10, 100, False, 0.0), None),
        # an approximate total (ItemCount) already passed: unknown, not a negative time
        (StepReading("s", "rows", 120, 100, True, 10.0), None),
        # an exact total reached or passed: nothing left
        (StepReading("s", "rows", 120, 100, False, 10.0), 0.0),
        (StepReading("s", "rows", 100, 100, True, 10.0), 0.0),
    ],
)
def test_the_eta_is_unknown_rather_than_wrong(reading: StepReading, eta: float | None) -> None:
    assert reading.eta_seconds == eta
    assert reading.eta_text() == ("ETA unknown" if eta is None else "ETA 0:00:00")


def test_a_later_total_gives_the_eta_from_then_on() -> None:
    clock = FakeClock()
    step = quiet(clock).step("index reads", total=None, unit="partitions")
    clock.now += 2
    step.update(completed=1, total=17)
    assert step.reading().count_text() == "1 of 17 partitions (5.9 %)"
    assert step.reading().eta_seconds == 32.0


@pytest.mark.parametrize(
    ("seconds", "down", "up"),
    [(0, "0:00:00", "0:00:00"), (59.2, "0:00:59", "0:01:00"), (3661, "1:01:01", "1:01:01")],
)
def test_durations_round_down_when_spent_and_up_when_left(
    seconds: float, down: str, up: str
) -> None:
    assert format_seconds(seconds) == down
    assert format_seconds(seconds, round_up=True) == up


# ---- the log cadence (non-terminal) -------------------------------------------------------


def test_a_non_terminal_logs_each_step_once_per_interval_and_once_at_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    display = quiet(clock, log_interval=10.0)
    step = display.step("scan", total=100, unit="rows")
    caplog.set_level(logging.INFO, logger=LOGGER)
    logged_at: dict[float, int] = {}
    for at, completed in ((3, 5), (9.9, 10), (10, 20), (15, 30), (20.5, 40), (29, 50)):
        clock.now = 1000.0 + at
        before = len(caplog.records)
        step.update(completed=completed)
        logged_at[at] = len(caplog.records) - before
    assert logged_at == {3: 0, 9.9: 0, 10: 1, 15: 0, 20.5: 1, 29: 0}
    assert [r.getMessage() for r in caplog.records] == [
        "scan: 20 of 100 rows (20.0 %), 2.0 rows/s, ETA 0:00:40",
        "scan: 40 of 100 rows (40.0 %), 2.0 rows/s, ETA 0:00:31",
    ]
    clock.now = 1050.0
    step.update(completed=100)
    caplog.clear()
    step.finish()
    step.finish()  # once only
    assert [r.getMessage() for r in caplog.records] == [
        "scan: done, 100 rows in 0:00:50 (2.0 rows/s)"
    ]


def test_the_default_interval_is_read_when_the_display_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.25)
    assert LiveProgress(live=False).log_interval == 0.25


def test_each_step_keeps_its_own_cadence(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    display = quiet(clock, log_interval=10.0)
    first = display.step("index reads", total=17, unit="partitions")
    clock.now += 8
    second = display.step("scan", total=None, unit="rows")
    caplog.set_level(logging.INFO, logger=LOGGER)
    clock.now += 3  # 11 s after the first began, 3 s after the second
    first.update(completed=5)
    second.update(completed=5)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["index reads"]


def test_updates_from_many_threads_are_all_counted() -> None:
    step = LiveProgress(live=False).step("scan", total=None, unit="rows")

    def add() -> None:
        for _ in range(1000):
            step.update(advance=1)

    threads = [threading.Thread(target=add) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert step.reading().completed == 8000


# ---- the live bar (terminal) ----------------------------------------------------------------


def test_a_terminal_gets_the_bar_with_rate_and_eta_and_no_log_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=200, color_system=None)
    caplog.set_level(logging.INFO, logger=LOGGER)
    with LiveProgress(console=console, log_interval=0.0, clock=clock) as display:
        assert display.live
        step = display.step("base-table scan", total=1000, unit="rows", approximate=True)
        clock.now += 10
        step.update(completed=400, detail="120 saga rows")
        step.finish()
    drawn = screen.getvalue()
    assert "base-table scan" in drawn
    assert "400 of ~1,000 rows (40.0 %)" in drawn
    assert "40.0 rows/s" in drawn
    assert "ETA 0:00:15" in drawn
    assert "120 saga rows" in drawn
    assert caplog.records == []


# ---- the backfill's display is the same one -------------------------------------------------


def test_the_backfill_logs_its_counts_through_the_shared_display(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.0)
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    caplog.set_level(logging.INFO, logger="saga_index.cli.backfill")
    run = RunProgress(label="forward", total=10, unit="rows")
    assert isinstance(run, LiveProgress)
    with run:
        run.show(completed=4, scanned=6, restamped=3, extra=" · 1 running")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("forward: 4 of 10 rows (40.0 %), ")
    assert "rows/s" in line
    assert "scanned 6 · re-stamped 3 (" in line
    assert line.endswith("/s) · 1 running")


# ---- what the scans tell a listener ---------------------------------------------------------


class PagedScan:
    """Pages of 3 examined items, 2 of them saga rows, 4 read units each; 5 pages a segment."""

    def scan(self, **request: Any) -> dict[str, Any]:
        segment = request["Segment"]
        page_no = int(request.get("ExclusiveStartKey", {}).get("n", {}).get("N", "0"))
        page: dict[str, Any] = {
            "Items": [
                {"PK": {"S": f"RSAGA#{segment}-{page_no}-{i}"}, "SK": {"S": "META"}}
                for i in range(2)
            ],
            "ScannedCount": 3,
            "ConsumedCapacity": {"CapacityUnits": 4.0},
        }
        if page_no < 4:
            page["LastEvaluatedKey"] = {"n": {"N": str(page_no + 1)}}
        return page


def test_the_scanner_tells_its_listener_every_page_one_at_a_time() -> None:
    scanner = SagaTableScanner(
        PagedScan(),  # type: ignore[arg-type]
        "t",
        options=ScanOptions(segments=3, read_units_per_second=40_000),
    )
    pages: list[PageRead] = []
    inside = threading.Lock()
    overlapped: list[bool] = []

    def listen(page: PageRead) -> None:
        overlapped.append(not inside.acquire(blocking=False))
        pages.append(page)
        inside.release()

    result = scanner.scan(on_page=listen)
    assert len(pages) == 3 * 5
    assert set(pages) == {PageRead(scanned=3, rows=2, read_units=4.0)}
    assert sum(p.rows for p in pages) == len(result.items) == 30
    assert sum(p.scanned for p in pages) == result.scanned_count == 45
    assert sum(p.read_units for p in pages) == result.read_units
    assert not any(overlapped)


class EmptyIndex:
    """An index with no rows (every Query answers one empty page) over a one-page table."""

    def query(self, **request: Any) -> dict[str, Any]:
        return {"Items": [], "Count": 0, "ScannedCount": 0}

    def get_paginator(self, _: str) -> Any:
        client = self

        class Paginator:
            def paginate(self, **request: Any) -> list[dict[str, Any]]:
                return [client.query(**request)]

        return Paginator()

    def scan(self, **request: Any) -> dict[str, Any]:
        return {"Items": [], "ScannedCount": 7, "ConsumedCapacity": {"CapacityUnits": 1.0}}


def test_the_drift_check_counts_its_index_reads_then_the_scan_pages() -> None:
    checker = DriftChecker(
        EmptyIndex(),  # type: ignore[arg-type]
        "t",
        phase="sharded",
        shard_count=4,
        scan_options=ScanOptions(segments=2),
    )
    events: list[Any] = []
    report = checker.check(
        scan_unindexed=True,
        on_index_read=lambda done, total: events.append((done, total)),
        on_scan_page=events.append,
    )
    # the legacy key's COUNT, then the 4 shard keys; then one page per segment
    assert events[:5] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    assert events[5:] == [PageRead(scanned=7, rows=0, read_units=1.0)] * 2
    assert report.scanned_saga_rows == 0


def test_a_paused_step_says_paused_and_its_paused_time_does_not_count_towards_the_rate() -> None:
    clock = FakeClock()
    step = quiet(clock).step("forward: rows moved", total=100, unit="rows")
    clock.now += 10
    step.update(completed=50)
    step.update(paused=True)
    clock.now += 60  # paused for a minute: no "0.7 rows/s, ETA 0:01:10" frozen on the screen
    reading = step.reading()
    assert (reading.rate_text(), reading.eta_text()) == ("paused", "ETA paused")
    assert reading.describe() == "forward: rows moved: 50 of 100 rows (50.0 %), paused, ETA paused"
    step.update(paused=False)
    clock.now += 10
    step.update(completed=100)
    # 100 rows in the 20 s it ran, not in the 80 s since it started
    assert step.reading().rate == 5.0


def test_the_backfill_counts_the_rows_it_moved_against_the_rows_to_move(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from saga_index.layout_change.backfill.wire import SegmentCounts

    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.0)
    monkeypatch.setenv("TTY_COMPATIBLE", "0")
    caplog.set_level(logging.INFO, logger="saga_index.cli.backfill")
    run = RunProgress(label="forward: rows moved", total=10, unit="rows")
    with run:
        # anomalies stay where they are: they are not among the rows to move
        run.show_totals(SegmentCounts(scanned=20, restamped=3, skipped=1, anomalies=4))
        run.follow_control(SimpleNamespace(backfill_paused=True, lease=None))  # type: ignore[arg-type]
        # the pace the run's last heartbeat reported shows on the next line
        lease = SimpleNamespace(pace="25/s of 50/s (IndexWriteKeyRangeThroughputExceeded)")
        run.follow_control(SimpleNamespace(backfill_paused=False, lease=lease))  # type: ignore[arg-type]
        run.show_totals(SegmentCounts(scanned=21, restamped=4, skipped=1, anomalies=4))
    moved, paused, _resumed, paced = [r.getMessage() for r in caplog.records]
    assert moved.startswith("forward: rows moved: 4 of 10 rows (40.0 %), ")
    assert ", paused, ETA paused, " in paused
    assert paced.endswith("· pace 25/s of 50/s (IndexWriteKeyRangeThroughputExceeded)")


@pytest.mark.parametrize("width", [80, 120, 200])
def test_the_bar_keeps_a_useful_width_beside_a_long_detail(width: int) -> None:
    clock = FakeClock()
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=width, color_system=None)
    with LiveProgress(console=console, log_interval=0.0, clock=clock) as display:
        step = display.step("forward: rows moved", total=12_000, unit="rows")
        clock.now += 90
        # Nearly done: the bar's filled cells are nearly its width.
        step.update(
            completed=11_990, detail="scanned 15,000 · re-stamped 11,990 (133.2/s), paused no"
        )
        display._progress.refresh()
        frame = screen.getvalue().rsplit("\x1b[2K", 2)
    drawn = "".join(frame[-2:])
    bar = max(len(run) for run in re.findall("[━╸]+", drawn))
    assert bar >= progress.BAR_MIN_CELLS - 1, drawn
    assert "re-stamped 11,990" in drawn  # the detail, on its own line
