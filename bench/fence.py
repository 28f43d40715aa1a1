"""The backfill's lease fences side by side under DynamoDB's conflict rules and per-key ceilings.

    python -m bench.fence [--segments 16,64] [--caps 100,1000] [--seconds 3] [--tiny]

For each fence, segment count and cap (the local runner's --max-writes-per-second), a fresh
table in in-process moto is seeded with about cap x seconds legacy sagas (at most --max-rows),
the record is planted in `migrating`, and a forward backfill runs under devkit.semantics (every
client under one model: a transaction holds its items for 10 ms, each partition key gets 1,000
WCU and 3,000 RCU per second) while an operator runs `backfill throttle` (to the run's cap),
`pause` and `resume` every 200 ms, and the run heartbeats every second. Per run:

  achieved/cap      re-stamps per second of the run's wall time, over the cap
  vs unfenced       that ratio over the unfenced run's at the same segments and cap, measured
                    in the same invocation: in-process moto serialises every request on this
                    machine's cores and cannot reach 1,000 writes/s, so the absolute ratio says
                    what moto can do and this one what the fence costs
  WCU/re-stamp      what the run's own requests consumed per re-stamp: on the rows' partitions,
                    on the index, on the control partition and on the fence slots' partitions
                    (heartbeats and operator writes are not the run's: they are counted apart)
  cancelled         the run's TransactWriteItems cancelled by another's (TransactionConflict)
  heartbeats, ops   the share of the keeper's heartbeats and of the operator's writes of STATE
                    that were answered (the rest met TransactionConflictException)
  stopped, lease    segments that stopped (SegmentThrottledError after the fence's conflict
                    retries) and whether the run lost its lease

moto runs as devkit.semantics.moto_harness sets it up: one request at a time in arrival order,
and a transaction's rollback copy made of the items it includes, not of the whole table (moto's
own copy costs 40 ms a transaction at 200 rows and 190 ms at 1,000 on this machine, where an
UpdateItem takes 8 ms).

The fences: FENCES below: unfenced, the shared-state fence (the known-bad design, kept in
devkit.semantics.contended) and the per-segment fence the product runs.

    python -m bench.fence --engine [--segments 64] [--caps 1000] [--seconds 3] [--tiny]
        [--time-scale 0.01]

--engine runs the same fences on the fast engine instead (devkit.engine: dynalite behind the
semantics proxy, which applies the same model to every client at HTTP level and serves the
transactions), at production rates: by default the unfenced run and the product's fence at
1,000 writes/s on 64 segments over 3,000 rows, side by side. No operator runs there (its
`pause` would stop the run a quarter of the time): the figure is the run's pace.

Its time is dilated (devkit.semantics.dilation; --time-scale, engine seconds per real second,
default ENGINE_TIME_SCALE = 0.01: one engine second lasts 100 real seconds). This machine's
engine serves about 20 fenced re-stamps per real second (a re-stamp costs the proxy three
requests to dynalite), far from 1,000; at 0.01 the cap is 10 re-stamps per real second, which it
can serve. The proxy judges each key's 1,000 WCU per ENGINE second and holds a transaction's
items for its 10 ms in-flight time in engine seconds; the run paces, heartbeats (every engine
second) and fences on the same clock. So the figures are the protocol's and the ceilings' at
the production rate in engine time; they do not show this machine serving 1,000 real writes/s,
and what runs on its own real clock (botocore's retry backoff) is shorter in engine time by the
scale. Per run, besides the columns above (the WCU columns stay empty: the proxy prices the
writes in its own process), rates per ENGINE second:

  achieved/s        re-stamps per engine second of the run (its real duration x the scale)
  real/s            re-stamps per real second: what this machine served
  arming s          engine seconds from the run's start to its first re-stamp (the lease taken
                    and the fence slots armed: 64 slot writes before the first row moves)
  steady/s          re-stamps per engine second while the run moved from 10 % to 90 % of its rows
  steady/cap        that rate over the cap: the steady-state figure, arming reported apart

and in the JSON only, where the rest of the run's time went: `head_seconds` (from its first
re-stamp to 10 % of its rows) and `tail_seconds` (from 90 % to its last row).

The table's title and the JSON (`time_scale`, `time`) say the scale; --time-scale 1 runs on real
time, as before dilation. The figures measured (a transaction's table items priced twice, the
GSI writes it causes once), and what they depend on, are in docs/demo.md, "How fast". --tiny
runs moto's tiny configurations, --engine --tiny the engine's (ENGINE_TINY, at 0.1); `make bench`
and `make test` run the engine's as bench.fence_engine, which judges the figure.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from moto import mock_aws

from bench.output import emit, num, pct, progress, save
from devkit.capacity.table_schema import TableSchema
from devkit.engine import Engine
from devkit.local_env import local_credentials
from devkit.schema import create_table, load_template
from devkit.seed import bare_saga_row
from devkit.semantics.contended import (
    PRODUCT_FENCE,
    SHARED_STATE_FENCE,
    UNFENCED,
    Contended,
    FenceVariant,
    run_contended,
)
from devkit.semantics.dilation import (
    REAL_TIME,
    TimeScale,
    check_time_scale,
    describe_time_scale,
    time_scale_argument,
)
from devkit.semantics.model import DEFAULT_IN_FLIGHT_SECONDS, DynamoSemantics
from devkit.semantics.moto_harness import cheap_transactions, one_request_at_a_time
from saga_index.index import LEGACY, Layout, keys
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlState,
    ControlStore,
    Transition,
    state_item,
)
from saga_index.store.dynamo import make_client, serialize

NAME = "fence"
# The fences compared, in column order. UNFENCED must stay: every ratio is set beside its.
FENCES: dict[str, FenceVariant] = {
    "unfenced": UNFENCED,
    "shared-state": SHARED_STATE_FENCE,
    # The product's fence (layout_change.backfill.fence): each re-stamp checks its own
    # segment's fence slot.
    "per-segment": PRODUCT_FENCE,
}
SEGMENTS = (16, 64)
CAPS = (100.0, 1000.0)
SECONDS = 3.0
MAX_ROWS = 800
OPERATOR_EVERY = 0.2
# The lease keeper's heartbeat period: the clock fence then allows 4 s without a good one, which
# a request queued behind 64 segments' in moto does not reach.
POLL_SECONDS = 1.0
SHARDS = 16
# The engine mode's defaults: the production figure (1,000 writes/s on 64 segments).
ENGINE_SEGMENTS = (64,)
ENGINE_CAPS = (1000.0,)
ENGINE_FENCES = ("unfenced", "per-segment")
ENGINE_MAX_ROWS = 3000
# The engine's time: engine seconds per real second. A fenced re-stamp costs the proxy three
# requests to dynalite, and this 2-core machine serves about 20 fenced re-stamps per real second
# with 64 segments (docs/demo.md, "How fast"); at 0.01 the cap's 1,000 re-stamps per engine
# second are 10 per real second, half of that, so the cap is reachable with room for the load of
# other jobs (0.02 would need all of it).
ENGINE_TIME_SCALE = 0.01
ENGINE_TINY: dict[str, Any] = {
    "segments": [4],
    "caps": [100.0],
    "seconds": 0.4,
    "max_rows": 40,
    "time_scale": 0.1,
}
# The scale `make test` runs it at (tests/component/test_benches.py): seconds, on moto (the
# engine's tiny run, ENGINE_TINY, is bench.fence_engine's).
TINY: dict[str, Any] = {
    "segments": [2, 4],
    "caps": [25.0],
    "seconds": 1.0,
    "max_rows": 40,
}
# The steady state: while the run moved from this share of its rows to the next.
STEADY_FROM, STEADY_TO = 0.1, 0.9
_tables = itertools.count()


# ---- one run --------------------------------------------------------------------------------


def _seed(client: Any, table: str, rows: int) -> None:
    items = []
    for n in range(rows):
        row = bare_saga_row(f"f{n:05}", f"person-{n % 211}", gsi4pk=keys.LEGACY_GSI4PK)
        items.append({"PutRequest": {"Item": serialize(row)}})
    for start in range(0, len(items), 25):
        client.batch_write_item(RequestItems={table: items[start : start + 25]})


def _plant_migrating(client: Any, table: str) -> None:
    """The record in `migrating` legacy -> sharded(16), effective long ago (as `phase set`
    leaves it, without waiting for effectiveAt)."""
    changed_at = datetime.now(UTC) - timedelta(hours=1)
    change = Transition(
        version=1,
        layout=LEGACY,
        moving_to=Layout.sharded(SHARDS),
        previous_layout=LEGACY,
        previous_moving_to=None,
        changed_at=changed_at,
        changed_by="bench",
        reason="bench.fence",
        effective_at=changed_at + DEFAULT_TIMING.effective_delay,
    )
    client.put_item(TableName=table, Item=serialize(state_item(ControlState(transition=change))))
    ControlStore(client, table).put_history(change)


def run_once(
    template: dict[str, Any], fence: FenceVariant, *, segments: int, cap: float, rows: int
) -> dict[str, Any]:
    with mock_aws():
        client = make_client(region="us-east-1", endpoint_url=None, max_attempts=3)
        table = f"fence-{next(_tables)}"
        create_table(client, table, template)
        _seed(client, table, rows)
        _plant_migrating(client, table)
        semantics = DynamoSemantics(
            table, clock=time.monotonic, in_flight=DEFAULT_IN_FLIGHT_SECONDS
        )
        outcome = run_contended(
            lambda: make_client(region="us-east-1", endpoint_url=None, max_attempts=3),
            table,
            TableSchema.from_template(template, table),
            fence=fence,
            segments=segments,
            rate=cap,
            semantics=semantics,
            operator_every=OPERATOR_EVERY,
            poll_seconds=POLL_SECONDS,
        )
    return _figures(outcome, cap=cap, rows=rows)


class _Pace:
    """When each share of the rows was handled, on the run's clock (engine seconds when the
    engine's time is dilated): the arming time and the steady-state rate."""

    def __init__(self, rows: int, clock: Any = time.monotonic) -> None:
        self.rows = rows
        self.clock = clock
        self.started = clock()
        self.samples: list[tuple[float, int]] = []

    def __call__(self, totals: Any) -> None:
        self.samples.append((self.clock(), totals.handled))

    def figures(self, cap: float) -> dict[str, Any]:
        first = next((t for t, handled in self.samples if handled > 0), None)
        low = next((s for s in self.samples if s[1] >= STEADY_FROM * self.rows), None)
        high = next((s for s in self.samples if s[1] >= STEADY_TO * self.rows), None)
        done = next((t for t, handled in self.samples if handled >= self.rows), None)
        steady = window = None
        if low is not None and high is not None and high[0] > low[0]:
            window = high[0] - low[0]
            steady = (high[1] - low[1]) / window
        return {
            "arming_seconds": None if first is None else first - self.started,
            "steady_per_second": steady,
            "steady_over_cap": None if steady is None else steady / cap,
            "steady_seconds": window,
            # Where a run's time beyond arming and the steady state went: its first tenth of
            # the rows (from the first re-stamp), its last tenth (to the last row handled).
            "head_seconds": None if first is None or low is None else low[0] - first,
            "tail_seconds": None if high is None or done is None else done - high[0],
        }


