"""The paced backfill beside the fixed-cap one on the fast engine, with the application's writes on
the same key under its per-key ceiling, the traffic's load stepping up and then down.

    python -m bench --only pacing_engine
    python -m bench.pacing_engine [--time-scale S] [--ceiling WCU] [--phase-seconds S] [--tiny]

The engine (devkit.engine: dynalite behind the semantics proxy, which judges every client's
requests by DynamoDB's per-key ceilings and answers a throttle with its ThrottlingReasons) runs
in dilated time (devkit.semantics.dilation). The key is the legacy GSI4 key while a move is
rolled back (`rolling-back`, sharded(16) -> legacy): the application's writers stamp the legacy
key and the backfill re-stamps rows onto it, so every write of either costs that key one WCU (a
saga row is under 1 KB) and both share its ceiling.

Scale: the key's ceiling is CEILING (100 WCU per engine second, a tenth of DynamoDB's 1,000) at
TIME_SCALE 0.4, so the run asks this machine for about 40 writes per real second, traffic and
re-stamps together, which it serves beside the other jobs it runs, though not always evenly
(docs/demo.md); at 1,000 the same phases would take hours of real time. The pacer's
arithmetic is relative to its rates (halving, approaching 90 % of a bad rate, climbing 50 %
within its increase interval), so the figures' shares carry over; its timings are in seconds
of the engine's clock. bench.pacing shows the same pacer at 1,000 WCU/s in virtual time.
Phases of PHASE_SECONDS (120 engine s: the settling target is 60 s, then the steady half is
judged).

The traffic (bench.pace_traffic) is the demo's traffic mix's writes at LOADS of the ceiling in
equal phases (30 %, 60 %, 30 %: a step up, then a step down), each request sent once (but
after a conflict with a re-stamp of its row: bench.pace_traffic).

The backfill is the product's: backfill_locally under its lease and fence, on 4 segments at a
cap of the key's ceiling, its TokenBucket and Pacer on the engine's clock; the fixed-cap run is
the same with the pace floor at 1 (`--pace-floor 1`: it never slows, it only retries, and a row
still throttled after its 8 paced attempts stops its segment, as the product does). Each run is
stopped when the last phase ends or when every segment has stopped (the traffic with it: its
figures are those of the seconds it ran). Both run on one engine, one after the other, each on
a fresh table seeded (on dynalite itself, behind no ceiling) with enough rows for its whole run.

Judged as bench.pacing judges its virtual-time runs (bench.pace_figures): the budget the traffic
leaves is the ceiling minus the traffic's measured rate in each phase; budget used in each
phase's steady second half (>= 80 %), the share of the traffic's requests throttled over the
whole run (< 0.1 %), and after each step the seconds until every later second's re-stamps lie
within 80-102 % of the new budget (<= 60 s); all per ENGINE second. The re-stamps are counted in
the key's own seconds, the proxy's (the windows its ceiling counts writes in: key_seconds), not
as the backfill's progress reports reach this process (a report a fraction of a second late
moves writes into the next second: 31 then 43 against a budget of 40, none of them over the
key's ceiling). The key's last second, which straddles the run's end, is not judged; the
settling the client's count gives is printed beside, for comparison. The result also keeps the
pace per second, the backfill's throttles by ThrottlingReason and the proxy's throttles on the
table. What dilation does not show: this machine serving the rate in real time, or botocore's
retry backoff (real time, so shorter in engine time by the scale).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import threading
from collections.abc import Sequence
from typing import Any

from bench.output import emit, num, pct, progress, save
from bench.pace_figures import TARGETS, comparison_rows, loads_text, measure, verdicts
from bench.pace_traffic import (
    CountingBucket,
    Seconds,
    Traffic,
    client_counted,
    key_seconds,
    left_by_traffic,
    plant_rolling_back,
    seed,
)
from devkit.engine import Engine, ProxyOptions
from devkit.local_env import local_credentials
from devkit.schema import create_table, load_template
from devkit.semantics.dilation import TimeScale, check_time_scale, time_scale_argument
from saga_index.layout_change.backfill import BackfillRequest, backfill_locally
from saga_index.layout_change.record import BackfillDirection, ControlStore
from saga_index.store.dynamo import make_client

NAME = "pacing_engine"
# The traffic's share of the key's write ceiling in each equal phase: a step up, then down.
LOADS: tuple[float, ...] = (0.3, 0.6, 0.3)
CEILING = 100.0
PHASE_SECONDS = 120.0
TIME_SCALE = 0.4
SEGMENTS = 4
TRAFFIC_SAGAS = 400
# The lease keeper's heartbeat period, in engine seconds.
POLL_SECONDS = 1.0
# make test's run (tests/component/test_benches.py): the engine's clock at real speed. At most 20
# writes per second, traffic and re-stamps together, are well within what this machine serves
# beside the other tests, and the run mostly waits on that clock: at time scale 0.5 its two runs
# of 9 engine seconds held a test worker for 49 s with about 12 s of CPU, at 1.0 for 21 s.
TINY: dict[str, Any] = {
    "ceiling": 20.0,
    "phase_seconds": 3.0,
    "time_scale": 1.0,
    "traffic_sagas": 40,
}
_tables = itertools.count()


def _table(
    engine: Engine, client: Any, template: dict[str, Any], rows: int, traffic_sagas: int
) -> tuple[str, list[tuple[str, str]]]:
    """A fresh table, seeded, the record rolling back; its name and the traffic's sagas."""
    table = f"pacing-engine-{next(_tables)}"
    create_table(client, table, template)
    # Seeded on dynalite itself: at the key's ceiling through the proxy, seeding the run's
    # rows would take longer than the run.
    assert engine.server is not None
    upstream = make_client(endpoint_url=engine.server.endpoint_url, max_attempts=3)
    sagas = seed(upstream, table, rows, traffic_sagas)
    plant_rolling_back(client, table)
    progress(f"pacing_engine: seeded {rows + traffic_sagas:,} rows")
    return table, sagas


