"""The drift guard's run in the layout lab: what one run reads, and how long it takes at its pace.

Every run reads every row of the GSI4 keys the state names (a COUNT costs what reading the rows
costs), so its cost grows with the history like an ADR enumeration's, in every layout that keeps
the terminal sagas in GSI4 (state-split reads both key families). Paced at 300 read units per key
in any second (saga_index.store.dynamo.key_pace), 16 keys at a time, it must finish in the run's
read budget: the Lambda timeout (one minute less than the 5-minute period) less the handler's
20 s margin. The personId-keyed layout has no key set to read (its guard would be the base-table
scan): no figures.
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
from saga_index.index import DRIFT_GUARD
from saga_index.store.dynamo import KeyReadPace

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
        ]
        for row in rows
        if row.get("driftRunRcu") is not None
    ]
    pace = KeyReadPace()
    emit(
        f"The drift guard's run: every GSI4 key read in full, at most {pace.units_per_key:.0f} "
        f"RCU per key in any second, {GUARD_WORKERS} keys at a time, within "
        f"{RUN_READ_SECONDS:.0f} s",
        ["scale", "history", "layout", "run RCU", "largest key RCU", "paced time", "fits a run"],
        table,
    )
