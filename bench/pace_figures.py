"""How a paced backfill beside application traffic on the same key is judged: the figures, their
targets and the table rows, shared by bench.pacing (virtual time, the in-process model) and
bench.pacing_engine (the fast engine, dilated time).

A run is per-second counts: the backfill's writes, the traffic's requests and those of them
DynamoDB throttled, over phases of the traffic's load. Each phase has the budget the traffic
leaves on the key (the key's ceiling minus the traffic's rate). The figures:

  budget used    the backfill's writes/s over the budget, in the steady second half of each
                 phase; the least of the phases >= BUDGET_TARGET
  traffic thr.   the share of the traffic's requests DynamoDB throttled, < THROTTLED_TARGET
  settle         after each step of the load, the seconds until every later second of the phase
                 wrote within BAND of the new budget, <= SETTLE_TARGET (the most of the steps);
                 a phase whose last second is outside the band never settled (a miss)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from bench.output import num, pct

# The figures the paced run must meet (the issue's): of the budget the traffic leaves, at least
# this share used in each load's steady half; under this share of the traffic's requests
# throttled; settled within this many seconds of each step of the load.
BUDGET_TARGET = 0.8
THROTTLED_TARGET = 0.001
SETTLE_TARGET = 60.0
# The pace is settled once every later second's writes lie within this band of the budget.
BAND = (BUDGET_TARGET, 1.02)
TARGETS: dict[str, Any] = {
    "budget_used": BUDGET_TARGET,
    "traffic_throttled": THROTTLED_TARGET,
    "settle_seconds": SETTLE_TARGET,
    "band": list(BAND),
}


def settled_after(written: Counter[int], start: int, end: int, budget: float) -> int:
    """Seconds from `start` until every later second of [start, end) wrote within the band.
    Its top is at least one write over the budget: a second's count is whole, and at a budget
    under 50 writes/s 2 % of it is less than one write."""
    low, high = BAND[0] * budget, max(BAND[1] * budget, math.floor(budget) + 1)
    out = [s for s in range(start, end) if not low <= written[s] <= high]
    return (max(out) + 1 - start) if out else 0


def measure(
    written: Counter[int],
    sent: Counter[int],
    throttled: Counter[int],
    *,
    bounds: Sequence[int],
    loads: Sequence[float],
    budgets: Sequence[float],
    backfill_throttled: int,
) -> dict[str, Any]:
    """The figures of one run: phase i spans seconds [bounds[i], bounds[i + 1]) at loads[i] of
    the ceiling, leaving budgets[i] writes/s to the backfill."""
    phases = []
    for index, (start, end) in enumerate(pairwise(bounds)):
        steady = range(start + (end - start) // 2, end)
        budget = budgets[index]
        rate = sum(written[s] for s in steady) / max(1, len(steady))
        phase: dict[str, Any] = {
            "load": loads[index],
            "budget": budget,
            "backfill_per_second": rate,
            "budget_used": rate / budget if budget > 0 else None,
            "traffic_per_second": sum(sent[s] for s in range(start, end)) / max(1, end - start),
            "traffic_throttled": sum(throttled[s] for s in range(start, end)),
        }
        if index:
            phase["settle_seconds"] = settled_after(written, start, end, budget)
            # Its last second outside the band: not settled within the phase at all (a phase
            # shorter than the target would otherwise pass for settled in time).
            phase["settled"] = phase["settle_seconds"] < end - start
            # The last second the traffic was throttled in this load (a probe's, or the step's).
            hit = [s for s in range(start, end) if throttled[s]]
            phase["last_traffic_throttle"] = (max(hit) + 1 - start) if hit else 0
        phases.append(phase)
    total_sent = sum(sent.values())
    used = [p["budget_used"] for p in phases]
    return {
        "phases": phases,
        "traffic_requests": total_sent,
        "traffic_throttled_requests": sum(throttled.values()),
        "traffic_throttled": sum(throttled.values()) / max(1, total_sent),
        "backfill_throttled": backfill_throttled,
        "budget_used": None if None in used else min(used),
        "settle_seconds": max(p["settle_seconds"] for p in phases[1:]),
        "settled": all(p["settled"] for p in phases[1:]),
        "per_second": [written[s] for s in range(bounds[-1])],
        # The traffic's throttled requests per second: where they fell (the start, a step, a
        # probe) is what a change to the pacer moves.
        "traffic_throttled_per_second": [throttled[s] for s in range(bounds[-1])],
    }


def verdicts(run: dict[str, Any]) -> dict[str, bool]:
    """Each figure of one run against its target."""
    return {
        "budget_used": run["budget_used"] is not None and run["budget_used"] >= BUDGET_TARGET,
        "traffic_throttled": run["traffic_throttled"] < THROTTLED_TARGET,
        "settle_seconds": run.get("settled", True) and run["settle_seconds"] <= SETTLE_TARGET,
    }


def loads_text(loads: Sequence[float]) -> str:
    return " -> ".join(f"{load:.0%}" for load in loads)


def share(value: float) -> str:
    """A share of requests, to the thousandth of a percent (the target is 0.1 %)."""
    return f"{value * 100:.3f} %"


def figure(value: str, verdict: bool) -> str:
    return f"{value} {'ok' if verdict else 'MISSED'}"


def settle_text(phases: Sequence[dict[str, Any]]) -> str:
    """Each step's settling, "never" for a step whose phase ended outside the band."""
    return " / ".join(
        num(p["settle_seconds"], 0, " s") if p.get("settled", True) else "never" for p in phases
    )


def comparison_rows(name: str, paced: dict[str, Any], fixed: dict[str, Any]) -> list[list[str]]:
    """The table's rows of one load profile: each figure, its target, the paced run's with its
    verdict and the fixed-cap run's beside it."""
    verdict = paced["verdicts"]
    budget = [pct(p["budget_used"]) for p in paced["phases"]]
    steps = list(paced["phases"][1:])
    return [
        [
            f"{name}: budget used (least load's)",
            f">= {pct(BUDGET_TARGET)}",
            figure(f"{pct(paced['budget_used'])} ({' / '.join(budget)})", verdict["budget_used"]),
            pct(fixed["budget_used"]),
        ],
        [
            f"{name}: traffic throttled",
            f"< {share(THROTTLED_TARGET)}",
            figure(
                f"{share(paced['traffic_throttled'])} of {paced['traffic_requests']:,}",
                verdict["traffic_throttled"],
            ),
            share(fixed["traffic_throttled"]),
        ],
        [
            f"{name}: pace settled after the step" + ("s" if len(steps) > 1 else ""),
            f"<= {SETTLE_TARGET:g} s",
            figure(settle_text(steps), verdict["settle_seconds"]),
            settle_text(fixed["phases"][1:]),
        ],
        [
            f"{name}: last traffic throttle after the step (a probe's)",
            "-",
            " / ".join(num(p["last_traffic_throttle"], 0, " s") for p in steps),
            " / ".join(num(p["last_traffic_throttle"], 0, " s") for p in fixed["phases"][1:]),
        ],
        [
            f"{name}: backfill throttles, pace decreases",
            "-",
            f"{paced['backfill_throttled']:,}, {paced['decreases']}",
            f"{fixed['backfill_throttled']:,}, {fixed['decreases']}",
        ],
    ]
