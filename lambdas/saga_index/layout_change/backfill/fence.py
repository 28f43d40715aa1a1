"""The lease fence: no re-stamp lands once the run's lease is lost (docs/control-contract.md,
"The backfill lease", "The fence").

A lease checked by time alone cannot stop a worker that was paused (SIGSTOP, a suspended laptop,
a long GC) between its check and its write: it resumes with its decision intact. Two fences,
both used wherever they can be:

  transactional  every re-stamp is a TransactWriteItems of two actions: a ConditionCheck on the
                 STATE item (leaseToken = the run's token AND version = leaseStateVersion = the
                 version the lease was taken under AND leaseExpiresAt > now) and the row's own
                 conditional Update. DynamoDB judges the lease at write time, so a worker that
                 lost it (taken over, released, a transition since) writes nothing, however long
                 it was paused. No window remains.
  clock          before every write: the last successful heartbeat is younger than
                 `max_heartbeat_age` by the wall clock AND by the monotonic clock (a suspended
                 laptop stops the monotonic clock; a stepped wall clock fools the other), and the
                 keeper has not said stop. This narrows the window, it does not close it: a pause
                 between this check and the request reaching DynamoDB can still write one row
                 per segment after the lease is gone. The drift guard pages for such a row and
                 `saga-index backfill --direction rollback` (in `legacy`) or a forward run (in
                 `sharded`) moves it home.

The clock fence always runs. The transactional one runs unless the server answers
UnknownOperationException (dynalite: the demo and the conformance suite): that is detected once
per run, logged as a warning naming the server and the window that remains, and the run goes on
with the clock fence only.

What the transactional fence costs (AWS documentation): an item in a transaction is charged
twice (prepare and commit), so a re-stamp of a row up to 1 KB costs 2 WCU instead of 1, and the
ConditionCheck costs 2 WCU per KB of the STATE item. The STATE item is ONE item in the control
partition, and one partition serves at most 1,000 WCU/s: every fenced re-stamp checks it, so the
run's cap is held to `control_partition_cap` (with a STATE item up to 1 KB: 400 re-stamps/s,
leaving 200 WCU/s of the partition to heartbeats, `phase set` and the events). A heartbeat that
updates STATE while a re-stamp checks it cancels the re-stamp with TransactionConflict: that is
retried a bounded number of times (CONFLICT_RETRIES), then the segment stops like a throttle.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index.errors import SagaIndexError
from saga_index.layout_change.backfill.pacing import SegmentThrottledError
from saga_index.layout_change.lease.grant import why_lost
from saga_index.layout_change.record.errors import LeaseLostError
from saga_index.layout_change.record.items import (
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    VERSION,
    state_key,
)
from saga_index.layout_change.record.store import ControlStore, attribute_fragment
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import WallClock, utc_now
from saga_index.store.dynamo.client import THROTTLE_CODES, error_code
from saga_index.store.dynamo.codec import serialize
from saga_index.store.dynamo.expressions import request_expressions
from saga_index.store.dynamo.sizing import item_size

log = logging.getLogger(__name__)

# The lease as DynamoDB checks it at write time: the run's token, under the version it was taken
# under, not yet expired by the writer's clock at send time. The pause flag is not in it: a
# pause is a pace control (the bucket stops handing out tokens), not a loss of the lease, and a
# re-stamp that lands just after a pause is still correct.
LEASE_STILL_OURS: Final = attribute_fragment(
    f"#{LEASE_TOKEN} = :fenceToken AND #{VERSION} = :fenceVersion "
    f"AND #{LEASE_STATE_VERSION} = :fenceVersion AND #{LEASE_EXPIRES_AT} > :fenceNow",
    LEASE_TOKEN,
    VERSION,
    LEASE_STATE_VERSION,
    LEASE_EXPIRES_AT,
    slots=(":fenceToken", ":fenceVersion", ":fenceNow"),
)
# A heartbeat updating STATE at the same moment cancels a re-stamp: retried this many times.
CONFLICT_RETRIES: Final = 5
CONFLICT_BACKOFF_SECONDS: Final = 0.02
# One partition's write limit (AWS), and what the run leaves of it to heartbeats, `phase set`,
# the events and the drift guard's alarms: the fenced re-stamps get the rest.
PARTITION_WCU_PER_SECOND: Final = 1000.0
CONTROL_PARTITION_HEADROOM_WCU: Final = 200.0
TRANSACTIONAL_WCU_PER_KB: Final = 2.0
# The least heartbeat age the clock fence allows (default_max_heartbeat_age).
MIN_HEARTBEAT_AGE_SECONDS: Final = 2.0
# The cancellation reasons of a transaction that was throttled, not refused.
TRANSACTION_THROTTLE_REASONS: Final = frozenset({"ThrottlingError", *THROTTLE_CODES})


class FenceMode(StrEnum):
    TRANSACTIONAL = "transactional"
    CLOCK = "clock"


class RowWrite(StrEnum):
    """What became of one fenced re-stamp."""

    WRITTEN = "written"
    ROW_CHANGED = "row-changed"  # the row's own condition failed: moved by someone else, skip
    LEASE_LOST = "lease-lost"  # the fence refused: nothing written, the run must stop


def control_partition_cap(state_item_bytes: int) -> float:
    """The most fenced re-stamps per second the control partition takes: each ConditionCheck
    costs TRANSACTIONAL_WCU_PER_KB per started KB of the STATE item."""
    kilobytes = max(1, math.ceil(state_item_bytes / 1024))
    budget = PARTITION_WCU_PER_SECOND - CONTROL_PARTITION_HEADROOM_WCU
    return budget / (TRANSACTIONAL_WCU_PER_KB * kilobytes)


def cancellation_codes(err: ClientError) -> list[str]:
    """The per-action codes of a TransactionCanceledException, in TransactItems order."""
    reasons = err.response.get("CancellationReasons") or []
    return [str(reason.get("Code", "None")) for reason in reasons]


def is_transaction_throttle(err: BaseException) -> bool:
    if not isinstance(err, ClientError) or error_code(err) != "TransactionCanceledException":
        return False
    return any(code in TRANSACTION_THROTTLE_REASONS for code in cancellation_codes(err))


class LeaseFence:
    """The fence of one run (or one Lambda invocation) under its lease.

    The lease keeper calls `mark_heartbeat` after every successful heartbeat and `lose` when the
    lease is gone; the row re-stamper calls `write` for every re-stamp. Thread-safe: a local
    run's segments share one fence.
    """

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        token: str,
        state_version: int,
        max_heartbeat_age: float,
        transactional: bool = True,
        clock: WallClock = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        on_lost: Callable[[LeaseLostError], None] | None = None,
    ) -> None:
        if not max_heartbeat_age > 0:
            raise ValueError(f"max_heartbeat_age must be positive, got {max_heartbeat_age!r}")
        self.client = client
        self.table_name = table_name
        self.token = token
        self.state_version = state_version
        self.max_heartbeat_age = max_heartbeat_age
        self.mode = FenceMode.TRANSACTIONAL if transactional else FenceMode.CLOCK
        self.clock = clock
        self.monotonic = monotonic
        self.sleep = sleep
        self.on_lost = on_lost
        self.lost: LeaseLostError | None = None
        # The most re-stamps/s the control partition takes while every one checks STATE
        # (control_partition_cap); the keeper holds the run's cap to it. None: not measured.
        self.partition_cap: float | None = None
        self.conflicts = 0  # TransactionConflict cancellations retried (the run's report)
        self._lock = threading.Lock()
        self._wall_mark: datetime | None = None
        self._mono_mark = -math.inf

    def write_cap(self) -> float | None:
        """The cap the fence imposes on the run's TOTAL rate: only while it is transactional
        (the clock fence adds no write to the control partition)."""
        return self.partition_cap if self.mode is FenceMode.TRANSACTIONAL else None

    # ---- what the keeper tells it ------------------------------------------------------

    def mark_heartbeat(self, wall: datetime | None = None, mono: float | None = None) -> None:
        """A heartbeat just proved the lease."""
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
        """Seconds since the last good heartbeat, the larger of the wall-clock and the monotonic
        measure (inf before the first; a wall clock that stepped back counts as stale)."""
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

    def write(self, update: Mapping[str, Any]) -> RowWrite:
        """One re-stamp: `update` is the row's UpdateItem request (TableName, Key, expressions).
        Raises the ClientError of a failure that is neither a condition nor a conflict."""
        if not self.check_clock():
            return RowWrite.LEASE_LOST
        if self.mode is FenceMode.TRANSACTIONAL:
            return self._transact(update)
        try:
            self.client.update_item(**update)
        except ClientError as err:
            if error_code(err) == "ConditionalCheckFailedException":
                return RowWrite.ROW_CHANGED
            raise
        return RowWrite.WRITTEN

    def _transact(self, update: Mapping[str, Any]) -> RowWrite:
        request = self._transaction(update)
        for attempt in range(CONFLICT_RETRIES + 1):
            check = request["TransactItems"][0]["ConditionCheck"]
            check["ExpressionAttributeValues"][":fenceNow"] = {"S": format_time(self.clock())}
            # botocore's own retries of a lost answer resend this very request: one
            # transaction, not a second one that fails its row condition and counts the row
            # as skipped. A conflict retry is a new transaction (a new now): a new token.
            request["ClientRequestToken"] = _request_token(self.token, update, attempt)
            try:
                self.client.transact_write_items(**request)
                return RowWrite.WRITTEN
            except ClientError as err:
                code = error_code(err)
                if code == "UnknownOperationException":
                    self._fall_back_to_clock(err)
                    return self.write(update)
                if code != "TransactionCanceledException":
                    raise
                reasons = cancellation_codes(err)
                state_reason, row_reason = [*reasons, "None", "None"][:2]
                if state_reason == "ConditionalCheckFailed":
                    self.lose(LeaseLostError(self._why_refused()))
                    return RowWrite.LEASE_LOST
                if row_reason == "ConditionalCheckFailed":
                    return RowWrite.ROW_CHANGED
                if "TransactionConflict" in reasons and attempt < CONFLICT_RETRIES:
                    # A heartbeat (or `phase set`) wrote STATE at that moment: try again.
                    self.conflicts += 1
                    self.sleep(CONFLICT_BACKOFF_SECONDS * 2**attempt)
                    continue
                if "TransactionConflict" in reasons:
                    raise SegmentThrottledError(
                        f"the control record stayed contended: {CONFLICT_RETRIES + 1} fenced "
                        f"re-stamps of {update['Key']} were cancelled by TransactionConflict; "
                        "the segment stopped, nothing was lost: run the backfill again"
                    ) from err
                raise
        raise AssertionError("unreachable: the loop returns or raises")

    def _why_refused(self) -> str:
        """Why DynamoDB refused the lease check, from the STATE item as it is now."""
        refused = (
            f"the fenced write was refused, nothing written (lease under version "
            f"{self.state_version})"
        )
        try:
            state = ControlStore(self.client, self.table_name).read()
        except (ClientError, BotoCoreError, SagaIndexError) as err:
            return f"{refused}; the STATE item could not be read to say why: {err}"
        lease = state.lease
        if lease is not None and lease.token == self.token and lease.state_version == state.version:
            return f"{refused}: the lease expired at {format_time(lease.expires_at)}"
        return f"{refused}: {why_lost(state, self.token)}"

    def _transaction(self, update: Mapping[str, Any]) -> dict[str, Any]:
        row = {k: v for k, v in update.items() if k != "ReturnValues"}
        lease = LEASE_STILL_OURS.given(
            {
                ":fenceToken": {"S": self.token},
                ":fenceVersion": {"N": str(self.state_version)},
                ":fenceNow": {"S": format_time(self.clock())},
            }
        )
        check = {
            "TableName": self.table_name,
            "Key": serialize(state_key()),
            **request_expressions(condition=lease),
        }
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
            "heartbeat is refused. The drift guard pages for such a row; see the runbook, "
            "'Stray rows'",
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


def fence_for_run(
    client: Any,
    table_name: str,
    *,
    token: str,
    state_version: int,
    ttl_seconds: float,
    poll_seconds: float,
    transactional: bool = True,
    clock: WallClock = utc_now,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> LeaseFence:
    """The fence of a run holding `token` under `state_version`, on the given clocks (the wall
    clock, the monotonic clock, and the sleep between conflict retries). Transactional: the
    STATE item is read once (strongly consistent) to size its ConditionCheck, which sets the
    cap."""
    fence = LeaseFence(
        client,
        table_name,
        token=token,
        state_version=state_version,
        max_heartbeat_age=default_max_heartbeat_age(ttl_seconds, poll_seconds),
        transactional=transactional,
        clock=clock,
        monotonic=monotonic,
        sleep=sleep,
    )
    if transactional:
        raw = client.get_item(
            TableName=table_name, Key=serialize(state_key()), ConsistentRead=True
        ).get("Item")
        fence.partition_cap = control_partition_cap(item_size(raw))
    return fence


def default_max_heartbeat_age(ttl_seconds: float, poll_seconds: float) -> float:
    """How old the last good heartbeat may be at a write: four heartbeat periods (so one or two
    failed heartbeats do not stop a run) and at least MIN_HEARTBEAT_AGE_SECONDS (a heartbeat is
    a network call; a busy machine delays it), never more than half the lease's TTL (past that
    the lease can be taken over by a clock a little ahead)."""
    return min(ttl_seconds / 2, max(4 * poll_seconds, MIN_HEARTBEAT_AGE_SECONDS))
