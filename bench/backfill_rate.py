"""The backfill's rate cap holds: achieved writes per second against the cap, within ±10 % for
the layout's backfill (GSI4PK) and within ±5 % for the open-saga index's (OpenSagaPK), side by
side in one run.

    python -m bench.backfill_rate [--caps 25,100] [--segments 1,4] [--runs 5] [--seconds 4]
                                  [--kinds layout,open-index]

For each (kind, cap, segments) a table on a local dynalite server is seeded with cap x seconds
open legacy sagas; the backfill of that kind runs over it `runs` times, alternately forward and
back, and every UpdateItem is time-stamped as it is issued. Each run writes every row: the
layout's moves it legacy -> sharded(16) and back; the open index's stamps OpenSagaPK on every
open saga (forward, `adding`) and removes it again (rollback, `removing`), through the same
segment worker an `open-index backfill` runs (a ticket of kind open-index selects its row
rule, backfill/open_row.py). Per run:

  achieved      writes/s over the middle 80 % of the writes (start-up and the last stragglers
                of the other segments excluded): the steady rate the cap is meant to set
  whole run     (writes - 1) / (last - first write)
  max 1 s       the most writes issued in any 1-second window (the cap must hold over every
                window, not only on average: each segment's bucket holds one token at most)

One segment measures one worker's own bucket: what each Step Functions segment runs, at its
share of the cap. Several segments measure the local runner, whose threads share one bucket at
the total cap. The verdict of each (kind, cap, segments) is the median of its runs'
achieved/cap ratios, which must lie in [0.9, 1.1] for the layout's backfill and in
[0.95, 1.05] for the open index's. Timing belongs here, never in a unit test: it depends on the
machine.
"""

from __future__ import annotations

import argparse
import bisect
import math
import statistics
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench.output import progress, save
from bench.server import local_server
from devkit.schema import create_table, load_template
from devkit.seed import bare_saga_row
from saga_index.index import LEGACY, keys
from saga_index.layout_change.backfill import (
    BackfillRequest,
    Move,
    RunTicket,
    paced_bucket,
    paced_rules,
    run_backfill,
)
from saga_index.layout_change.record import (
    BackfillDirection,
    BackfillKind,
    format_time,
    utc_now,
)
from saga_index.store.dynamo import make_client, serialize

NAME = "backfill_rate"
LAYOUT, OPEN_INDEX = BackfillKind.LAYOUT.value, BackfillKind.OPEN_INDEX.value
KINDS: tuple[str, ...] = (LAYOUT, OPEN_INDEX)
# How far the median achieved/cap may lie from 1, by kind (the open index's is the 5 %).
TOLERANCES: dict[str, float] = {LAYOUT: 0.10, OPEN_INDEX: 0.05}
TOLERANCE = TOLERANCES[LAYOUT]
# One cap, one segment, one run of 20 rows of each kind (a fifth of a second each at 100/s).
TINY: dict[str, Any] = {
    "caps": (100.0,),
    "segments": (1,),
    "runs": 1,
    "seconds": 0.2,
    "min_rows": 20,
}
# The fewest rows a table gets whatever cap x seconds: enough writes for a steady middle 80 %.
MIN_ROWS = 50
SHARDS = 16


def _seed(client: Any, table: str, rows: int) -> None:
    items = [
        {
            **bare_saga_row(f"rate-{n:06}", f"person-{n % 997}", gsi4pk=keys.LEGACY_GSI4PK),
            "leaseId": f"lease-{n}",
            "payload": "x" * 900,  # a 1 KB row, as production's
        }
        for n in range(rows)
    ]
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": serialize(i)}} for i in items[start : start + 25]]
        pending: dict[str, Any] = {table: batch}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems", {})


def _window_rate(stamps: Sequence[float]) -> float:
    """Writes per second over the middle 80 % of the writes."""
    lo, hi = int(len(stamps) * 0.1), int(len(stamps) * 0.9) - 1
    return (hi - lo) / (stamps[hi] - stamps[lo])


def _max_in_one_second(stamps: Sequence[float]) -> int:
    return max(bisect.bisect_right(stamps, t + 1.0) - i for i, t in enumerate(stamps))


def ticket_for(kind: str, direction: BackfillDirection) -> RunTicket:
    """The run's ticket outside any control record (the bench owns its table: no lease). A
    layout run moves legacy <-> sharded(16); an open-index run leaves the legacy layout alone
    and stamps (forward) or removes (rollback) OpenSagaPK under the open index's N = 16."""
    if kind == LAYOUT:
        return RunTicket.unleased(Move.between_legacy_and(direction, SHARDS))
    return RunTicket.of(
        Move(direction, LEGACY, LEGACY),
        state_version=0,
        holder="bench",
        lease_token="unleased",  # noqa: S106 (a marker, not a secret: no lease is held)
        started_at=format_time(utc_now()),
        open_shard_count=SHARDS,
    )


