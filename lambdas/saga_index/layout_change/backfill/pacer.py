"""The backfill's pace, chosen from DynamoDB's throttling signals (pure, the clock injected); the
token bucket (pacing.TokenBucket) of local runs and Step Functions workers meters it.

DynamoDB's ThrottlingReasons name Table|Index, Read|Write and one of four limits, each its answer:

  KeyRangeThroughputExceeded     one partition key is past its ceiling (the hot legacy GSI key,
                                 a sweep or list page sharing it): slow the segment whose
                                 request hit it and those slowed on a key range before (every
                                 re-stamp deletes from the legacy key); a segment not slowed
                                 paces as the slowed ones do; the run's rate stays
  ProvisionedThroughputExceeded  the table's or an index's capacity: slow the whole run
  AccountLimitExceeded           the account's per-table quota or the table's on-demand
  MaxOnDemandThroughputExceeded  maximum: pausing is the only pace that does not take capacity
                                 from the application; paused for `pause_seconds`, resumed at half
                                 the rate, reported (progress, status, PacePausedSeconds metric)
A throttle with no reason (an older server, a cancelled transaction's) slows the run.

A throttle lowers a rate at most once per `decrease_interval` (1 s: DynamoDB meters a key per
second). Throttled while rising (more than `CLIMB` within the last second), the rise overshot:
back to the rate a second ago, at most `approach` (90 %) of the throttled one; throttled at a
steady rate, the load under it changed: halve (Vitess' emergency decrease). The throttled rate is
remembered for `bad_rate_seconds` (30 s): the pace recovers toward `approach` of it, fast far
from it and gentle near it (95 % of the way within `increase_interval`, 24 s), and holds there;
then the memory decays and the pace probes upward on a cubic (botocore's adaptive retry's CUBIC
shape: gentle near the old rate, +50 % within `increase_interval`): a load that fell is used
again within a minute, one that did not costs a second of throttles barely over the old rate.

Bounds: never above the cap (--max-writes-per-second or the record's throttle, the lower; a
slowed segment: its share of the run's rate), never below `floor_fraction` of it but while paused
(a slowed segment: its share of that), even under a remembered bad rate: a run always progresses.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from saga_index.index import InvalidInputError

# The least fraction of the cap the pace falls to (a run always makes progress), by default.
DEFAULT_FLOOR_FRACTION: Final = 1 / 64
# A probe rises by this share of where it started within `increase_interval` (on a cubic).
PROBE_GAIN: Final = 0.5
# A recovery closes all but e**-3 (5 %) of its gap to the hold within `increase_interval`.
RECOVERY_SPEED: Final = 3.0
# A rate this much above the rate a second ago is rising: a throttle then is the rise's.
CLIMB: Final = 0.005


class Scope(StrEnum):
    """What a throttle asks the pace to do."""

    SEGMENT = "key-range"  # slow the segment that hit the key
    RUN = "table-or-index-limit"  # slow the whole run
    PAUSE = "account-or-on-demand-maximum"  # stop writing for a while


_LIMITS: Final[Mapping[str, Scope]] = {
    "KeyRangeThroughputExceeded": Scope.SEGMENT,
    "ProvisionedThroughputExceeded": Scope.RUN,
    "AccountLimitExceeded": Scope.PAUSE,
    "MaxOnDemandThroughputExceeded": Scope.PAUSE,
}
UNKNOWN_REASON: Final = "unknown"


def scope_of(reason: str) -> Scope:
    """The answer a ThrottlingReason's `reason` asks for (an unknown one: slow the run)."""
    for limit, scope in _LIMITS.items():
        if reason.endswith(limit):
            return scope
    return Scope.RUN


def reasons_of(response: Mapping[str, Any] | None) -> list[str]:
    """The `reason` of every ThrottlingReason in a parsed error response. The service model
    spells the list ThrottlingReasons on ProvisionedThroughputExceededException and
    throttlingReasons on ThrottlingException."""
    if not response:
        return []
    listed = response.get("ThrottlingReasons") or response.get("throttlingReasons") or []
    return [str(item.get("reason", UNKNOWN_REASON)) for item in listed if isinstance(item, Mapping)]


