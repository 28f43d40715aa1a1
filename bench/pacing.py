"""The paced backfill beside the fixed-cap one, against application traffic on the same hot key,
under DynamoDB's per-key ceiling, in one run.

Both runs meet the same model (devkit.semantics.model: the per-key ceilings and the
ThrottlingReasons DynamoDB answers with) on the same virtual clock, at production rates: every
re-stamp moves one row off the legacy GSI key (1 WCU on that key, as DynamoDB bills a GSI key
change's delete) and the traffic writes sagas on it too. The backfill is the product's own
TokenBucket and Pacer; the fixed-cap run is the same bucket with the pace floor at 1 (its rate
never falls below the cap: it only retries, as a run without pacing would). The traffic's load
steps up half-way through.

Measured, side by side:
  budget used    the backfill's writes/s over the budget the traffic leaves on the key (ceiling
                 minus the traffic's rate), in the steady second half of each load
  traffic thr.   the share of the traffic's requests DynamoDB throttled
  settle         after the step, the seconds until the last second in which the traffic was
                 throttled or the backfill wrote past the budget (within the rest of the run)

Virtual time, not moto: the figures are the pacer's decisions at 1,000 WCU/s on one key, which
no in-process server reaches in real time on this machine.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any

from bench.output import emit, num, pct, progress
from devkit.capacity.pricing import Charge
from devkit.semantics.model import DynamoSemantics
from saga_index.layout_change.backfill import PaceRules, TokenBucket, reasons_of

NAME = "pacing"
TABLE = "bench-pacing"
INDEX = "GSI4"
LEGACY_KEY = "RenewalSaga#legacy"
TINY: dict[str, Any] = {"seconds": 40.0, "ceiling": 100.0, "cap": 100.0, "loads": (0.3, 0.6)}


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
    loads: tuple[float, float],
    segments: int = 4,
    tick: float = 0.002,
    shards: int = 16,
) -> dict[str, Any]:
    """One run: the backfill at `cap` beside traffic at loads[0] x ceiling, then loads[1] x
    ceiling from half-way; per-second counts of both."""
    clock = _Clock()
    model = DynamoSemantics(TABLE, clock=clock, wcu_ceiling=ceiling)
    rules = PaceRules() if paced else PaceRules(floor_fraction=1.0)
    bucket = TokenBucket(cap, clock=clock, rules=rules, segments=segments)
    step_at = seconds / 2
    written: Counter[int] = Counter()
    traffic_sent: Counter[int] = Counter()
    traffic_throttled: Counter[int] = Counter()
    backfill_throttled = 0
    owed = 0.0
    row = 0
    for n in range(round(seconds / tick)):
        clock.now = n * tick
        second = math.floor(clock.now)
        owed += (loads[0] if clock.now < step_at else loads[1]) * ceiling * tick
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


def _measure(
    written: Counter[int],
    sent: Counter[int],
    throttled: Counter[int],
    seconds: float,
    ceiling: float,
    loads: tuple[float, float],
    backfill_throttled: int,
) -> dict[str, Any]:
    half = int(seconds / 2)
    phases = []
    for index, (start, end) in enumerate(((0, half), (half, int(seconds)))):
        steady = range(start + (end - start) // 2, end)
        budget = ceiling * (1 - loads[index])
        rate = sum(written[s] for s in steady) / max(1, len(steady))
        phases.append({"budget": budget, "backfill_per_second": rate, "budget_used": rate / budget})
    after_budget = ceiling * (1 - loads[1])
    troubled = [
        s for s in range(half, int(seconds)) if throttled[s] or written[s] > after_budget * 1.02
    ]
    total_sent = sum(sent.values())
    return {
        "phases": phases,
        "traffic_requests": total_sent,
        "traffic_throttled": sum(throttled.values()) / max(1, total_sent),
        "backfill_throttled": backfill_throttled,
        "settle_seconds": (max(troubled) + 1 - half) if troubled else 0,
        "per_second": [written[s] for s in range(int(seconds))],
    }


def run(
    seconds: float = 600.0,
    ceiling: float = 1000.0,
    cap: float = 1000.0,
    loads: tuple[float, float] = (0.3, 0.6),
) -> dict[str, Any]:
    # One warning per decrease would bury the table: the counts below say it.
    logging.getLogger("saga_index.layout_change.backfill.pacing").setLevel(logging.ERROR)
    runs = []
    for paced in (True, False):
        progress(f"pacing: {'paced' if paced else 'fixed-cap'} run, {seconds:g} virtual s")
        runs.append(simulate(paced=paced, seconds=seconds, ceiling=ceiling, cap=cap, loads=loads))
    paced_run, fixed = runs
    return {
        "seconds": seconds,
        "ceiling": ceiling,
        "cap": cap,
        "loads": list(loads),
        "runs": runs,
        "throttled_ratio_fixed_over_paced": fixed["traffic_throttled"]
        / max(paced_run["traffic_throttled"], 1e-9),
        # The pacer's point: the traffic it shares the key with is throttled less.
        "ok": paced_run["traffic_throttled"] < fixed["traffic_throttled"],
    }


def render(result: dict[str, Any]) -> None:
    rows = []
    for r in result["runs"]:
        before, after = r["phases"]
        rows.append(
            [
                "paced" if r["paced"] else "fixed cap",
                pct(before["budget_used"]),
                pct(after["budget_used"]),
                f"{pct(r['traffic_throttled'])} of {r['traffic_requests']:,}",
                str(r["backfill_throttled"]),
                num(r["settle_seconds"], 0, " s"),
                str(r["decreases"]),
            ]
        )
    loads = result["loads"]
    emit(
        f"Backfill pace beside traffic on one key: ceiling {result['ceiling']:g} WCU/s, cap "
        f"{result['cap']:g}/s, traffic {loads[0]:.0%} then {loads[1]:.0%} of the ceiling, "
        f"{result['seconds']:g} virtual s",
        (
            "run",
            "budget used (before step)",
            "budget used (after step)",
            "traffic throttled",
            "backfill throttles",
            "settle after step",
            "pace decreases",
        ),
        rows,
    )