def run_once(
    engine: Engine,
    template: dict[str, Any],
    *,
    paced: bool,
    ceiling: float,
    phase_seconds: float,
    loads: Sequence[float],
    traffic_sagas: int,
) -> dict[str, Any]:
    """One run on a fresh table: the traffic and the backfill from the same engine instant,
    the backfill stopped when the last phase ends; its figures (bench.pace_figures)."""
    client = make_client(endpoint_url=engine.endpoint_url, max_attempts=3)
    total = phase_seconds * len(loads)
    # The key's ceiling bounds the backfill's re-stamps (each stamps the legacy key): the rows
    # it could move at most, and some to spare.
    rows = math.ceil(ceiling * total * 1.05) + 10 * SEGMENTS
    table, sagas = _table(engine, client, template, rows, traffic_sagas)
    scale = TimeScale(engine.options.time_scale)
    request = BackfillRequest(
        direction=BackfillDirection.ROLLBACK,
        total_segments=SEGMENTS,
        max_writes_per_second=ceiling,
        dry_run=False,
        **({} if paced else {"pace_floor": 1.0}),
    )
    stop = threading.Event()
    bucket = CountingBucket(
        request.max_writes_per_second,
        clock=scale.monotonic,
        sleep=lambda seconds: scale.wait(stop, seconds),
        rules=request.pace_rules(),
        segments=request.total_segments,
    )
    seconds = Seconds(scale.monotonic, scale.monotonic())
    # The engine's clock at the run's second 0: key_seconds places the key's seconds by it.
    engine_origin = engine.clock()
    timer = threading.Thread(target=lambda: stop.set() if not scale.wait(stop, total) else None)
    rates = [load * ceiling for load in loads]
    with Traffic(engine.endpoint_url, table, sagas, seconds, scale, rates, phase_seconds) as t:
        timer.start()
        try:
            outcome = backfill_locally(
                client,
                table,
                request,
                holder=f"bench@pacing-engine/{'paced' if paced else 'fixed'}",
                store=ControlStore(make_client(endpoint_url=engine.endpoint_url), table),
                poll_seconds=POLL_SECONDS,
                stop=stop,
                on_progress=lambda totals: seconds.on_progress(totals, bucket.rate),
                clock=scale.wall,
                monotonic=scale.monotonic,
                wait=scale.wait,
                bucket=bucket,
            )
            # A run whose segments all stopped (the fixed cap's, throttled 8 times on one row)
            # ends here, and its traffic with it: its figures are those of the seconds it ran.
            ran = scale.monotonic() - seconds.origin
        finally:
            stop.set()
            timer.join()
    progress(f"pacing_engine: the run took {ran:,.1f} engine s")
    bounds = [round(phase_seconds * i) for i in range(len(loads) + 1)]
    budgets = left_by_traffic(seconds["sent"], ceiling, bounds)
    stats = engine.table_stats(table)
    figures = measure(
        key_seconds(stats.writes, engine_origin),
        seconds["sent"],
        seconds["throttled"],
        # The key's seconds are offset from the run's by a fraction: its last one straddles
        # the run's end, half written, and is not judged.
        bounds=[*bounds[:-1], bounds[-1] - 1],
        loads=loads,
        budgets=budgets,
        backfill_throttled=bucket.throttled,
    )
    return (
        figures
        | {
            "paced": paced,
            "rows": rows,
            "restamped": outcome.summary.restamped,
            # The run lasted its phases (it ran out of neither rows nor luck).
            "engine_seconds": ran,
            "ran_to_the_end": ran >= total and not outcome.run.failures,
            "failures": dict(outcome.run.failures),
            "lease_lost": outcome.lease_lost,
            "traffic_nominal_per_second": rates,
            "traffic_errors": dict(t.errors),
            "traffic_resent_after_conflict": sum(seconds["conflicts"].values()),
            "decreases": bucket.decreases,
            "lowest_rate": bucket.lowest_rate,
            "backfill_throttle_reasons": dict(bucket.reasons),
            # What the proxy refused on the run's table, by operation and ThrottlingReason.
            "engine_throttles": dict(stats.throttles),
            "pace_per_second": seconds.pace_per_second(round(total)),
        }
        | client_counted(seconds["written"], bounds, budgets)
    )


