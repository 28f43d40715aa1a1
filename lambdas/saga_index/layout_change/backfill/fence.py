"""The lease fence: no re-stamp lands once the run's lease is lost (docs/control-contract.md,
"The backfill lease", "The fence").

A lease checked by time alone cannot stop a worker that was paused (SIGSTOP, a suspended laptop,
a long GC) between its check and its write: it resumes with its decision intact. Two fences,
both used wherever they can be:

  transactional  every re-stamp of segment i is a TransactWriteItems of two actions: a
                 ConditionCheck on fence slot i (its `epoch` = the run's lease epoch AND its
                 `leaseToken` = the run's token; backfill.slots armed it before the run's first
                 write) and the row's own conditional Update. DynamoDB judges it at write time,
                 so once a newer run armed the slots, a worker of an older one writes nothing,
                 however long it was paused. No item is shared by two segments: re-stamps never
                 conflict with each other, with the heartbeats, `phase set` or the operator's
                 controls (those write only STATE).
  clock          before every write: the last successful heartbeat, dated when its request was
                 SENT, is younger than `max_heartbeat_age` by the wall clock AND by the
                 monotonic clock (a suspended laptop stops the monotonic clock; a stepped wall
                 clock fools the other), and the keeper has not said stop. This narrows the
                 window, it does not close it: a pause between this check and the request
                 reaching DynamoDB can still write one row per segment after the lease is gone.
                 The drift guard pages for such a row and `saga-index backfill --direction
                 rollback` (in `legacy`) or a forward run (in `sharded`) moves it home.

The clock fence always runs. The transactional one runs unless the server answers
UnknownOperationException (dynalite: the demo and the conformance suite): that is detected once
per run, logged as a warning naming the server and the window that remains, and the run goes on
with the clock fence only.

Cost (AWS documentation): an item in a transaction is charged twice, so a re-stamp of a row up
to 1 KB costs 2 WCU instead of 1, and the slot's ConditionCheck 2 WCU on the SLOT's partition;
the control partition pays nothing per re-stamp. One segment re-stamps at most
SLOT_PARTITION_CAP times a second (its slot's partition). A TransactionConflict on a slot comes
only from an arming racing the segment: retried CONFLICT_RETRIES times, then the slot is read,
and the segment stops as LEASE_LOST when a newer epoch holds it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import SagaIndexError
from saga_index.layout_change.backfill.pacing import SegmentThrottledError
from saga_index.layout_change.backfill.slots import (
    SLOT_PARTITION_CAP,
    SLOT_STILL_OURS,
    describe_slot,
    read_slot,
)
from saga_index.layout_change.backfill.throttle_reasons import TRANSACTION_ITEM_THROTTLE_CODES
from saga_index.layout_change.lease import LeaseLostError
from saga_index.layout_change.record import (
    FENCE_EPOCH,
    LEASE_TOKEN,
    ControlStore,
    WallClock,
    fence_slot_key,
    utc_now,
)
from saga_index.store.dynamo import THROTTLE_CODES, error_code, request_expressions, serialize

log = logging.getLogger(__name__)

# An arming racing a segment's re-stamp on its slot cancels the re-stamp: retried this often.
CONFLICT_RETRIES: Final = 5
CONFLICT_BACKOFF_SECONDS: Final = 0.02
# The cancellation reasons of a transaction that was throttled, not refused: DynamoDB's item codes
# (ThrottlingError on demand, ProvisionedThroughputExceeded provisioned), and the request-level
# codes as a server might repeat them per item. The pacer reads the first two (pacer.reasons_of):
# a ThrottlingError slows the segment that sent it, ProvisionedThroughputExceeded the run.
TRANSACTION_THROTTLE_REASONS: Final = frozenset({*TRANSACTION_ITEM_THROTTLE_CODES, *THROTTLE_CODES})


class FenceMode(StrEnum):
    TRANSACTIONAL = "transactional"
    CLOCK = "clock"


class RowWrite(StrEnum):
    """What became of one fenced re-stamp."""

    WRITTEN = "written"
    ROW_CHANGED = "row-changed"  # the row's own condition failed: moved by someone else, skip
    LEASE_LOST = "lease-lost"  # the fence refused: nothing written, the run must stop


def cancellation_codes(err: ClientError) -> list[str]:
    """The per-action codes of a TransactionCanceledException, in TransactItems order."""
    reasons = err.response.get("CancellationReasons") or []
    return [str(reason.get("Code", "None")) for reason in reasons]


def is_transaction_throttle(err: BaseException) -> bool:
    if not isinstance(err, ClientError) or error_code(err) != "TransactionCanceledException":
        return False
    return any(code in TRANSACTION_THROTTLE_REASONS for code in cancellation_codes(err))


class FenceCheck(ABC):
    """What a fenced re-stamp proves the lease by: the ConditionCheck action of its
    transaction. A strategy the fence takes, as Powertools' idempotency takes its persistence
    layer (a base class with declared primitives): the product's is SlotCheck; a harness passes
    another one in (devkit.semantics.contended's known-bad shared-state check) by parameter."""

    @abstractmethod
    def condition_check(self, fence: LeaseFence, slot: int) -> dict[str, Any]:
        """The ConditionCheck (TableName, Key, expressions) that refuses segment `slot`'s
        re-stamp once `fence`'s run no longer holds the lease."""


class SlotCheck(FenceCheck):
    """The segment's own fence slot still carries the run's lease epoch and token (armed by
    backfill.slots when the run took the lease): no item is shared by two segments."""

    def condition_check(self, fence: LeaseFence, slot: int) -> dict[str, Any]:
        ours = SLOT_STILL_OURS.given(
            {":fenceEpoch": {"N": str(fence.epoch)}, ":fenceToken": {"S": fence.token}}
        )
        return {
            "TableName": fence.table_name,
            "Key": serialize(fence_slot_key(slot)),
            **request_expressions(condition=ours),
        }


SLOT_CHECK: Final = SlotCheck()


class LeaseFence:
    """The fence of one run (or one Lambda invocation) under its lease.

    The lease keeper calls `mark_heartbeat` after every successful heartbeat (with the clock
    readings taken when that heartbeat was sent) and `lose` when the lease is gone; segment i's
    re-stamper calls `write(update, slot=i)` for every re-stamp. Thread-safe: a local run's
    segments share one fence, each through its own slot.
    """

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        token: str,
        state_version: int,
        max_heartbeat_age: float,
        epoch: int | None = None,
        transactional: bool = True,
        clock: WallClock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        on_lost: Callable[[LeaseLostError], None] | None = None,
        check: FenceCheck = SLOT_CHECK,
    ) -> None:
        if not max_heartbeat_age > 0:
            raise ValueError(f"max_heartbeat_age must be positive, got {max_heartbeat_age!r}")
        if transactional and epoch is None:
            raise ValueError("a transactional fence checks its slots for the lease's epoch")
        self.client = client
        self.table_name = table_name
        self.token = token
        self.epoch = epoch
        self.state_version = state_version
        self.max_heartbeat_age = max_heartbeat_age
        self.mode = FenceMode.TRANSACTIONAL if transactional else FenceMode.CLOCK
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.on_lost = on_lost
        self.check = check
        self.lost: LeaseLostError | None = None
        self.conflicts = 0  # TransactionConflict cancellations retried (the run's report)
        self._lock = threading.Lock()
        self._wall_mark: datetime | None = None
        self._mono_mark = -math.inf
        # Per slot: the monotonic time before which its next re-stamp waits (the slot's
        # partition takes SLOT_PARTITION_CAP re-stamps a second).
        self._slot_next: dict[int, float] = {}

    # ---- what the keeper tells it ------------------------------------------------------

    def mark_heartbeat(self, wall: datetime | None = None, mono: float | None = None) -> None:
        """A heartbeat proved the lease: `wall` and `mono` are the clocks' readings when its
        request was SENT (now when not given), so a pause after the heartbeat, or an answer
        that arrives late, never makes the proof younger than it is."""
        with self._lock:
            self._wall_mark = wall if wall is not None else self.clock()
            self._mono_mark = mono if mono is not None else self.monotonic()

    def lose(self, err: LeaseLostError) -> None:
        """The lease is gone: every later `write` refuses."""
        first = False
        with self._lock:
            if self.lost is None:
                self.lost = err
                first = True
        if first and self.on_lost is not None:
            self.on_lost(err)

    # ---- the clock fence ---------------------------------------------------------------

    def heartbeat_age(self) -> float:
        """Seconds since the last good heartbeat was sent, the larger of the wall-clock and the
        monotonic measure (inf before the first; a wall clock that stepped back counts as
        stale)."""
        with self._lock:
            wall_mark, mono_mark = self._wall_mark, self._mono_mark
        if wall_mark is None:
            return math.inf
        wall_age = (self.clock() - wall_mark).total_seconds()
        if wall_age < -1.0:
            return math.inf
        return max(wall_age, self.monotonic() - mono_mark)

    def check_clock(self) -> bool:
        """The clock fence, right before a write: False (and the lease lost) when the last good
        heartbeat is too old by either clock, or the keeper said stop."""
        if self.lost is not None:
            return False
        age = self.heartbeat_age()
        if age < self.max_heartbeat_age:
            return True
        self.lose(
            LeaseLostError(
                f"no heartbeat proved the backfill lease for {age:.1f} s (the fence allows "
                f"{self.max_heartbeat_age:.1f} s): this worker was paused or cut off, and the "
                "lease may be gone; stopped before writing"
            )
        )
        return False

    # ---- the write ---------------------------------------------------------------------

    def write(self, update: Mapping[str, Any], *, slot: int = 0) -> RowWrite:
        """One re-stamp of segment `slot`: `update` is the row's UpdateItem request
        (TableName, Key, expressions). Raises the ClientError of a failure that is neither a
        condition nor a conflict."""
        if not self.check_clock():
            return RowWrite.LEASE_LOST
        if self.mode is FenceMode.TRANSACTIONAL:
            return self._transact(update, slot)
        try:
            self.client.update_item(**update)
        except ClientError as err:
            if error_code(err) == "ConditionalCheckFailedException":
                return RowWrite.ROW_CHANGED
            raise
        return RowWrite.WRITTEN

    def _transact(self, update: Mapping[str, Any], slot: int) -> RowWrite:
        request = self._transaction(update, slot)
        for attempt in range(CONFLICT_RETRIES + 1):
            self._pace(slot)
            # botocore's own retries of a lost answer resend this very request: one
            # transaction, not a second one that fails its row condition and counts the row
            # as skipped. A conflict retry is a new transaction: a new token.
            request["ClientRequestToken"] = _request_token(self.token, update, attempt)
            try:
                self.client.transact_write_items(**request)
                return RowWrite.WRITTEN
            except ClientError as err:
                code = error_code(err)
                if code == "UnknownOperationException":
                    self._fall_back_to_clock(err)
                    return self.write(update, slot=slot)
                if code != "TransactionCanceledException":
                    raise
                reasons = cancellation_codes(err)
                fence_reason, row_reason = [*reasons, "None", "None"][:2]
                if fence_reason == "ConditionalCheckFailed":
                    self.lose(LeaseLostError(self._why_refused(slot)))
                    return RowWrite.LEASE_LOST
                if row_reason == "ConditionalCheckFailed":
                    return RowWrite.ROW_CHANGED
                if "TransactionConflict" in reasons and attempt < CONFLICT_RETRIES:
                    # Only an arming writes a slot besides its segment: try again.
                    self.conflicts += 1
                    self.sleep(CONFLICT_BACKOFF_SECONDS * 2**attempt)
                    continue
                if "TransactionConflict" in reasons:
                    return self._still_contended(update, slot, err)
                raise
        raise AssertionError("unreachable: the loop returns or raises")

    def _pace(self, slot: int) -> None:
        """Hold segment `slot` to SLOT_PARTITION_CAP re-stamps a second."""
        with self._lock:
            now = self.monotonic()
            at = max(now, self._slot_next.get(slot, -math.inf))
            self._slot_next[slot] = at + 1.0 / SLOT_PARTITION_CAP
        if at > now:
            self.sleep(at - now)

    def _still_contended(self, update: Mapping[str, Any], slot: int, err: ClientError) -> RowWrite:
        """Every retry met a conflict: the slot says whether a newer run is arming it."""
        try:
            item = read_slot(self.client, self.table_name, slot)
        except (ClientError, BotoCoreError) as read_err:
            item, why = None, f"the slot could not be read: {read_err}"
        else:
            why = describe_slot(slot, item)
        if item is not None and (
            int(item.get(FENCE_EPOCH, -1)) != self.epoch or item.get(LEASE_TOKEN) != self.token
        ):
            self.lose(LeaseLostError(self._refused(why)))
            return RowWrite.LEASE_LOST
        raise SegmentThrottledError(
            f"fence slot {slot} stayed contended: {CONFLICT_RETRIES + 1} fenced re-stamps of "
            f"{update['Key']} were cancelled by TransactionConflict ({why}); the segment "
            "stopped, nothing was lost: run the backfill again"
        ) from err

    def _refused(self, why: str) -> str:
        return (
            f"the fenced write was refused, nothing written (lease epoch {self.epoch} under "
            f"version {self.state_version}): {why}"
        )

    def _why_refused(self, slot: int) -> str:
        """Why DynamoDB refused the slot's check: which epoch armed it, and what STATE says."""
        try:
            why = describe_slot(slot, read_slot(self.client, self.table_name, slot))
            state = ControlStore(self.client, self.table_name).read()
        except (ClientError, BotoCoreError, SagaIndexError) as err:
            return self._refused(f"the fence slot could not be read to say why: {err}")
        lease = state.lease
        holder = (
            "this run still holds the lease in STATE"
            if lease is not None and lease.token == self.token
            else f"STATE's lease: {lease.holder if lease else 'none'}"
        )
        return self._refused(f"{why}; a newer run armed it ({holder})")

    def _transaction(self, update: Mapping[str, Any], slot: int) -> dict[str, Any]:
        row = {k: v for k, v in update.items() if k != "ReturnValues"}
        check = self.check.condition_check(self, slot)
        return {"TransactItems": [{"ConditionCheck": check}, {"Update": row}]}

    def _fall_back_to_clock(self, err: ClientError) -> None:
        with self._lock:
            if self.mode is FenceMode.CLOCK:
                return
            self.mode = FenceMode.CLOCK
        server = getattr(getattr(self.client, "meta", None), "endpoint_url", "the server")
        log.warning(
            "%s has no transactions (%s): the backfill goes on with the clock fence only; a "
            "worker paused between its check and its write can still re-stamp one row per "
            "segment after losing its lease, and a write more than %.0f s after the last good "
            "heartbeat was sent is refused. The drift guard pages for such a row; see the "
            "runbook, 'Stray rows'",
            server,
            error_code(err),
            self.max_heartbeat_age,
            extra={"server": server, "fence": FenceMode.CLOCK.value},
        )


def _request_token(lease_token: str, row: Mapping[str, Any], attempt: int) -> str:
    """An idempotency token (at most 36 characters) for one attempt at one re-stamp."""
    digest = hashlib.sha256(repr((lease_token, attempt, sorted(row["Key"].items()))).encode())
    digest.update(repr(sorted(row.get("ExpressionAttributeValues", {}).items())).encode())
    return digest.hexdigest()[:36]
