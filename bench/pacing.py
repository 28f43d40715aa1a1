"""The paced backfill beside the fixed-cap one, against application traffic on the same hot key,
under DynamoDB's per-key ceiling.

Both runs meet the same model (devkit.semantics.model: the per-key ceilings and the
ThrottlingReasons DynamoDB answers with) on the same virtual clock, at production rates: every
re-stamp moves one row off the legacy GSI key (1 WCU on that key, as DynamoDB bills a GSI key
change's delete) and the traffic writes sagas on it too. The backfill is the product's own
TokenBucket and Pacer under a backfill's rules (pace_curve.paced_rules); the fixed-cap run is
the same bucket with the pace floor at 1 (its rate never falls below the cap: it only retries,
as a run without pacing would). Two runs of each: the traffic's load steps up half-way (30 % of
the ceiling, then 60 %: the issue's) and down (60 %, then 30 %).

Measured, side by side, each beside its target (the paced run's verdict):
  budget used    the backfill's writes/s over the budget the traffic leaves on the key (ceiling
                 minus the traffic's rate), in the steady second half of each load; the least
                 of the two loads >= 80 %
  traffic thr.   the share of the traffic's requests DynamoDB throttled, < 0.1 % (the run's
                 start included: it rises from 30 % of its cap, pacer.py)
  settle         after the step, the seconds until every later second's writes lie within
                 80-102 % of the new budget, <= 60 s; beside it, informative, the last second
                 the traffic was throttled (a probe past a decayed memory costs one, at a rate
                 barely over the budget)

The simulation steps 10 ms at a time (the bucket banks 50 ms, so no token is lost to a step).
Virtual time, not moto: the figures are the pacer's decisions at 1,000 WCU/s on one key, which
no in-process server reaches in real time on this machine.
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.output import emit, pct, progress, save
from bench.pace_figures import (
    TARGETS,
    comparison_rows,
    loads_text,
    measure,
    share,
    verdicts,
)
from devkit.capacity.pricing import Charge
from devkit.semantics.model import DynamoSemantics
from saga_index.layout_change.backfill import TokenBucket, paced_rules, reasons_of

NAME = "pacing"
TABLE = "bench-pacing"
INDEX = "GSI4"
LEGACY_KEY = "RenewalSaga#legacy"
# The step (30 % of the ceiling, then 60 %), and the step down.
STEPS: tuple[tuple[float, float], ...] = ((0.3, 0.6), (0.6, 0.3))
TINY: dict[str, Any] = {"seconds": 20.0, "ceiling": 100.0, "cap": 100.0}


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(
    *,
    paced: bool,
    seconds: float,
    ceiling: float,
    cap: float,
    loads: tuple[float, ...],
    segments: int = 4,
    tick: float = 0.002,
    shards: int = 16,
    offset: float = 0.0,
) -> dict[str, Any]:
    """One run: the backfill at `cap` beside traffic at loads[i] x ceiling in the i-th of
    len(loads) equal phases; per-second counts of both. `offset` in [0, 1): where in its
    period the traffic's first request falls, and how late (in seconds) its steps come."""
    clock = _Clock()
    model = DynamoSemantics(TABLE, clock=clock, wcu_ceiling=ceiling)
    rules = paced_rules() if paced else paced_rules(1.0)
    bucket = TokenBucket(cap, clock=clock, rules=rules, segments=segments)
    phase = seconds / len(loads)
    written: Counter[int] = Counter()
    traffic_sent: Counter[int] = Counter()
    traffic_throttled: Counter[int] = Counter()
    backfill_throttled = 0
    owed = offset
    row = 0
    for n in range(round(seconds / tick)):
        clock.now = n * tick
        second = math.floor(clock.now)
        load = loads[min(len(loads) - 1, max(0, int((clock.now - offset) // phase)))]
        owed += load * ceiling * tick
        while owed >= 1.0:
            owed -= 1.0
            traffic_sent[second] += 1
            charges = [Charge(INDEX, LEGACY_KEY, wcu=1.0), Charge(TABLE, f"t{n}", wcu=1.0)]
            if model.admit(charges) is None:
                model.charge(charges)
            else:
                traffic_throttled[second] += 1
        for segment in range(segments):
            while bucket.try_acquire(segment):
                row += 1
                charges = [
                    Charge(INDEX, LEGACY_KEY, wcu=1.0),
                    Charge(INDEX, f"RenewalSaga#{row % shards}", wcu=1.0),
                    Charge(TABLE, f"r{row}", wcu=1.0),
                ]
                refusal = model.admit(charges)
                if refusal is None:
                    model.charge(charges)
                    written[second] += 1
                else:
                    backfill_throttled += 1
                    bucket.on_throttle(reasons_of(refusal.fields), segment=segment)
    return _measure(
        written, traffic_sent, traffic_throttled, seconds, ceiling, loads, backfill_throttled
    ) | {"paced": paced, "lowest_rate": bucket.lowest_rate, "decreases": bucket.decreases}


def _quiet() -> None:
    # One warning per decrease would bury the table: the counts below say it.
    logging.getLogger("saga_index.layout_change.backfill.pacing").setLevel(logging.ERROR)


def _measure(
    written: Counter[int],
    sent: Counter[int],
    throttled: Counter[int],
    seconds: float,
    ceiling: float,
    loads: tuple[float, ...],
    backfill_throttled: int,
) -> dict[str, Any]:
    """The figures (bench.pace_figures), each load's budget what its traffic leaves of the
    ceiling."""
    return measure(
        written,
        sent,
        throttled,
        bounds=[round(seconds * i / len(loads)) for i in range(len(loads) + 1)],
        loads=loads,
        budgets=[ceiling * (1 - load) for load in loads],
        backfill_throttled=backfill_throttled,
    )


def run(
    seconds: float = 600.0,
    ceiling: float = 1000.0,
    cap: float = 1000.0,
    steps: tuple[tuple[float, float], ...] = STEPS,
    tick: float = 0.01,
) -> dict[str, Any]:
    """Each step of the traffic's load, paced and at the fixed cap, each paced run held to all
    three figures."""
    _quiet()
    scenarios: list[dict[str, Any]] = []
    for loads in steps:
        runs: list[dict[str, Any]] = []
        for paced in (True, False):
            label = f"{'paced' if paced else 'fixed-cap'} run, load {loads_text(loads)}"
            progress(f"pacing: {label}, {seconds:g} virtual s")
            measured = simulate(
                paced=paced, seconds=seconds, ceiling=ceiling, cap=cap, loads=loads, tick=tick
            )
            runs.append(measured | {"verdicts": verdicts(measured)})
        scenarios.append({"loads": list(loads), "runs": runs})
    return {
        "seconds": seconds,
        "ceiling": ceiling,
        "cap": cap,
        "tick": tick,
        "targets": TARGETS,
        "scenarios": scenarios,
        # Every figure each paced run is held to meets its target.
        "ok": all(
            verdict is not False
            for scenario in scenarios
            for verdict in scenario["runs"][0]["verdicts"].values()
        ),
    }


def render(result: dict[str, Any]) -> None:
    targets = result["targets"]
    rows = []
    for scenario in result["scenarios"]:
        paced_run, fixed = scenario["runs"]
        rows += comparison_rows(loads_text(scenario["loads"]), paced_run, fixed)
    low, high = targets["band"]
    emit(
        f"Backfill pace beside traffic on one key: ceiling {result['ceiling']:g} WCU/s, cap "
        f"{result['cap']:g}/s, {result['seconds']:g} virtual s per run, the load stepping "
        f"half-way; settled: every later second within {low:.0%}-{high:.0%} of the budget; "
        f"verdict {'ok' if result['ok'] else 'FAILED'}",
        ("figure", "target", "paced", "fixed cap"),
        rows,
    )


# The engine bench's shape in virtual time (bench.pacing_engine: 100 WCU, 30 % -> 60 % -> 30 %,
# 120 s a load), the paced side alone over several offsets of the traffic's arrivals: the same
# pacer decisions in seconds where the engine takes 24 minutes, for whoever tunes the pacer.
# Its figures are not the engine's: no network, no dilation, no client-side attribution of
# writes to seconds (docs/demo.md has both).
ENGINE_SHAPE: dict[str, Any] = {
    "seconds": 360.0,
    "ceiling": 100.0,
    "cap": 100.0,
    "loads": (0.3, 0.6, 0.3),
    "tick": 0.005,
}


def engine_shape(offsets: int = 8, **shape: Any) -> dict[str, Any]:
    """The paced run at ENGINE_SHAPE (or `shape`) once per offset; each figure's runs, median
    and range, and how many runs met each target."""
    params = ENGINE_SHAPE | shape
    _quiet()
    runs = []
    for k in range(offsets):
        progress(f"pacing: engine shape, offset {k + 1} of {offsets}")
        measured = simulate(paced=True, offset=k / offsets, **params)
        runs.append(measured | {"verdicts": verdicts(measured)})
    figures = {
        "traffic_throttled_requests": [r["traffic_throttled_requests"] for r in runs],
        "traffic_throttled": [r["traffic_throttled"] for r in runs],
        "budget_used": [r["budget_used"] for r in runs],
        "settle_seconds": [r["settle_seconds"] if r["settled"] else None for r in runs],
    }
    met = {name: sum(bool(r["verdicts"][name]) for r in runs) for name in runs[0]["verdicts"]}
    return {
        "shape": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
        "offsets": offsets,
        "figures": figures,
        "met": met,
        "traffic_throttled_per_second": [r["traffic_throttled_per_second"] for r in runs],
    }


def render_engine_shape(result: dict[str, Any]) -> None:
    figures, met, n = result["figures"], result["met"], result["offsets"]

    def spread(values: list[Any], text: Any) -> str:
        known = [v for v in values if v is not None]
        never = len(values) - len(known)
        body = (
            f"median {text(statistics.median(known))}, {text(min(known))}-{text(max(known))}"
            if known
            else "-"
        )
        return body + (f", never {never}x" if never else "")

    rows = [
        [
            "traffic throttled (requests)",
            spread(figures["traffic_throttled_requests"], lambda v: f"{v:g}"),
            f"{met['traffic_throttled']}/{n}",
        ],
        ["traffic throttled", spread(figures["traffic_throttled"], share), "-"],
        ["budget used", spread(figures["budget_used"], pct), f"{met['budget_used']}/{n}"],
        [
            "settled after the steps (s)",
            spread(figures["settle_seconds"], lambda v: f"{v:g}"),
            f"{met['settle_seconds']}/{n}",
        ],
    ]
    shape = result["shape"]
    emit(
        f"The paced run at the engine bench's shape in virtual time: ceiling "
        f"{shape['ceiling']:g} WCU/s, load {loads_text(shape['loads'])}, "
        f"{shape['seconds']:g} s, {n} offsets of the traffic's arrivals",
        ("figure", "over the offsets", "met its target"),
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pacing", description=__doc__)
    parser.add_argument(
        "--engine-shape",
        action="store_true",
        help="the paced run alone at bench.pacing_engine's shape, in virtual time, over "
        "--offsets offsets of the traffic's arrivals (about 10 s of CPU each): a quick loop "
        "for tuning the pacer, not the engine's figures",
    )
    parser.add_argument("--offsets", type=int, default=8, help="with --engine-shape")
    args = parser.parse_args(argv)
    if args.offsets < 1:
        parser.error("--offsets must be at least 1")
    if args.engine_shape:
        shaped = engine_shape(args.offsets)
        render_engine_shape(shaped)
        save(f"{NAME}_engine_shape", shaped)
        return 0
    result = run()
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