def run(
    ceiling: float = CEILING,
    phase_seconds: float = PHASE_SECONDS,
    time_scale: float = TIME_SCALE,
    loads: Sequence[float] = LOADS,
    traffic_sagas: int = TRAFFIC_SAGAS,
) -> dict[str, Any]:
    """The paced run and the fixed-cap run on one engine (the key's write ceiling `ceiling`
    per engine second, `time_scale` engine seconds per real second), judged."""
    check_time_scale(time_scale)
    if ceiling <= 0 or phase_seconds < 2 or len(loads) < 2:
        raise ValueError("a positive ceiling, phases of 2 s or more, and at least one step")
    # One warning per decrease would bury the table: the counts below say it.
    # One warning per decrease, and one per throttled request, would bury the table: the
    # counts below say them.
    for name in ("saga_index.layout_change.backfill.pacing", "saga_index.store.dynamo.client"):
        logging.getLogger(name).setLevel(logging.ERROR)
    template = load_template()
    runs = []
    options = ProxyOptions(wcu_ceiling=ceiling, rcu_ceiling=3 * ceiling)
    with local_credentials(), Engine(options=options, time_scale=time_scale) as engine:
        for paced in (True, False):
            progress(
                f"pacing_engine: {'paced' if paced else 'fixed-cap'} run, load "
                f"{loads_text(loads)}, {phase_seconds * len(loads):g} engine s "
                f"({phase_seconds * len(loads) / time_scale:,.0f} real s)"
            )
            measured = run_once(
                engine,
                template,
                paced=paced,
                ceiling=ceiling,
                phase_seconds=phase_seconds,
                loads=loads,
                traffic_sagas=traffic_sagas,
            )
            runs.append(measured | {"verdicts": verdicts(measured)})
        time_text = engine.options.to_json()["time"]
    paced_run = runs[0]
    return {
        "engine": "fast engine (dynalite behind the semantics proxy)",
        "time_scale": time_scale,
        "time": time_text,
        "ceiling": ceiling,
        "cap": ceiling,
        "segments": SEGMENTS,
        "phase_seconds": phase_seconds,
        "loads": list(loads),
        "targets": TARGETS,
        "runs": runs,
        # Every figure of the paced run meets its target, over a run that lasted its phases.
        "ok": paced_run["ran_to_the_end"]
        and all(v is not False for v in paced_run["verdicts"].values()),
    }


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {reason}" for reason, n in sorted(counts.items())) or "-"


