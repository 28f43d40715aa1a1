"""The layout lab's scanning read of the drift guard (bench/layouts_drift.py): the runs it takes
played run by run, set beside what the paced budget implies, with the verdict."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from bench.layouts_drift import RUN_READ_SECONDS, scanning_read_runs

# The table at 100x rows with a 100x history: about 392,000 read units (8 KB a unit).
TABLE_BYTES = 392_000 * 8192


def table(total_bytes: int) -> Any:
    return SimpleNamespace(
        saga_bytes=total_bytes, other_bytes=0, saga_rows=total_bytes // 700, other_rows=0
    )


def test_a_scanning_read_at_100x_takes_the_runs_its_paced_budget_implies() -> None:
    # sharded(16): 126 s of index reads, then 980 s of scan at 400 units a second
    sharded = scanning_read_runs(126.0, table(TABLE_BYTES))
    assert sharded["driftScanRcu"] >= 392_000
    assert (sharded["driftScanReadRuns"], sharded["driftScanReadRunsImplied"]) == (6, 6)
    assert sharded["driftScanReadVerdict"] == "as budgeted"
    # legacy: the key's 1,973 s, then the scan; still under the alarm's 18 runs
    legacy = scanning_read_runs(1973.0, table(TABLE_BYTES))
    assert (legacy["driftScanReadRuns"], legacy["driftScanReadRunsImplied"]) == (14, 14)
    assert legacy["driftScanReadVerdict"] == "as budgeted"


def test_a_scanning_read_the_alarm_would_page_on_says_so() -> None:
    # An index read of 20 runs alone: the read has no verdict for longer than 18 runs
    slow = scanning_read_runs(20 * RUN_READ_SECONDS, table(1_000_000))
    assert slow["driftScanReadRuns"] == 21
    assert "DriftReadIncomplete pages (20 runs without a verdict)" in slow["driftScanReadVerdict"]


def test_a_tiny_table_is_read_in_one_run() -> None:
    tiny = scanning_read_runs(1.0, table(50_000))
    assert (tiny["driftScanReadRuns"], tiny["driftScanReadRunsImplied"]) == (1, 1)