def run_on_engine(
    engine: Engine,
    template: dict[str, Any],
    fence: FenceVariant,
    *,
    segments: int,
    cap: float,
    rows: int,
) -> dict[str, Any]:
    """One run on the fast engine: a fresh table, seeded, the record planted, no operator; the
    run's clocks and waits on the engine's time (its proxy's time scale)."""
    client = make_client(region="us-east-1", endpoint_url=engine.endpoint_url, max_attempts=3)
    table = f"fence-engine-{next(_tables)}"
    create_table(client, table, template)
    _seed(client, table, rows)
    _plant_migrating(client, table)
    scale = TimeScale(engine.options.time_scale)
    pace = _Pace(rows, scale.monotonic)
    outcome = run_contended(
        lambda: make_client(region="us-east-1", endpoint_url=engine.endpoint_url, max_attempts=3),
        table,
        TableSchema.from_template(template, table),
        fence=fence,
        segments=segments,
        rate=cap,
        semantics=None,
        server_stats=lambda: engine.table_stats(table),
        operator_every=None,
        poll_seconds=POLL_SECONDS,
        on_progress=pace,
        time_scale=scale,
    )
    figures = _figures(outcome, cap=cap, rows=rows, time_scale=scale.scale)
    return {**figures, **pace.figures(cap)}


