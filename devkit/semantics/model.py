"""The core model: ongoing transactions and per-key consumption, judged on an injected clock.

Pure: it never sends a request. An adapter asks it, for each request before it runs, whether
DynamoDB would refuse it (`admit_write`, `begin_transaction`, `admit_read`), runs the request
when it may, then tells it what the request consumed (`charge`) and that a transaction finished
(`finish`). The clock is the adapter's: real seconds for threads, virtual ones for the
simulator.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from devkit.capacity.pricing import Charge
from devkit.capacity.units import PARTITION_RCU_CEILING, PARTITION_WCU_CEILING

# A table item as the conflict rules see it: the table's name and its key values as text.
ItemRef = tuple[str, tuple[str, ...]]
ThrottleCode = Literal["ThrottlingException", "ProvisionedThroughputExceededException"]
THROTTLE_CODES: tuple[ThrottleCode, ...] = (
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
)
# DynamoDB's usual latency for a small transaction: how long one holds its items by default.
DEFAULT_IN_FLIGHT_SECONDS = 0.010
CONFLICT = "TransactionConflictException"
CANCELED = "TransactionCanceledException"


@dataclass(frozen=True)
class Refusal:
    """DynamoDB's answer instead of running a request: an error code, its message, and the
    modelled fields of its body (CancellationReasons, ThrottlingReasons), in wire form."""

    code: str
    message: str
    fields: dict[str, Any] = field(default_factory=dict)
    status: int = 400
    # A throttle's (target, partition key): which key of the request was past its ceiling.
    over: tuple[str, str] | None = None


@dataclass
class Transaction:
    """An admitted TransactWriteItems: its items are ongoing until `until` or `finish`."""

    items: tuple[ItemRef, ...]
    started: float
    until: float
    finished: bool = False


@dataclass
class Stats:
    """What the model refused and admitted, for reports and assertions."""

    conflicts: Counter[str] = field(default_factory=Counter)  # operation -> refusals
    cancelled_transactions: int = 0
    throttles: Counter[str] = field(default_factory=Counter)  # ThrottlingReason -> refusals
    transactions: int = 0
    # (operation, whole second of the clock) -> the writes charged in that second, as the
    # per-key ceilings count them (a bench judges a pace per the key's own seconds).
    writes: Counter[tuple[str, int]] = field(default_factory=Counter)


class DynamoSemantics:
    """The documented conflict rules and per-key ceilings of ONE table and its GSIs.

    `clock` returns seconds (any origin); a key's budget is per whole second of it.
    `throttle_code`: ThrottlingException (on-demand, the default) or
    ProvisionedThroughputExceededException. `conflicts` / `ceilings` switch a rule off (a
    comparison run). `region` and `account` only name the ARNs in ThrottlingReasons.
    """

    def __init__(
        self,
        table_name: str,
        *,
        clock: Callable[[], float],
        in_flight: float = DEFAULT_IN_FLIGHT_SECONDS,
        throttle_code: ThrottleCode = "ThrottlingException",
        conflicts: bool = True,
        ceilings: bool = True,
        rcu_ceiling: float = PARTITION_RCU_CEILING,
        wcu_ceiling: float = PARTITION_WCU_CEILING,
        region: str = "us-east-1",
        account: str = "123456789012",
    ) -> None:
        if not in_flight >= 0:
            raise ValueError(f"in_flight must be zero or more seconds, got {in_flight!r}")
        if throttle_code not in THROTTLE_CODES:
            raise ValueError(
                f"throttle_code must be one of {THROTTLE_CODES}, got {throttle_code!r}"
            )
        if not (rcu_ceiling > 0 and wcu_ceiling > 0):
            raise ValueError("the per-key ceilings must be positive")
        self.table_name = table_name
        self.clock = clock
        self.in_flight = in_flight
        self.throttle_code = throttle_code
        self.conflicts_on = conflicts
        self.ceilings_on = ceilings
        self.rcu_ceiling = rcu_ceiling
        self.wcu_ceiling = wcu_ceiling
        self.region = region
        self.account = account
        self.stats = Stats()
        # (target, partition key, "r"|"w", second) -> units consumed in that second.
        self.consumed: dict[tuple[str, str, str, int], float] = {}
        self._ongoing: list[Transaction] = []
        self._lock = threading.Lock()

    # ---- conflicts ------------------------------------------------------------------------

    def _holding(self, now: float) -> set[ItemRef]:
        self._ongoing = [t for t in self._ongoing if not t.finished and t.until > now]
        return {item for t in self._ongoing for item in t.items}

    def admit_write(self, operation: str, item: ItemRef) -> Refusal | None:
        """A PutItem/UpdateItem/DeleteItem of `item`: refused while a transaction holds it."""
        if not self.conflicts_on:
            return None
        with self._lock:
            held = item in self._holding(self.clock())
            if held:
                self.stats.conflicts[operation] += 1
        if not held:
            return None
        return Refusal(
            CONFLICT,
            "Transaction is ongoing for the item",
        )

    def begin_transaction(
        self, actions: Sequence[ItemRef | None], *, operation: str = "TransactWriteItems"
    ) -> Transaction | Refusal:
        """A TransactWriteItems (or TransactGetItems) of `actions` (its items in TransactItems
        order; None: an action on another table, which no rule here covers). Cancelled when
        any of its items is in another ongoing TransactWriteItems; else (a write) its items are
        ongoing from now for `in_flight` seconds."""
        now = self.clock()
        with self._lock:
            held = self._holding(now) if self.conflicts_on else set()
            hits = [item is not None and item in held for item in actions]
            if any(hits):
                self.stats.conflicts[operation] += 1
                self.stats.cancelled_transactions += 1
            elif operation == "TransactWriteItems":
                items = tuple(item for item in actions if item is not None)
                transaction = Transaction(items, now, now + self.in_flight)
                self._ongoing.append(transaction)
                self.stats.transactions += 1
                return transaction
            else:
                return Transaction((), now, now, finished=True)
        reasons = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
            if hit
            else {"Code": "None"}
            for hit in hits
        ]
        codes = ", ".join(reason["Code"] for reason in reasons)
        return Refusal(
            CANCELED,
            f"Transaction cancelled, please refer cancellation reasons for specific reasons "
            f"[{codes}]",
            {"CancellationReasons": reasons},
        )

    def finish(self, transaction: Transaction) -> None:
        """The transaction ran (or failed): its items are free."""
        with self._lock:
            transaction.finished = True

    def ongoing(self) -> int:
        with self._lock:
            return len(self._holding(self.clock()))

    # ---- ceilings -------------------------------------------------------------------------

    def admit(self, charges: Sequence[Charge]) -> Refusal | None:
        """Refuse a request whose estimated `charges` would take one of its keys past its
        ceiling in the current second (a key that consumed nothing yet this second always
        admits one request: a single request larger than the ceiling is not refused forever).
        Admitting charges nothing: `charge` records what the request really consumed."""
        if not self.ceilings_on:
            return None
        second = math.floor(self.clock())
        with self._lock:
            for kind, need in _per_key(charges).items():
                target, key, rw = kind
                used = self.consumed.get((target, key, rw, second), 0.0)
                ceiling = self.rcu_ceiling if rw == "r" else self.wcu_ceiling
                if used > 0 and used + need > ceiling:
                    reason = self._reason(target, rw)
                    self.stats.throttles[reason] += 1
                    return self._throttle(target, key, reason)
        return None

    def charge(self, charges: Sequence[Charge], *, operation: str | None = None) -> None:
        """What a request that ran consumed, in the current second; a write's `operation`
        is counted in that second too (Stats.writes)."""
        second = math.floor(self.clock())
        with self._lock:
            if operation is not None:
                self.stats.writes[(operation, second)] += 1
            for (target, key, rw), units in _per_key(charges).items():
                slot = (target, key, rw, second)
                self.consumed[slot] = self.consumed.get(slot, 0.0) + units

    def used(self, target: str, key: str, rw: Literal["r", "w"], second: int) -> float:
        with self._lock:
            return self.consumed.get((target, key, rw, second), 0.0)

    def _reason(self, target: str, rw: str) -> str:
        resource = "Table" if target == self.table_name else "Index"
        operation = "Read" if rw == "r" else "Write"
        return f"{resource}{operation}KeyRangeThroughputExceeded"

    def arn(self, target: str) -> str:
        table = f"arn:aws:dynamodb:{self.region}:{self.account}:table/{self.table_name}"
        return table if target == self.table_name else f"{table}/index/{target}"

    def _throttle(self, target: str, key: str, reason: str) -> Refusal:
        # The service model spells the list throttlingReasons on ThrottlingException and
        # ThrottlingReasons on ProvisionedThroughputExceededException.
        listed = [{"reason": reason, "resource": self.arn(target)}]
        if self.throttle_code == "ThrottlingException":
            return Refusal(
                "ThrottlingException",
                f"Throughput exceeds the key range limit of {target} for key {key!r}",
                {"throttlingReasons": listed},
                over=(target, key),
            )
        return Refusal(
            "ProvisionedThroughputExceededException",
            f"The level of configured provisioned throughput for the key range of {target} "
            f"(key {key!r}) was exceeded",
            {"ThrottlingReasons": listed},
            over=(target, key),
        )


def _per_key(charges: Sequence[Charge]) -> dict[tuple[str, str, str], float]:
    """Charges summed per (target, partition key, read or write)."""
    out: dict[tuple[str, str, str], float] = {}
    for charge in charges:
        for rw, units in (("r", charge.rcu), ("w", charge.wcu)):
            if units:
                kind = (charge.target, charge.partition_key, rw)
                out[kind] = out.get(kind, 0.0) + units
    return out
