"""The backfill's pace, chosen from DynamoDB's own throttling signals (pure: no AWS call, the
clock injected). The token bucket (pacing.TokenBucket) meters writes at the rate chosen here;
local runs and Step Functions workers both pace through it.

DynamoDB names why it throttled in ThrottlingReasons, `ResourceType + OperationType +
LimitType` (Table|Index, Read|Write, and one of four limits); each limit asks for its own answer:

  KeyRangeThroughputExceeded     one partition key is past its ceiling (the hot legacy GSI key,
                                 a sweep or list page sharing it): slow only the segment whose
                                 request hit it; the other segments' keys are not the problem
  ProvisionedThroughputExceeded  the table's or an index's capacity: slow the whole run
  AccountLimitExceeded           the account's per-table quota or the table's on-demand
  MaxOnDemandThroughputExceeded  maximum: pausing is the only pace that does not take capacity
                                 from the application; paused for `pause_seconds`, then resumed
                                 at half the rate the run had, and the pause is reported
                                 (progress line, status, the PacePausedSeconds metric)

A throttle with no reason (an older server, a cancelled transaction's ThrottlingError) slows
the run, as a table limit would.

The rules are Vitess' throttler's (go/vt/throttler, its defaults): a decrease halves the rate
("emergency decrease") at most once per `decrease_interval` (20 s), so the throttles of one hot
moment count once; an increase doubles it at most once per `increase_interval` (40 s) after the
last change; a rate that was throttled is remembered as bad (the lowest one), increases stop at
`approach` (90 %) of it, and a bad rate that stood `bad_rate_seconds` (180 s) ages: it is raised
by `bad_rate_increase` (10 %), again every 180 s, so higher rates are tried again (the traffic
that made it bad comes and goes) without a jump back to the rate that was throttled.

Bounds: the rate is never above the cap (the operator's --max-writes-per-second or the record's
throttle, whichever is lower) and never below `floor_fraction` of it except while paused (a
slowed segment: never below its share of that floor). The floor wins over a remembered bad rate:
a run always makes progress.
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
    """The timings of the pace (Vitess' throttler's defaults) and its floor."""

    increase_interval: float = 40.0
    decrease_interval: float = 20.0
    bad_rate_seconds: float = 180.0
    bad_rate_increase: float = 0.10
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
        if not 0 < self.approach <= 1 or not self.pause_seconds >= 0:
            raise InvalidInputError("approach must be in (0, 1] and pause_seconds >= 0")
        if not self.bad_rate_increase > 0:
            raise InvalidInputError("bad_rate_increase must be positive")


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
    """One adaptive rate (the run's, or one segment's) with its memory."""

    rate: float
    last_increase: float = -math.inf
    last_decrease: float = -math.inf
    bad_rate: float | None = None
    bad_until: float = -math.inf
    reason: str = "cap"

    def grow(self, now: float, ceiling: float, rules: PaceRules, held: float = -math.inf) -> None:
        """Double toward `ceiling` once the increase interval has passed since the last change
        (or since `held`, the end of a pause: a pause is no time spent at a rate)."""
        self.age_bad_rate(now, ceiling, rules)
        since_change = now - max(self.last_increase, self.last_decrease, held)
        if self.rate >= ceiling or since_change < rules.increase_interval:
            self.rate = min(self.rate, ceiling)
            return
        limit = ceiling
        if self.bad_rate is not None:
            limit = min(limit, self.bad_rate * rules.approach)
        if limit <= self.rate:
            return
        self.rate = min(limit, self.rate * 2)
        self.last_increase = now
        if self.rate >= ceiling:
            self.reason = "cap"

    def age_bad_rate(self, now: float, ceiling: float, rules: PaceRules) -> None:
        """A bad rate that stood `bad_rate_seconds` is raised by `bad_rate_increase` (again
        every `bad_rate_seconds`), so rates above it are tried again; forgotten once the cap
        is below it."""
        while self.bad_rate is not None and now >= self.bad_until:
            self.bad_rate *= 1 + rules.bad_rate_increase
            self.bad_until += rules.bad_rate_seconds
            if self.bad_rate * rules.approach >= ceiling:
                self.bad_rate = None

    def halve(
        self, now: float, floor: float, reason: str, rules: PaceRules, *, force: bool = False
    ) -> bool:
        """Halve (not below `floor`) and remember the rate as bad; at most once per decrease
        interval unless `force` (a pause: the rate it ran at was too much, whenever)."""
        if not force and now - self.last_decrease < rules.decrease_interval:
            return False
        # The rate that was throttled is the one remembered as bad (the lowest one seen).
        if self.bad_rate is None or self.rate < self.bad_rate:
            self.bad_rate = self.rate
        self.bad_until = now + rules.bad_rate_seconds
        self.last_decrease = now
        self.reason = reason
        if self.rate <= floor:
            return False  # at the floor: remembered, not lowered
        self.rate = max(floor, self.rate / 2)
        return True


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
            run = self._run
            at_cap = run.rate >= self.cap
            self.cap = float(cap)
            if at_cap:
                ceiling = self.cap
                if run.bad_rate is not None:
                    ceiling = min(ceiling, run.bad_rate * self.rules.approach)
                run.rate = max(run.rate, ceiling)
            if run.bad_rate is not None:
                # A lower floor lets a rate it had held up fall back under the bad one.
                run.rate = min(run.rate, run.bad_rate * self.rules.approach)
            run.rate = min(max(run.rate, self.floor), self.cap)
            for limit in self._segments.values():
                limit.rate = min(max(limit.rate, self.segment_floor), self.cap)
            self.lowest_rate = min(self.lowest_rate, self._run.rate)

    def observe(self, reasons: Iterable[str], segment: int | None = None) -> None:
        """One throttled request's reasons (none listed: an unknown reason)."""
        names = list(reasons) or [UNKNOWN_REASON]
        now = self._clock()
        with self._lock:
            for name in names:
                self._answer(name, scope_of(name), segment, now)
            self.lowest_rate = min(self.lowest_rate, self._run.rate)

    def _answer(self, name: str, scope: Scope, segment: int | None, now: float) -> None:
        if scope is Scope.PAUSE:
            if now >= self._paused_until:
                self.pauses += 1
                self.paused_seconds += self.rules.pause_seconds
                self._run.halve(now, self.floor, name, self.rules, force=True)
            self._paused_until = now + self.rules.pause_seconds
            self._pause_reason = name
            return
        if scope is Scope.SEGMENT and segment is not None:
            limit = self._segments.get(segment)
            if limit is None:
                share = self._run.rate / self.segments
                limit = self._segments[segment] = _Limit(share)
            if limit.halve(now, self.segment_floor, name, self.rules):
                self.decreases += 1
            return
        if self._run.halve(now, self.floor, name, self.rules):
            self.decreases += 1

    def _advance(self, now: float) -> None:
        self._run.grow(now, self.cap, self.rules, held=self._paused_until)
        for segment, limit in list(self._segments.items()):
            limit.grow(now, self._run.rate, self.rules)
            if limit.bad_rate is None and limit.rate >= self._run.rate / self.segments:
                del self._segments[segment]  # recovered: the run's rate governs it again

    def run_rate(self) -> float:
        with self._lock:
            self._advance(self._clock())
            return self._run.rate

    def segment_rate(self, segment: int) -> float | None:
        """The segment's own lower rate while a key range slows it (None: the run's)."""
        with self._lock:
            self._advance(self._clock())
            limit = self._segments.get(segment)
            return None if limit is None else min(limit.rate, self._run.rate)

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
        """The run-wide state, its times as ages (seconds before now), for the next invocation:
        the two invocations' clocks need not share an origin."""
        with self._lock:
            now = self._clock()
            run = self._run
            return {
                "rate": run.rate,
                "reason": run.reason,
                "sinceIncrease": _age(now, run.last_increase),
                "sinceDecrease": _age(now, run.last_decrease),
                "badRate": run.bad_rate,
                "badFor": max(0.0, run.bad_until - now) if run.bad_rate is not None else None,
                "pausedFor": max(0.0, self._paused_until - now),
                "pauseReason": self._pause_reason,
            }

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Go on from `snapshot()`'s state (taken by an earlier invocation), within this cap."""
        with self._lock:
            now = self._clock()
            run = self._run
            run.rate = min(self.cap, max(self.floor, float(saved["rate"])))
            run.reason = str(saved.get("reason", "cap"))
            run.last_increase = _when(now, saved.get("sinceIncrease"))
            run.last_decrease = _when(now, saved.get("sinceDecrease"))
            bad, bad_for = saved.get("badRate"), saved.get("badFor")
            if bad is not None and bad_for is not None:
                run.bad_rate, run.bad_until = float(bad), now + float(bad_for)
            paused_for = float(saved.get("pausedFor") or 0.0)
            self._paused_until = now + paused_for if paused_for > 0 else -math.inf
            self._pause_reason = str(saved.get("pauseReason", ""))
            self.lowest_rate = min(self.lowest_rate, run.rate)


def _check_rate(rate: float) -> None:
    if not rate > 0 or math.isinf(rate):
        raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")


def _age(now: float, then: float) -> float | None:
    return None if math.isinf(then) else max(0.0, now - then)


def _when(now: float, age: object) -> float:
    return -math.inf if age is None else now - float(age)  # type: ignore[arg-type]