def _figures(
    outcome: Contended, *, cap: float, rows: int, time_scale: float = REAL_TIME
) -> dict[str, Any]:
    """The run's figures; its rates per engine second (real ones at time scale 1), the real
    rate beside them."""
    restamped = outcome.run.summary.restamped
    real_seconds = max(outcome.seconds, 1e-9)
    seconds = real_seconds * time_scale
    per = max(restamped, 1)
    stats = outcome.stats
    return {
        "rows": rows,
        "restamped": restamped,
        "seconds": round(seconds, 6),
        "real_seconds": round(real_seconds, 3),
        "achieved_per_second": restamped / seconds,
        "achieved_over_cap": restamped / seconds / cap,
        "achieved_per_real_second": restamped / real_seconds,
        "wcu_per_restamp": {k: v / per for k, v in sorted(outcome.restamp_wcu.items())},
        "cancelled_transactions": stats.cancelled_transactions,
        "throttles": dict(stats.throttles),
        "heartbeats": dict(outcome.heartbeats.outcomes),
        "operator_writes": dict(outcome.operator.outcomes),
        "heartbeat_success": _share(outcome.heartbeats.ok, outcome.heartbeats.total),
        "operator_success": _share(outcome.operator.ok, outcome.operator.total),
        "stopped_segments": len(outcome.stopped_segments),
        "lease_lost": outcome.run.lease_lost,
    }


