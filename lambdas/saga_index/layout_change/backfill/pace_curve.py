"""One adaptive rate of the backfill's pace (the run's, or one segment's slowed by a key range)
and its timings: the curve it follows from a throttle, and its state as an invocation hands it
to the next one (pacer.Pacer.snapshot). The rules themselves are in pacer's docstring; this is
their arithmetic, pure, on the times the pacer passes in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from saga_index.index import InvalidInputError

# The least fraction of the cap the pace falls to (a run always makes progress), by default.
DEFAULT_FLOOR_FRACTION: Final = 1 / 64
# A probe's cubic: past the rate it probes toward, it rises by this share of that rate within
# `increase_interval`; below it, the same cubic closes the gap (flattening as it gets there).
PROBE_GAIN: Final = 0.5
# A recovery closes all but e**-3 (5 %) of its gap to the hold within `increase_interval`.
RECOVERY_SPEED: Final = 3.0
# A rate this much above the rate a second ago is rising: a throttle then is the rise's.
CLIMB: Final = 0.005
# A paced run's first rate, as a fraction of its cap, and the seconds it takes to reach the cap
# (pacer's docstring: why a run does not start at its cap).
PACED_START_FRACTION: Final = 0.3
PACED_START_SECONDS: Final = 10.0
# The reason a rate still rising from its start gives.
STARTING: Final = "starting"

# A limit's state as a snapshot carries it: name -> a JSON number, string or null, which is all
# a Step Functions worker's `pace` accepts (wire.SegmentCounts.pace).
LimitState = dict[str, float | str | None]


@dataclass(frozen=True)
class PaceRules:
    """The timings of the pace and its floor (pacer's docstring: what each one does)."""

    increase_interval: float = 24.0
    decrease_interval: float = 1.0
    bad_rate_seconds: float = 30.0
    approach: float = 0.9
    pause_seconds: float = 60.0
    floor_fraction: float = DEFAULT_FLOOR_FRACTION
    # The run's first rate as a fraction of the cap (1: it starts at the cap), and the seconds
    # it rises to the cap in, at an even pace, unless a throttle comes first.
    start_fraction: float = 1.0
    start_seconds: float = PACED_START_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.floor_fraction <= 1:
            raise InvalidInputError(
                f"pace floor must be a fraction of the cap in (0, 1], got {self.floor_fraction!r}"
            )
        if not 0 < self.start_fraction <= 1:
            raise InvalidInputError(
                f"pace start must be a fraction of the cap in (0, 1], got {self.start_fraction!r}"
            )
        for name in ("increase_interval", "decrease_interval", "bad_rate_seconds", "start_seconds"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not 0 < self.approach < 1 or not self.pause_seconds >= 0:
            raise InvalidInputError("approach must be in (0, 1) and pause_seconds >= 0")


def paced_rules(
    floor_fraction: float = DEFAULT_FLOOR_FRACTION, *, start_fraction: float = PACED_START_FRACTION
) -> PaceRules:
    """A backfill run's rules: it starts at `start_fraction` of its cap and rises to it (a run
    at a fixed cap, floor 1, starts at it)."""
    start = start_fraction if floor_fraction < 1 else 1.0
    return PaceRules(floor_fraction=floor_fraction, start_fraction=start)


@dataclass
class PaceLimit:
    """One adaptive rate (the run's, or one segment's) and its memory: the rate follows a curve
    from `base` (set at `base_at`, a throttle or a pause's end), clamped by its caller. While
    `ramp_to` is set (a run's start), the curve rises evenly from `base` to it by `ramp_until`,
    then probes upward from there; a throttle ends the ramp."""

    base: float
    base_at: float = -math.inf
    bad_rate: float | None = None
    bad_until: float = -math.inf
    last_decrease: float = -math.inf
    reason: str = "cap"
    ramp_to: float | None = None
    ramp_until: float = -math.inf
    # The rate the last throttle stepped back from, while its decrease interval runs (the
    # pacer halves from it if the key goes on refusing: escalate), and how much of it was the
    # last second's rise (a share of it; 0: steady).
    stepped_from: float | None = None
    rise: float = 0.0
    rate: float = field(init=False)

    def __post_init__(self) -> None:
        self.rate = self.base

    def curve(self, t: float, rules: PaceRules) -> float:
        """The rate at time `t`, unclamped: under a held memory, closing the gap to `approach`
        of the bad rate (concave); once it decayed, a probe (probe())."""
        since = max(0.0, t - self.base_at)
        start = self.base
        if self.ramp_to is not None:
            if t < self.ramp_until:
                return self.base + (self.ramp_to - self.base) * since / (
                    self.ramp_until - self.base_at
                )
            start, since = self.ramp_to, t - self.ramp_until
        elif self.bad_rate is not None:
            hold = self.bad_rate * rules.approach
            tau = rules.increase_interval / RECOVERY_SPEED
            if t < self.bad_until:
                return hold - max(0.0, hold - self.base) * math.exp(-since / tau)
            held = max(0.0, self.bad_until - self.base_at)
            start = hold - max(0.0, hold - self.base) * math.exp(-held / tau)
            since = max(0.0, t - max(self.bad_until, self.base_at))
            return probe(start, self.bad_rate, since, rules.increase_interval)
        return _convex(start, since, rules.increase_interval)

    def grow(self, now: float, ceiling: float, floor: float, rules: PaceRules) -> float:
        """The rate now, within [floor, ceiling]; back at the ceiling with no memory holding,
        it follows the ceiling from there (a probe's curve ends)."""
        rate = self.curve(now, rules)
        if rate >= ceiling and now >= self.bad_until:
            self.base, self.base_at, self.bad_rate, self.reason = ceiling, now, None, "cap"
            self.ramp_to = None
        self.rate = max(floor, min(rate, ceiling))
        return self.rate

    def throttled(
        self,
        now: float,
        bounds: tuple[float, float],
        reason: str,
        rules: PaceRules,
        *,
        resume: float | None = None,
    ) -> bool:
        """A throttle at the rate now (`bounds`: floor, ceiling), by pacer's rules: a step back
        (escalate() halves from where it started); a pause (`resume`: when the pace starts
        again) halves whenever. False: not lowered."""
        if resume is None and now - self.last_decrease < rules.decrease_interval:
            return False
        floor, ceiling = bounds
        rate = self.grow(now, ceiling, floor, rules)
        before = max(floor, min(self.curve(now - 1.0, rules), ceiling))
        climbing = resume is None and rate > before * (1 + CLIMB)
        start = now if resume is None else resume
        self.rise = 1 - before / rate if climbing else 0.0
        if resume is not None:
            lowered, self.stepped_from = rate / 2, None
        else:
            lowered = min(rate * rules.approach, before) if climbing else rate * rules.approach
            self.stepped_from = rate
        lowered = max(floor, lowered)
        # A lower bad rate still remembered stays the one held under (a throttle at the floor of
        # a raised cap is no news that a faster rate is safe).
        held = self.bad_rate is not None and now < self.bad_until
        bad = min(rate, self.bad_rate) if held and self.bad_rate is not None else rate
        self.bad_rate, self.bad_until = bad, start + rules.bad_rate_seconds
        self.base, self.base_at = lowered, start
        self.ramp_to = None
        self.last_decrease, self.reason = now, reason
        self.rate = lowered
        return lowered < rate

    def escalate(self, now: float, floor: float, rules: PaceRules) -> bool:
        """The key went on refusing after this limit's step back (within its decrease
        interval): the load under it rose, so halve from the rate it stepped back from, once
        (Vitess' emergency decrease). False: no step back to escalate."""
        start = self.stepped_from
        self.stepped_from = None
        if start is None or now - self.last_decrease >= rules.decrease_interval:
            return False
        lowered = max(floor, start / 2)
        if lowered >= self.rate:
            return False
        self.base, self.base_at, self.rate = lowered, now, lowered
        return True

    # ---- across invocations: its times as ages (the invocations' clocks need not share an
    # origin), under the names of the snapshot's first version

    def saved(self, now: float) -> LimitState:
        """This limit's state at `now` (grown to it by the caller)."""
        return {
            "rate": self.rate,
            "reason": self.reason,
            "sinceDecrease": _age(now, self.last_decrease),
            "badRate": self.bad_rate,
            "badFor": max(0.0, self.bad_until - now) if self.bad_rate is not None else None,
            "curveFrom": self.base,
            "curveAge": now - self.base_at if math.isfinite(self.base_at) else None,
            # A run's start still rising: to what, for how much longer (none: not rising).
            "rampTo": self.ramp_to,
            "rampFor": max(0.0, self.ramp_until - now) if self.ramp_to is not None else None,
        }

    def restore(self, saved: Mapping[str, Any], now: float, rate: float) -> None:
        """Go on from `saved()`'s state; `rate`: its rate within the caller's bounds. A state
        without the curve (the snapshot's first version) goes on from its rate, held."""
        self.reason = str(saved.get("reason") or "cap")
        self.last_decrease = _when(now, saved.get("sinceDecrease"))
        bad, bad_for = saved.get("badRate"), saved.get("badFor")
        if bad is not None and bad_for is not None:
            self.bad_rate, self.bad_until = float(bad), now + float(bad_for)
        self.base = float(saved.get("curveFrom") or rate)
        self.base_at = _when(now, saved.get("curveAge", 0.0))
        # A state saved mid-rise goes on rising; one saved after it (or before rises were
        # carried) does not start one.
        ramp_to, ramp_for = saved.get("rampTo"), saved.get("rampFor")
        self.ramp_to, self.ramp_until = None, -math.inf
        if ramp_to is not None and ramp_for is not None:
            self.ramp_to, self.ramp_until = float(ramp_to), now + float(ramp_for)
        self.rate = rate


def probe(start: float, bad_rate: float, since: float, interval: float) -> float:
    """The rate `since` seconds into a probe from `start` after a bad rate's memory decayed:
    botocore's CUBIC (adaptive retry's CubicCalculator), centred on the bad rate. Concave from
    `start` back to the bad rate, flat around it, convex beyond (+PROBE_GAIN of it within
    `interval`). The key refused writes at the bad rate, so unless the load under it changed
    its ceiling lies at or just under it: a probe crosses that ceiling where the curve is
    flattest, a write or so over it in a second until a refusal of the run's own tells the pace
    (a steep crossing wrote more over it each second, and refused more of the application's
    requests, before the pace heard); a load that fell is found on the convex side. A `start`
    at or above the bad rate (a curve's hold never is) probes convex from itself."""
    if start >= bad_rate:
        return _convex(start, since, interval)
    # The seconds the cubic takes from `start` back to the bad rate (CUBIC's K).
    flat_at = interval * ((1 - start / bad_rate) / PROBE_GAIN) ** (1 / 3)
    return _convex(bad_rate, since - flat_at, interval)


def _convex(centre: float, since: float, interval: float) -> float:
    """The cubic through `centre` at `since` 0: +PROBE_GAIN of it `interval` later, as far
    under it as long before."""
    return centre * (1 + PROBE_GAIN * (since / interval) ** 3)


def _age(now: float, then: float) -> float | None:
    return None if math.isinf(then) else max(0.0, now - then)


def _when(now: float, age: object) -> float:
    return -math.inf if age is None else now - float(age)  # type: ignore[arg-type]