def measure(
    client: Any,
    table: str,
    *,
    cap: float,
    segments: int,
    direction: BackfillDirection,
    kind: str = LAYOUT,
) -> dict[str, Any]:
    stamps: list[float] = []

    def stamp(**_: Any) -> None:
        stamps.append(time.monotonic())  # list.append is atomic: segments share the list

    client.meta.events.register("before-call.dynamodb.UpdateItem", stamp)
    try:
        request = BackfillRequest(
            direction=direction,
            total_segments=segments,
            max_writes_per_second=cap,
            dry_run=False,
            kind=BackfillKind(kind),
        )
        # The cap is what this bench measures: the run starts at it (a backfill's rise from its
        # start to its cap is bench.pacing's).
        bucket = paced_bucket(request, threading.Event(), rules=paced_rules(start_fraction=1.0))
        run = run_backfill(client, table, request, run=ticket_for(kind, direction), bucket=bucket)
    finally:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", stamp)
    if not run.complete:
        raise RuntimeError(f"backfill run failed: {run.failures}")
    written = sum(r.restamped for r in run.results)
    if written != len(stamps):
        # Every UpdateItem issued must have written its row, or the rate measured is not the
        # rate of a run that moved every row.
        raise RuntimeError(f"{kind} run wrote {written} rows in {len(stamps)} UpdateItems")
    stamps.sort()
    achieved = _window_rate(stamps)
    return {
        "kind": kind,
        "direction": direction.value,
        "writes": len(stamps),
        "achieved": round(achieved, 3),
        "ratio": round(achieved / cap, 4),
        "wholeRun": round((len(stamps) - 1) / (stamps[-1] - stamps[0]), 3),
        "maxInOneSecond": _max_in_one_second(stamps),
    }


def run(
    *,
    caps: Sequence[float] = (25.0, 100.0),
    segments: Sequence[int] = (1, 4),
    runs: int = 5,
    seconds: float = 4.0,
    kinds: Sequence[str] = KINDS,
    min_rows: int = MIN_ROWS,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    unknown = [k for k in kinds if k not in TOLERANCES]
    if unknown:
        raise ValueError(f"unknown backfill kind(s) {unknown}; known: {list(TOLERANCES)}")
    template = load_template()
    configs: list[dict[str, Any]] = []
    with local_server(endpoint_url) as endpoint:
        client = make_client(endpoint_url=endpoint, region="us-east-1")
        for cap in caps:
            for segment_count in segments:
                # Side by side: each kind at this cap and segment count before the next.
                for kind in kinds:
                    configs.append(
                        _configuration(
                            client,
                            template,
                            kind,
                            cap=cap,
                            segments=segment_count,
                            runs=runs,
                            rows=max(min_rows, math.ceil(cap * seconds)),
                        )
                    )
    return {
        "tolerance": TOLERANCE,
        "tolerances": {k: TOLERANCES[k] for k in kinds},
        "seconds": seconds,
        "configs": configs,
        "ok": all(c["withinTolerance"] for c in configs),
    }


def _configuration(
    client: Any,
    template: dict[str, Any],
    kind: str,
    *,
    cap: float,
    segments: int,
    runs: int,
    rows: int,
) -> dict[str, Any]:
    """One (kind, cap, segments): a table of its own with `rows` open sagas, `runs` runs
    alternately forward and back."""
    suffix = "" if kind == LAYOUT else "-open"
    table = f"rate-{int(cap)}-{segments}{suffix}"
    create_table(client, table, template)
    _seed(client, table, rows)
    progress(
        f"backfill_rate: {kind}, cap {cap}/s, {segments} segment(s), {rows} rows x {runs} runs"
    )
    measured = [
        measure(
            client,
            table,
            cap=cap,
            segments=segments,
            direction=BackfillDirection.FORWARD if n % 2 == 0 else BackfillDirection.ROLLBACK,
            kind=kind,
        )
        for n in range(runs)
    ]
    ratios = [m["ratio"] for m in measured]
    median_ratio = statistics.median(ratios)
    return {
        "kind": kind,
        "cap": cap,
        "segments": segments,
        "rows": rows,
        "runs": measured,
        "medianRatio": round(median_ratio, 4),
        "medianAchieved": round(statistics.median(m["achieved"] for m in measured), 3),
        "minRatio": min(ratios),
        "maxRatio": max(ratios),
        "maxInOneSecond": max(m["maxInOneSecond"] for m in measured),
        "tolerance": TOLERANCES[kind],
        "withinTolerance": abs(median_ratio - 1) <= TOLERANCES[kind],
    }


def render(result: dict[str, Any]) -> None:
    headers = [
        "backfill",
        "cap (writes/s)",
        "segments",
        "runs",
        "median achieved",
        "achieved / cap",
        "range",
        "max in any 1 s",
        "within",
    ]
    rows = [
        [
            c.get("kind", LAYOUT),
            f"{c['cap']:g}",
            str(c["segments"]),
            str(len(c["runs"])),
            f"{c['medianAchieved']:.1f}",
            f"{c['medianRatio']:.3f}",
            f"{c['minRatio']:.3f}..{c['maxRatio']:.3f}",
            str(c["maxInOneSecond"]),
            f"{'yes' if c['withinTolerance'] else 'NO'} (±{c.get('tolerance', TOLERANCE):.0%})",
        ]
        for c in result["configs"]
    ]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    print(
        "\nBackfill rate cap: achieved writes per second against the cap, the layout's "
        "backfill and the open index's side by side (dynalite; median of the runs)\n"
    )
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    print("\n".join(lines))
    print()


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(part) for part in text.split(","))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(part.strip() for part in text.split(","))
    unknown = [k for k in kinds if k not in TOLERANCES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown kind(s) {unknown}; known: {list(TOLERANCES)}")
    return kinds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backfill_rate", description=__doc__)
    parser.add_argument("--caps", type=_floats, default=(25.0, 100.0))
    parser.add_argument("--segments", type=_ints, default=(1, 4))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--kinds", type=_kinds, default=KINDS)
    args = parser.parse_args(argv)
    result = run(
        caps=args.caps,
        segments=args.segments,
        runs=args.runs,
        seconds=args.seconds,
        kinds=args.kinds,
    )
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
