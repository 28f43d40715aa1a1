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
A plain request's throttle with no reason (an older server's) slows the run.

A fenced re-stamp is a TransactWriteItems (fence.py). DynamoDB cancels one it has no capacity for
("insufficient provisioned capacity": TransactionCanceledException) and lists no ThrottlingReasons,
only a code per item in CancellationReasons, in the order of the items. The pacer reads those codes
(reasons_of names them TransactionItem + the code; the names are the pacer's, not DynamoDB's):

  ThrottlingError                the item's write exceeds the current capacity of its table or
                                 index (an on-demand one: DynamoDB's message says it is scaling,
                                 and to look for a hot key if throttles persist). Taken as a
                                 key-range throttle of the segment that sent it: it is about the
                                 key that item's write hits (a re-stamp's: the legacy GSI key it
                                 deletes from). If the limit is really the table's or the
                                 index's, every segment meets it and each slows by its own, and
                                 the segments not yet slowed pace as the slowed ones do: the run
                                 slows as a whole all the same
  ProvisionedThroughputExceeded  the table's or an index's provisioned capacity: slow the run
A cancelled transaction's throttle under another code names no reason: it slows the run.

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

One pacer for a local run's whole life; in Step Functions one per worker invocation, which goes
on from the previous invocation's `snapshot()` of that segment: the run's rate and memory, the
pause, and the segment's own key-range slowdown while it lasts (its rate, curve and memory), so
a segment that found the key full starts its next invocation slowed and recovers on the curve
it was on. The arithmetic of one rate (its curve, its state as carried) is pace_curve's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from saga_index.index import InvalidInputError
from saga_index.layout_change.backfill.pace_curve import (
    LimitState,
    PaceLimit,
    PaceRules,
)


class Scope(StrEnum):
    """What a throttle asks the pace to do."""

    SEGMENT = "key-range"  # slow the segment that hit the key
    RUN = "table-or-index-limit"  # slow the whole run
    PAUSE = "account-or-on-demand-maximum"  # stop writing for a while


# A cancelled transaction's item codes (CancellationReasons) that mean it was throttled, each
# named by reasons_of TRANSACTION_ITEM + the code (DynamoDB's TransactionCanceledException).
TRANSACTION_ITEM: Final = "TransactionItem"
TRANSACTION_ITEM_THROTTLED: Final = TRANSACTION_ITEM + "ThrottlingError"
TRANSACTION_ITEM_THROTTLE_CODES: Final = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded"}
)

_LIMITS: Final[Mapping[str, Scope]] = {
    "KeyRangeThroughputExceeded": Scope.SEGMENT,
    # A cancelled transaction's item, throttled: the key its write hits (module docstring).
    TRANSACTION_ITEM_THROTTLED: Scope.SEGMENT,
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
    throttlingReasons on ThrottlingException. A cancelled transaction (TransactionCanceledException)
    lists none: each of its items cancelled by a throttle (CancellationReasons' Code ThrottlingError
    or ProvisionedThroughputExceeded) is named TRANSACTION_ITEM + its code."""
    if not response:
        return []
    cancelled = response.get("CancellationReasons")
    if cancelled:
        codes = [str(item.get("Code")) for item in cancelled if isinstance(item, Mapping)]
        throttled = [code for code in codes if code in TRANSACTION_ITEM_THROTTLE_CODES]
        return [TRANSACTION_ITEM + code for code in throttled]
    listed = response.get("ThrottlingReasons") or response.get("throttlingReasons") or []
    return [str(item.get("reason", UNKNOWN_REASON)) for item in listed if isinstance(item, Mapping)]


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
        self._segments: dict[int, PaceLimit] = {}
        self._paused_until = -math.inf
        self._pause_reason = ""
        self._lock = threading.Lock()
        self.decreases = 0
        self.pauses = 0
        self.paused_seconds = 0.0
        # The lowest rate the run wrote at: its own, or its slowed segments' summed.
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
            self.lowest_rate = min(self.lowest_rate, self._writing_rate())

    def observe(self, reasons: Iterable[str], segment: int | None = None) -> None:
        """One throttled request's reasons (none listed: an unknown reason)."""
        names = list(reasons) or [UNKNOWN_REASON]
        now = self._clock()
        with self._lock:
            self._advance(now)
            for name in names:
                self._answer(name, scope_of(name), segment, now)
            self.lowest_rate = min(self.lowest_rate, self._writing_rate())

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
            limit = self._segments.setdefault(segment, PaceLimit(share, now))
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