@dataclass(frozen=True)
class PaceRules:
    """The timings of the pace and its floor (module docstring: what each one does)."""

    increase_interval: float = 24.0
    decrease_interval: float = 1.0
    bad_rate_seconds: float = 30.0
    approach: float = 0.9
    pause_seconds: float = 60.0
    floor_fraction: float = DEFAULT_FLOOR_FRACTION

    def __post_init__(self) -> None:
        if not 0 < self.floor_fraction <= 1:
            raise InvalidInputError(
                f"pace floor must be a fraction of the cap in (0, 1], got {self.floor_fraction!r}"
            )
        for name in ("increase_interval", "decrease_interval", "bad_rate_seconds"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not 0 < self.approach < 1 or not self.pause_seconds >= 0:
            raise InvalidInputError("approach must be in (0, 1) and pause_seconds >= 0")


@dataclass(frozen=True)
class Pace:
    """The pace chosen, and why: what the progress line, status and the report show."""

    rate: float
    cap: float
    reason: str  # "cap" or the ThrottlingReason (or "unknown") that set the rate
    paused: bool = False
    slowed_segments: dict[int, float] = field(default_factory=dict)

    def describe(self) -> str:
        if self.paused:
            return f"paused ({self.reason})"
        text = f"{self.rate:.3g}/s of {self.cap:.3g}/s ({self.reason})"
        if self.slowed_segments:
            text += f", {len(self.slowed_segments)} segment(s) slowed by key range"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "writesPerSecond": round(self.rate, 3),
            "cap": round(self.cap, 3),
            "reason": self.reason,
            "paused": self.paused,
            "slowedSegments": len(self.slowed_segments),
        }


@dataclass
class _Limit:
    """One adaptive rate (the run's, or one segment's) and its memory: the rate follows a curve
    from `base` (set at `base_at`, a throttle or a pause's end), clamped by its caller."""

    base: float
    base_at: float = -math.inf
    bad_rate: float | None = None
    bad_until: float = -math.inf
    last_decrease: float = -math.inf
    reason: str = "cap"
    rate: float = field(init=False)

    def __post_init__(self) -> None:
        self.rate = self.base

    def curve(self, t: float, rules: PaceRules) -> float:
        """The rate at time `t`, unclamped: under a held memory, closing the gap to `approach`
        of the bad rate (concave); once it decayed, a probe upward from there (convex)."""
        since = max(0.0, t - self.base_at)
        start = self.base
        if self.bad_rate is not None:
            hold = self.bad_rate * rules.approach
            tau = rules.increase_interval / RECOVERY_SPEED
            if t < self.bad_until:
                return hold - max(0.0, hold - self.base) * math.exp(-since / tau)
            held = max(0.0, self.bad_until - self.base_at)
            start = hold - max(0.0, hold - self.base) * math.exp(-held / tau)
            since = max(0.0, t - max(self.bad_until, self.base_at))
        return start * (1 + PROBE_GAIN * (since / rules.increase_interval) ** 3)

    def grow(self, now: float, ceiling: float, floor: float, rules: PaceRules) -> float:
        """The rate now, within [floor, ceiling]; back at the ceiling with no memory holding,
        it follows the ceiling from there (a probe's curve ends)."""
        rate = self.curve(now, rules)
        if rate >= ceiling and now >= self.bad_until:
            self.base, self.base_at, self.bad_rate, self.reason = ceiling, now, None, "cap"
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
        """A throttle at the rate now (`bounds`: floor, ceiling), by the module's rules; a pause
        (`resume`: when the pace starts again) halves whenever. False: not lowered."""
        if resume is None and now - self.last_decrease < rules.decrease_interval:
            return False
        floor, ceiling = bounds
        rate = self.grow(now, ceiling, floor, rules)
        before = max(floor, min(self.curve(now - 1.0, rules), ceiling))
        climbing = resume is None and rate > before * (1 + CLIMB)
        start = now if resume is None else resume
        lowered = max(floor, min(rate * rules.approach, before) if climbing else rate / 2)
        self.bad_rate, self.bad_until = rate, start + rules.bad_rate_seconds
        self.base, self.base_at = lowered, start
        self.last_decrease, self.reason = now, reason
        self.rate = lowered
        return lowered < rate