def _share(ok: int, total: int) -> float | None:
    return ok / total if total else None


# ---- the bench ------------------------------------------------------------------------------


def run(
    segments: Sequence[int] = SEGMENTS,
    caps: Sequence[float] = CAPS,
    *,
    seconds: float = SECONDS,
    max_rows: int = MAX_ROWS,
    fences: Sequence[str] | None = None,
    on_engine: bool = False,
    time_scale: float | None = None,
) -> dict[str, Any]:
    """Every fence at every (segments, cap), in-process on moto or on the fast engine; the
    result is JSON-serialisable. `time_scale`: the engine's (default ENGINE_TIME_SCALE; moto
    runs on real time only). bench.fence_engine runs the engine's with a verdict."""
    if time_scale is not None and not on_engine:
        raise ValueError("a time scale is the engine's: on moto the runs take real time")
    scale = check_time_scale(ENGINE_TIME_SCALE if time_scale is None else time_scale)
    template = load_template()
    names = list(fences or (ENGINE_FENCES if on_engine else FENCES))
    if "unfenced" not in names:
        names.insert(0, "unfenced")
    results: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        engine: Engine | None = None
        if on_engine:
            stack.enter_context(local_credentials())
            engine = stack.enter_context(Engine(time_scale=scale))
        else:
            stack.enter_context(one_request_at_a_time())
            stack.enter_context(cheap_transactions())
        for count, cap in itertools.product(segments, caps):
            rows = max(count * 4, min(int(cap * seconds), max_rows))
            baseline: float | None = None
            for name in names:
                progress(f"fence {name}: {count} segments at {cap:g} writes/s, {rows} rows")
                if engine is not None:
                    figures = run_on_engine(
                        engine, template, FENCES[name], segments=count, cap=cap, rows=rows
                    )
                else:
                    figures = run_once(template, FENCES[name], segments=count, cap=cap, rows=rows)
                if name == "unfenced":
                    baseline = figures["achieved_over_cap"]
                figures["vs_unfenced"] = (
                    figures["achieved_over_cap"] / baseline if baseline else None
                )
                results.append({"fence": name, "segments": count, "cap": cap, **figures})
    result: dict[str, Any] = {
        "engine": "fast engine (dynalite behind the semantics proxy)" if on_engine else "moto",
        "comparison": (
            "achieved/cap beside the unfenced run's, measured in the same run"
            + ("" if on_engine else " (in-process moto cannot reach the higher caps here)")
        ),
        "time_scale": scale if on_engine else REAL_TIME,
        "time": describe_time_scale(scale if on_engine else REAL_TIME),
        "in_flight_seconds": DEFAULT_IN_FLIGHT_SECONDS,
        "operator_every_seconds": None if on_engine else OPERATOR_EVERY,
        "heartbeat_every_seconds": POLL_SECONDS,
        "runs": results,
    }
    return result


