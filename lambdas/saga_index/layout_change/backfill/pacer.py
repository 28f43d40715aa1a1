"""The backfill's pace, chosen from DynamoDB's throttling signals (pure, the clock injected); the
token bucket (pacing.TokenBucket) of local runs and Step Functions workers meters it. What each
throttling reason asks of it (slow a segment, slow the run, pause) is throttle_reasons'.

A run starts at `start_fraction` of its cap (a backfill's rules: 30 %, pace_curve.paced_rules)
and rises evenly to the cap within `start_seconds` (10 s), unless a throttle stops the rise: the
cap is the operator's ceiling, not a rate known to be safe on a key the application writes too,
and a run that started at it filled the key's first second and refused the application's
requests for the rest of it (Vitess' max-replication-lag module, too, starts at its
`initial_rate` and increases from there).

A throttle steps a rate back at most once per `decrease_interval` (1 s: DynamoDB meters a key
per second): while rising (more than `CLIMB` within the last second) to the rate a second ago, at
most `approach` (90 %) of the throttled one; at a steady rate to `approach` of it. How far over
the key is shows in what follows: a pace barely over its ceiling meets a refusal or two before
the key's second ends, one far over (the load under it rose) meets refusals for the rest of that
second. So if the key refuses ESCALATE_AFTER more requests within the decrease interval, and at
least ESCALATE_SHARE of a second's writes at the rate stepped back from, the step back escalates
once: to half the rate it stepped back from (Vitess' emergency decrease). A step back from a rise
needs that many more on top of the rise itself (its last second's, in writes): a rise that
crossed the ceiling meets refusals for the rest of that second whatever the load did, but no more
of them than it rose by (a probe finding a load that fell was halved at the top of its climb),
while a load that rose during the rise meets as many as it rose by (a step up of the traffic in
a probe's climb went on for a second more at the stepped-back rate, refusing the application's
requests all through it).
The throttled rate is remembered for `bad_rate_seconds` (30 s): the pace recovers toward
`approach` of it, fast far from it and gentle near it (95 % of the way within
`increase_interval`, 24 s), and holds there; then the memory decays and the pace probes on
botocore's adaptive-retry CUBIC centred on the throttled rate (pace_curve.probe): back up to it,
flat around it, where the key's ceiling is, then faster beyond it (+50 % of it within
`increase_interval`). A load that fell is found about 45 s after the last throttle (the memory,
then the cubic's way back to the old rate); one that did not costs a write or so over the
ceiling in a second, and with it one or two of the application's requests (each refusal is
theirs as often as their share of the key's writes), before a refusal of the run's own tells
the pace.

Bounds: never above the cap (--max-writes-per-second or the record's throttle, the lower; a
slowed segment: its share of the run's rate), never below `floor_fraction` of it but while paused
(a slowed segment: its share of that), even under a remembered bad rate: a run always progresses.

One pacer for a local run's whole life; in Step Functions one per worker invocation, which goes
on from the previous invocation's `snapshot()` of that segment: the run's rate and memory (a
start's rise still under way included), the pause, and the segment's own key-range slowdown
while it lasts (its rate, curve and memory), so a segment that found the key full starts its
next invocation slowed and recovers on the curve it was on. The arithmetic of one rate (its
curve, its state as carried) is pace_curve's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from saga_index.index import InvalidInputError
from saga_index.layout_change.backfill.pace_curve import (
    STARTING,
    LimitState,
    PaceLimit,
    PaceRules,
)
from saga_index.layout_change.backfill.throttle_reasons import (
    UNKNOWN_REASON,
    Scope,
    scope_of,
)

# A step back escalates to halving once the key refuses this many more requests within its
# decrease interval, and at least this share of a second's writes at the rate stepped back from:
# a pace barely over the key's ceiling meets a refusal or two before the second ends, one far
# over (the load under it rose) meets them for the rest of that second.
ESCALATE_AFTER: Final = 2
ESCALATE_SHARE: Final = 0.02


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
        self._run = PaceLimit(self.cap)
        if self.rules.start_fraction < 1:
            # The cap is the operator's ceiling, not a rate known to be safe on a key the
            # application writes too: rise to it, and let the first throttle stop the rise.
            now = clock()
            self._run = PaceLimit(self.cap * self.rules.start_fraction, now, reason=STARTING)
            self._run.ramp_to, self._run.ramp_until = self.cap, now + self.rules.start_seconds
        self._segments: dict[int, PaceLimit] = {}
        self._paused_until = -math.inf
        self._pause_reason = ""
        self._lock = threading.Lock()
        self.decreases = 0
        self.pauses = 0
        self.paused_seconds = 0.0
        # The lowest rate the run wrote at since its start's rise: its own, or its slowed
        # segments' summed (a throttle or a lower cap set it).
        self.lowest_rate = self.cap
        # The last step back (when, from what writing rate) and the refusals since: enough of
        # them within its decrease interval and it escalates to halving.
        self._stepped_at = -math.inf
        self._stepped_rate = 0.0
        self._stepped_rise = 0.0
        self._refused_since_step = 0

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
            self.lowest_rate = min(self.lowest_rate, self._writing_rate())

    def observe(self, reasons: Iterable[str], segment: int | None = None) -> None:
        """One throttled request's reasons (none listed: an unknown reason)."""
        names = list(reasons) or [UNKNOWN_REASON]
        now = self._clock()
        answers = [(name, scope_of(name)) for name in names]
        with self._lock:
            self._advance(now)
            # A pause is answered whenever (it is no step back); any other refusal may be the
            # one that escalates a step back.
            if all(scope is not Scope.PAUSE for _, scope in answers) and self._escalates(now):
                self.decreases += 1
            else:
                writing, decreases = self._writing_rate(), self.decreases
                for name, scope in answers:
                    self._answer(name, scope, segment, now)
                if self.decreases != decreases:
                    self._stepped_at, self._stepped_rate = now, writing
                    self._stepped_rise = writing * self._rise_of_steps(now)
                    self._refused_since_step = 0
            self.lowest_rate = min(self.lowest_rate, self._writing_rate())

    def _escalates(self, now: float) -> bool:
        """One more refusal after a step back: True once they are enough, within its decrease
        interval, to say the key is far over (every limit that stepped back halves)."""
        if now - self._stepped_at >= self.rules.decrease_interval:
            return False
        self._refused_since_step += 1
        interval = self.rules.decrease_interval
        enough = max(ESCALATE_AFTER, ESCALATE_SHARE * self._stepped_rate * interval)
        # A rise over the key's ceiling writes at most its rise over it in a second: refusals
        # up to that many are the rise's, whatever the load under it did.
        enough += self._stepped_rise * interval
        if self._refused_since_step < enough:
            return False
        self._stepped_at = -math.inf
        lowered = self._run.escalate(now, self.floor, self.rules)
        for limit in self._segments.values():
            lowered |= limit.escalate(now, self.segment_floor, self.rules)
        return lowered

    def _rise_of_steps(self, now: float) -> float:
        """The most the limits that stepped back at `now` had risen over the second before (a
        share of their rate; 0: all steady)."""
        limits = [self._run, *self._segments.values()]
        return max((limit.rise for limit in limits if limit.last_decrease == now), default=0.0)

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
            limit = self._segments.get(segment)
            if limit is None:
                # Slowed from the rate it wrote at: while others are slowed, their mean
                # (segment_rate), not the run's share, which may be far above what the key took.
                slowed = [lim.rate for lim in self._segments.values()]
                start = min(share, sum(slowed) / len(slowed)) if slowed else share
                limit = self._segments[segment] = PaceLimit(start, now)
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

    def _writing_rate(self) -> float:
        """The rate the run writes at: the run's, or while a key range slows segments, theirs
        summed (a segment not slowed at the slowed ones' mean), within the run's."""
        if not self._segments:
            return self._run.rate
        rates = [limit.rate for limit in self._segments.values()]
        followers = max(0, self.segments - len(rates)) * sum(rates) / len(rates)
        return min(self._run.rate, sum(rates) + followers)

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

    def snapshot(self, segment: int | None = None) -> LimitState:
        """The pace's state for the next invocation, its times as ages (seconds before now: the
        invocations' clocks need not share an origin): the run's rate and memory under the
        first version's keys (a worker of either version goes on from the other's; curveFrom
        and curveAge: the curve's start), and, while a key range slows `segment` (the one the
        next invocation runs), that segment's own under the same keys prefixed `segment` with
        `slowedSegment` naming it. Every value is a number, a string or null: the worker's
        `pace` (wire.SegmentCounts) accepts nothing else, an older worker's included."""
        with self._lock:
            now = self._clock()
            self._advance(now)
            saved = self._run.saved(now)
            saved["pausedFor"] = max(0.0, self._paused_until - now)
            saved["pauseReason"] = self._pause_reason
            slowed = self._segments.get(segment) if segment is not None else None
            if slowed is not None and segment is not None:
                saved[SLOWED_SEGMENT] = float(segment)  # a JSON number, as the wire holds it
                for name, value in slowed.saved(now).items():
                    saved[_segment_key(name)] = value
            return saved

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Go on from `snapshot()`'s state (taken by an earlier invocation), within this cap. A
        snapshot without the curve (the first version's) goes on from its rate, held; one
        without a slowed segment (an older worker's, or none slowed) starts every segment at
        the run's rate."""
        with self._lock:
            now = self._clock()
            run = self._run
            run.restore(saved, now, min(self.cap, max(self.floor, float(saved["rate"]))))
            paused_for = float(saved.get("pausedFor") or 0.0)
            self._paused_until = now + paused_for if paused_for > 0 else -math.inf
            self._pause_reason = str(saved.get("pauseReason", ""))
            self._advance(now)
            segment = saved.get(SLOWED_SEGMENT)
            if segment is not None and saved.get(_segment_key("rate")) is not None:
                # The slowdown goes on as it was (its own curve and memory), within its share of
                # the run's rate now: the key it found full is likely full still.
                state = {name: saved.get(_segment_key(name)) for name in SEGMENT_STATE_KEYS}
                share = run.rate / self.segments
                rate = min(share, max(self.segment_floor, float(state["rate"] or share)))
                limit = PaceLimit(rate)
                limit.restore(state, now, rate)
                self._segments = {int(float(segment)): limit}
                self._advance(now)
            self.lowest_rate = min(self.lowest_rate, self._writing_rate())


# The snapshot's key naming the segment whose key-range slowdown it carries.
SLOWED_SEGMENT: Final = "slowedSegment"
# A limit's keys (PaceLimit.saved); a slowed segment's are these prefixed `segment`.
SEGMENT_STATE_KEYS: Final = (
    "rate",
    "reason",
    "sinceDecrease",
    "badRate",
    "badFor",
    "curveFrom",
    "curveAge",
)


def _segment_key(name: str) -> str:
    return "segment" + name[0].upper() + name[1:]


def _check_rate(rate: float) -> None:
    if not rate > 0 or math.isinf(rate):
        raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")