def render(result: dict[str, Any]) -> None:
    paced, fixed = result["runs"]
    rows = comparison_rows(loads_text(result["loads"]), paced, fixed)
    rows.append(
        [
            "traffic per engine second by phase (its nominal)",
            "-",
            " / ".join(
                f"{p['traffic_per_second']:,.0f} ({n:,.0f})"
                for p, n in zip(paced["phases"], paced["traffic_nominal_per_second"], strict=True)
            ),
            " / ".join(num(p["traffic_per_second"], 0) for p in fixed["phases"]),
        ]
    )
    rows.append(
        [
            "traffic requests resent after a conflict with a re-stamp of their row",
            "-",
            *(f"{run['traffic_resent_after_conflict']:,}" for run in (paced, fixed)),
        ]
    )
    rows.append(
        [
            "ran to the end (engine s), re-stamped",
            "-",
            f"{'yes' if paced['ran_to_the_end'] else 'NO'} ({paced['engine_seconds']:.0f} s), "
            f"{paced['restamped']:,}",
            f"{'yes' if fixed['ran_to_the_end'] else 'NO'} ({fixed['engine_seconds']:.0f} s), "
            f"{fixed['restamped']:,}",
        ]
    )
    rows.append(
        [
            "settled, re-stamps counted on the client's clock instead",
            "-",
            " / ".join(num(v, 0, " s") for v in paced["client_settle_seconds"]),
            " / ".join(num(v, 0, " s") for v in fixed["client_settle_seconds"]),
        ]
    )
    rows.append(
        [
            "backfill throttles by ThrottlingReason",
            "-",
            _reasons(paced["backfill_throttle_reasons"]),
            _reasons(fixed["backfill_throttle_reasons"]),
        ]
    )
    low, high = result["targets"]["band"]
    emit(
        f"Backfill pace beside the application's writes on one key, on the {result['engine']}: "
        f"ceiling {result['ceiling']:g} WCU per engine s, cap {result['cap']:g}/s on "
        f"{result['segments']} segments, {result['phase_seconds']:g} engine s per load; "
        f"{result['time']}; settled: every later second within {low:.0%}-{high:.0%} of the "
        f"budget; min lowest pace {pct(paced['lowest_rate'] / result['cap'])} of the cap; "
        f"verdict {'ok' if result['ok'] else 'FAILED'}",
        ("figure", "target", "paced", "fixed cap"),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pacing_engine", description=__doc__)
    parser.add_argument("--time-scale", type=time_scale_argument, default=TIME_SCALE)
    parser.add_argument("--ceiling", type=float, default=CEILING, help="WCU per key per s")
    parser.add_argument("--phase-seconds", type=float, default=PHASE_SECONDS)
    parser.add_argument("--tiny", action="store_true", help="TINY: seconds, figures meaningless")
    args = parser.parse_args(argv)
    if not args.ceiling > 0 or not args.phase_seconds >= 2:
        parser.error("--ceiling must be positive and --phase-seconds at least 2")
    kwargs = (
        dict(TINY)
        if args.tiny
        else {
            "ceiling": args.ceiling,
            "phase_seconds": args.phase_seconds,
            "time_scale": args.time_scale,
        }
    )
    result = run(**kwargs)
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
