"""A key far over its ceiling, as the backfill's pacer hears it: a throttle and, within its
decrease interval, refusals enough that its step back escalates to halving (pacer.py:
ESCALATE_AFTER, ESCALATE_SHARE). Tests of what follows a halving start from it."""

from __future__ import annotations

from collections.abc import Callable


def far_over(throttle: Callable[[], object], decreases: Callable[[], int]) -> None:
    """Call `throttle` (one refused request each) until `decreases` counts a step back and its
    escalation."""
    before = decreases()
    for _ in range(10_000):
        throttle()
        if decreases() >= before + 2:
            return
    raise AssertionError(f"no step back escalated: {decreases() - before} decrease(s)")