class Pacer:
    """The one pace of a backfill run (or of one Step Functions worker invocation).

    `observe(reasons, segment)` takes the ThrottlingReasons of one throttled request;
    `run_rate()` and `segment_rate(segment)` are the rates to meter at now; `paused()` says
    whether to write at all. Thread-safe: a local run's segments share one pacer.
    """

    def __init__(
        self,
        cap: float,
        *,
        clock: Callable[[], float],
        rules: PaceRules | None = None,
        segments: int = 1,
    ) -> None:
        _check_rate(cap)
        if segments < 1:
            raise InvalidInputError(f"segments must be >= 1, got {segments!r}")
        self.rules = rules or PaceRules()
        self.cap = float(cap)
        # The segments sharing this pace: a segment slowed by a key range starts from its share.
        self.segments = segments
        self._clock = clock
        self._run = _Limit(self.cap)
        self._segments: dict[int, _Limit] = {}
        self._paused_until = -math.inf
        self._pause_reason = ""
        self._lock = threading.Lock()
        self.decreases = 0
        self.pauses = 0
        self.paused_seconds = 0.0
        self.lowest_rate = self.cap

    @property
    def floor(self) -> float:
        return self.cap * self.rules.floor_fraction

    @property
    def segment_floor(self) -> float:
        """A slowed segment's floor: its share of the run's."""
        return self.floor / self.segments

    def set_cap(self, cap: float) -> None:
        """A new ceiling (the record's throttle): a pace below it stays, one above it drops."""
        _check_rate(cap)
        with self._lock:
            # A run at its cap follows the new one at once; one backing off from throttles keeps
            # its lower rate (at most the new cap) and grows toward the new cap by the rules.
            now, run = self._clock(), self._run
            at_cap = run.grow(now, self.cap, self.floor, self.rules) >= self.cap
            self.cap = float(cap)
            if at_cap and run.bad_rate is None:
                run.base, run.base_at = self.cap, now
            self._advance(now)
            self.lowest_rate = min(self.lowest_rate, run.rate)

    def observe(self, reasons: Iterable[str], segment: int | None = None) -> None:
        """One throttled request's reasons (none listed: an unknown reason)."""
        names = list(reasons) or [UNKNOWN_REASON]
        now = self._clock()
        with self._lock:
            self._advance(now)
            for name in names:
                self._answer(name, scope_of(name), segment, now)
            self.lowest_rate = min(self.lowest_rate, self._run.rate)

    def _answer(self, name: str, scope: Scope, segment: int | None, now: float) -> None:
        run, bounds = self._run, (self.floor, self.cap)
        if scope is Scope.PAUSE:
            resume = now + self.rules.pause_seconds
            if now >= self._paused_until:
                self.pauses += 1
                self.paused_seconds += self.rules.pause_seconds
                run.throttled(now, bounds, name, self.rules, resume=resume)
            else:  # a longer pause: no time at a rate either; the memory holds from its end
                self.paused_seconds += resume - self._paused_until
                run.base_at, run.bad_until = resume, resume + self.rules.bad_rate_seconds
            self._paused_until = resume
            self._pause_reason = name
            return
        if scope is Scope.SEGMENT and segment is not None:
            share = run.rate / self.segments
            limit = self._segments.setdefault(segment, _Limit(share, now))
            bounds = (self.segment_floor, share)
            if limit.throttled(now, bounds, name, self.rules):
                self.decreases += 1
            # The key is full: every other segment slowed on a key range paces on it too (a
            # re-stamp deletes from the legacy key), each by its own rule.
            for other in self._segments.values():
                if other is not limit:
                    other.throttled(now, bounds, name, self.rules)
            return
        if run.throttled(now, bounds, name, self.rules):
            self.decreases += 1

    def _advance(self, now: float) -> None:
        share = self._run.grow(now, self.cap, self.floor, self.rules) / self.segments
        recovered = True
        for limit in self._segments.values():
            limit.grow(now, share, self.segment_floor, self.rules)
            recovered &= now >= limit.bad_until and limit.rate >= share
        if recovered:
            # All back at their shares: the run's rate governs them again, together (one alone
            # would take from the run's bucket what the slowed ones leave).
            self._segments.clear()

    def run_rate(self) -> float:
        with self._lock:
            self._advance(self._clock())
            return self._run.rate

    def segment_rate(self, segment: int) -> float | None:
        """The segment's rate while a key range slows it, the slowed ones' mean while it slows
        others (the key they found full is likely its too); None: the run's rate governs it."""
        with self._lock:
            self._advance(self._clock())
            if not self._segments:
                return None
            limit = self._segments.get(segment)
            if limit is not None:
                return limit.rate
            return sum(lim.rate for lim in self._segments.values()) / len(self._segments)

    def paused(self) -> bool:
        with self._lock:
            return self._clock() < self._paused_until

    def pace(self) -> Pace:
        with self._lock:
            now = self._clock()
            self._advance(now)
            paused = now < self._paused_until
            return Pace(
                rate=0.0 if paused else self._run.rate,
                cap=self.cap,
                reason=self._pause_reason if paused else self._run.reason,
                paused=paused,
                slowed_segments={s: lim.rate for s, lim in self._segments.items()},
            )

    # ---- across invocations (a Step Functions segment's next invocation goes on from here) --

    def snapshot(self) -> dict[str, Any]:
        """The run-wide state, its times as ages (seconds before now: the invocations' clocks
        need not share an origin). The first version's keys keep their meaning (a worker of
        either version goes on from the other's); curveFrom and curveAge: the curve's start."""
        with self._lock:
            now = self._clock()
            self._advance(now)
            run = self._run
            return {
                "rate": run.rate,
                "reason": run.reason,
                "sinceDecrease": _age(now, run.last_decrease),
                "badRate": run.bad_rate,
                "badFor": max(0.0, run.bad_until - now) if run.bad_rate is not None else None,
                "pausedFor": max(0.0, self._paused_until - now),
                "pauseReason": self._pause_reason,
                "curveFrom": run.base,
                "curveAge": now - run.base_at if math.isfinite(run.base_at) else None,
            }

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Go on from `snapshot()`'s state (taken by an earlier invocation), within this cap. A
        snapshot without the curve (the first version's) goes on from its rate, held."""
        with self._lock:
            now = self._clock()
            run = self._run
            rate = min(self.cap, max(self.floor, float(saved["rate"])))
            run.reason = str(saved.get("reason", "cap"))
            run.last_decrease = _when(now, saved.get("sinceDecrease"))
            bad, bad_for = saved.get("badRate"), saved.get("badFor")
            if bad is not None and bad_for is not None:
                run.bad_rate, run.bad_until = float(bad), now + float(bad_for)
            run.base = float(saved.get("curveFrom") or rate)
            run.base_at = _when(now, saved.get("curveAge", 0.0))
            paused_for = float(saved.get("pausedFor") or 0.0)
            self._paused_until = now + paused_for if paused_for > 0 else -math.inf
            self._pause_reason = str(saved.get("pauseReason", ""))
            self._advance(now)
            self.lowest_rate = min(self.lowest_rate, run.rate)


def _check_rate(rate: float) -> None:
    if not rate > 0 or math.isinf(rate):
        raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")


def _age(now: float, then: float) -> float | None:
    return None if math.isinf(then) else max(0.0, now - then)


def _when(now: float, age: object) -> float:
    return -math.inf if age is None else now - float(age)  # type: ignore[arg-type]
