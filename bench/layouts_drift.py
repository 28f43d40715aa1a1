"""The drift guard's run in the layout lab: what one run reads, and how long it takes at its pace.

Every run reads every row of the GSI4 keys the state names (a COUNT costs what reading the rows
costs), so its cost grows with the history like an ADR enumeration's, in every layout that keeps
the terminal sagas in GSI4 (state-split reads both key families). Paced at 300 read units per key
in any second (saga_index.store.dynamo.key_pace), 16 keys at a time, it must finish in the run's
read budget: the Lambda timeout (one minute less than the 5-minute period) less the handler's
20 s margin. The personId-keyed layout has no key set to read (its guard would be the base-table
scan): no figures.

A scanning read (every K-th run) adds the base-table scan, paced at its own rate over the whole
table, after the index reads; both resume from the drift cursor across runs. `scanning_read_runs`
plays it run by run (each run stops at a page's end, past its budget by at most one page's wait)
and sets the runs it takes beside what the paced budget implies, ceil(units needed / units a run
reads at the paces), with the verdict: whether it takes no more, and whether it completes before
the guard's alarms would page on it (DriftReadIncomplete after DRIFT_READ_RUNS runs, the scan's
counts after two scan intervals).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.layouts_keys import LabLayout
from bench.layouts_model import Aggregates, KeySpace, query_cost, row_keys
from bench.output import emit, num
from handlers.drift_guard import SAFETY_MARGIN_SECONDS
from infra.observability.alarms import DRIFT_READ_RUNS
from saga_index.index import DRIFT_GUARD
from saga_index.layout_change.checks.drift import DEFAULT_SCAN_EVERY
from saga_index.store.dynamo import KeyReadPace, ScanOptions

GUARD_WORKERS = 16  # DriftChecker's max_workers: keys read at once
# infra/drift.py: the timeout is one minute less than the period.
RUN_READ_SECONDS = (DRIFT_GUARD.period_minutes - 1) * 60 - SAFETY_MARGIN_SECONDS


def guard_key_units(layout: LabLayout, agg: Aggregates, shard_count: int) -> np.ndarray | None:
    """Read units of one drift run on each GSI4 key that holds rows (None: personId keys)."""
    if layout.gsi4 == "person":
        return None
    space = KeySpace(shard_count, agg.persons)
    open_key, terminal_key = row_keys(layout, space, agg)
    keys = np.concatenate([open_key, terminal_key])
    size = 1 + int(keys.max()) if len(keys) else 1
    rows = np.bincount(
        keys, weights=np.concatenate([agg.open_rows, agg.terminal_rows]), minlength=size
    )
    data = np.bincount(
        keys, weights=np.concatenate([agg.open_bytes, agg.terminal_bytes]), minlength=size
    )
    held = rows > 0
    units, _ = query_cost(data[held].astype(np.int64), rows[held].astype(np.int64))
    return units


def drift_guard_figures(
    layout: LabLayout, agg: Aggregates, shard_count: int, pace: KeyReadPace | None = None
) -> dict[str, Any]:
    """`driftRunRcu` (one run), `driftKeyRcu` (its largest key: what an unpaced run puts on one
    key at once), `driftRunSeconds` (paced, 16 keys at a time), `driftFitsRun` (within the run's
    read budget), `driftRuns` (the runs the read takes at that budget: it resumes from its cursor
    across runs); all None for a layout with no key set."""
    units = guard_key_units(layout, agg, shard_count)
    if units is None:
        return dict.fromkeys(
            ("driftRunRcu", "driftKeyRcu", "driftRunSeconds", "driftFitsRun", "driftRuns")
        )
    pace = pace or KeyReadPace()
    ordered = sorted((float(u) for u in units), reverse=True)
    seconds = pace.seconds_for_keys(ordered, workers=GUARD_WORKERS) if ordered else 0.0
    return {
        "driftRunRcu": round(sum(ordered), 1),
        "driftKeyRcu": round(ordered[0] if ordered else 0.0, 1),
        "driftRunSeconds": round(seconds, 1),
        "driftFitsRun": seconds <= RUN_READ_SECONDS,
        "driftRuns": max(1, math.ceil(seconds / RUN_READ_SECONDS)),
        **scanning_read_runs(seconds, agg),
    }


def scanning_read_runs(
    index_seconds: float, agg: Aggregates, scan_rate: float | None = None
) -> dict[str, Any]:
    """A scanning read (the index reads taking `index_seconds`, then the whole table scanned at
    `scan_rate`, the guard's default 400 units a second) run by run: `driftScanRcu`, the runs it
    takes (`driftScanReadRuns`), those the paced budget implies (`driftScanReadRunsImplied`),
    and the verdict (`driftScanReadVerdict`): "as budgeted" when it takes no more, and whether
    it completes before DriftReadIncomplete pages (its alarm: DRIFT_READ_RUNS runs)."""
    rate = scan_rate or ScanOptions().read_units_per_second
    units, pages = query_cost(
        np.array([agg.saga_bytes + agg.other_bytes]), np.array([agg.saga_rows + agg.other_rows])
    )
    scan_units, page_count = float(units[0]), int(pages[0])
    page_seconds = scan_units / page_count / rate
    implied = max(1, math.ceil((index_seconds + scan_units / rate) / RUN_READ_SECONDS))
    runs, index_left, pages_left = 0, index_seconds, page_count
    while index_left > 0 or pages_left > 0:
        runs += 1
        spent = min(index_left, RUN_READ_SECONDS)
        index_left -= spent
        if index_left <= 0:
            # The scanner checks its deadline before each page: it reads while time is left.
            fit = math.ceil(max(0.0, RUN_READ_SECONDS - spent) / page_seconds)
            pages_left -= min(pages_left, fit)
    verdict = "as budgeted" if runs <= implied else f"{runs - implied} run(s) over budget"
    scan_interval_runs = DEFAULT_SCAN_EVERY
    # Every run but the last publishes DriftReadIncomplete = 1: DRIFT_READ_RUNS of them page.
    if runs - 1 >= DRIFT_READ_RUNS:
        verdict += f"; DriftReadIncomplete pages ({runs - 1} runs without a verdict)"
    if runs > 2 * scan_interval_runs:
        verdict += "; the scan alarms page on missing data"
    return {
        "driftScanRcu": round(scan_units, 1),
        "driftScanReadRuns": runs,
        "driftScanReadRunsImplied": implied,
        "driftScanReadVerdict": verdict,
    }


def render_drift(rows: Sequence[Mapping[str, Any]]) -> None:
    """The drift guard's run per scale, history and layout (layouts with a key set)."""
    table = [
        [
            f"{row['scale']}x",
            f"{row['historyFactor']}x",
            row["name"],
            num(row["driftRunRcu"], 0),
            num(row["driftKeyRcu"], 0),
            num(row["driftRunSeconds"], 0, " s"),
            "yes" if row["driftFitsRun"] else f"NO: {row['driftRuns']} runs",
            num(row["driftScanRcu"], 0),
            f"{row['driftScanReadRuns']} / {row['driftScanReadRunsImplied']}",
            row["driftScanReadVerdict"],
        ]
        for row in rows
        if row.get("driftRunRcu") is not None
    ]
    pace = KeyReadPace()
    emit(
        f"The drift guard's run: every GSI4 key read in full, at most {pace.units_per_key:.0f} "
        f"RCU per key in any second, {GUARD_WORKERS} keys at a time, within "
        f"{RUN_READ_SECONDS:.0f} s",
        [
            "scale",
            "history",
            "layout",
            "run RCU",
            "largest key RCU",
            "paced time",
            "fits a run",
            "scan RCU",
            "scanning read: runs / budget implies",
            "verdict",
        ],
        table,
    )