def render(result: dict[str, Any]) -> None:
    on_engine = any("steady_over_cap" in r for r in result["runs"])
    rows = []
    for r in result["runs"]:
        wcu = r["wcu_per_restamp"]
        row = [
            r["fence"],
            str(r["segments"]),
            num(r["cap"], 0),
            num(r["achieved_per_second"]),
            pct(r["achieved_over_cap"]),
            num(r["vs_unfenced"], 2),
        ]
        if on_engine:
            row += [
                num(r["achieved_per_real_second"]),
                num(r["arming_seconds"], 2),
                num(r["steady_per_second"]),
                pct(r["steady_over_cap"]),
            ]
        row += [
            num(wcu.get("rows", 0.0), 2),
            num(wcu.get("index", 0.0), 2),
            num(wcu.get("control", 0.0), 2),
            num(wcu.get("slots", 0.0), 2),
            str(r["cancelled_transactions"]),
            pct(r["heartbeat_success"]),
            pct(r["operator_success"]),
            str(r["stopped_segments"]),
            "lost" if r["lease_lost"] else "held",
        ]
        rows.append(row)
    columns = ["fence", "segments", "cap", "achieved/s", "achieved/cap", "vs unfenced"]
    if on_engine:
        columns += ["real/s", "arming s", "steady/s", "steady/cap"]
    columns += [
        "WCU rows",
        "WCU index",
        "WCU control",
        "WCU slots",
        "cancelled",
        "heartbeats ok",
        "operator ok",
        "stopped",
        "lease",
    ]
    emit(
        f"Fences under DynamoDB's conflict rules on {result['engine']} ({result['comparison']}; "
        f"{result['time']})",
        tuple(columns),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fence", description=__doc__)
    parser.add_argument("--segments", help=f"default {SEGMENTS}, {ENGINE_SEGMENTS} with --engine")
    parser.add_argument("--caps", help=f"default {CAPS}, {ENGINE_CAPS} with --engine")
    parser.add_argument("--seconds", type=float, default=SECONDS)
    parser.add_argument(
        "--max-rows", type=int, help=f"default {MAX_ROWS}, {ENGINE_MAX_ROWS} with --engine"
    )
    parser.add_argument(
        "--engine",
        action="store_true",
        help="on the fast engine (dynalite behind the semantics proxy) at production rates",
    )
    parser.add_argument(
        "--time-scale",
        type=time_scale_argument,
        help=(
            f"with --engine: engine seconds per real second, in (0, 1] (default "
            f"{ENGINE_TIME_SCALE:g}; {ENGINE_TINY['time_scale']:g} with --tiny)"
        ),
    )
    parser.add_argument("--fences", help=f"comma-separated, of {sorted(FENCES)} (default: all)")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=(
            "2 and 4 segments at 25 writes/s for 1 s, then the engine's tiny run: seconds "
            "(with --engine: the engine's alone, 4 segments at 100 writes/s over 40 rows)"
        ),
    )
    args = parser.parse_args(argv)
    if args.time_scale is not None and not args.engine:
        parser.error("--time-scale is the engine's time: give it with --engine")
    default_segments = ENGINE_SEGMENTS if args.engine else SEGMENTS
    default_caps = ENGINE_CAPS if args.engine else CAPS
    if args.max_rows is None:
        args.max_rows = ENGINE_MAX_ROWS if args.engine else MAX_ROWS
    try:
        segments = [
            int(s) for s in (args.segments or ",".join(map(str, default_segments))).split(",")
        ]
        caps = [
            float(c) for c in (args.caps or ",".join(f"{c:g}" for c in default_caps)).split(",")
        ]
    except ValueError as err:
        parser.error(f"--segments and --caps are comma-separated numbers: {err}")
    fences = [f.strip() for f in args.fences.split(",")] if args.fences else None
    unknown = sorted(set(fences or ()) - set(FENCES))
    if unknown:
        parser.error(f"unknown fence(s) {unknown}; known: {sorted(FENCES)}")
    if any(s < 1 for s in segments) or any(c <= 0 for c in caps) or args.seconds <= 0:
        parser.error("segments, caps and seconds must be positive")
    extra: dict[str, Any] = {"time_scale": args.time_scale} if args.engine else {}
    if args.tiny:
        tiny = ENGINE_TINY if args.engine else TINY
        segments, caps = tiny["segments"], tiny["caps"]
        args.seconds, args.max_rows = tiny["seconds"], tiny["max_rows"]
        if args.engine and args.time_scale is None:
            extra["time_scale"] = tiny["time_scale"]
    result = run(
        segments,
        caps,
        seconds=args.seconds,
        max_rows=args.max_rows,
        fences=fences,
        on_engine=args.engine,
        **extra,
    )
    render(result)
    save(NAME, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
