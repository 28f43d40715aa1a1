"""What the backfill does to ONE row of a segment's Scan (layout_change.backfill.segment runs
the Scan):

  read   PK, SK, entityType, personId, GSI4PK, GSI4SK from a strongly consistent parallel Scan
  keep   saga rows (entityType = "RenewalSaga") on a key the run sweeps (its SOURCE layout's,
         and a sharded TARGET's own: misrouted rows) whose key differs from the one the TARGET
         layout gives their person (the layouts are the control record's: forward
         legacy -> sharded(N), rollback sharded(N) -> legacy; move.py)
  leave  when the target is sharded, rows whose personId is unusable (keys.person_anomaly): an
         anomaly, reported by table key and reason, never written (nothing guesses a shard for it;
         store.repair fixes one). The legacy target gives everyone one key, so a rollback
         moves those rows too and lists them (table key and reason) as moved, not left behind
  write  UpdateItem SET GSI4PK = target, and nothing else, IF the row still exists and GSI4PK is
         still what the Scan read, and (sharded target: the key came from them) personId and
         GSI4SK are too; through the run's lease fence (fence.py): a write the fence refuses
         (the lease is lost) is not made, and the segment stops before this row
  count  restamped; or skipped when the condition failed (someone else moved, changed or deleted
         the row since the read: never an error, and a deleted row is never re-created)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from saga_index.index import keys
from saga_index.layout_change.backfill.fence import LeaseFence, RowWrite, is_transaction_throttle
from saga_index.layout_change.backfill.inputs import SegmentRequest
from saga_index.layout_change.backfill.pacing import SegmentThrottledError, TokenBucket
from saga_index.layout_change.backfill.throttle_reasons import reasons_of
from saga_index.layout_change.backfill.wire import (
    TABLE_KEY_ATTRIBUTES,
    SegmentResult,
    anomaly_key,
    plain_key,
)
from saga_index.store.dynamo import (
    Expression,
    ThrottleCounter,
    attribute_list,
    deserialize,
    error_code,
    is_condition_failed,
    is_throttle,
    request_expressions,
    unchanged_since_read,
)

log = logging.getLogger(__name__)

# A re-stamp still throttled after botocore's retries is tried again this many times in all,
# each after the pacer's next token, before its segment stops.
PACED_ATTEMPTS = 8

# What the decision reads of a row (the Scan's projection, and the read-back's after a run).
ROW_DECISION_ATTRIBUTES = attribute_list(
    {
        "#pk": "PK",
        "#sk": "SK",
        "#entityType": "entityType",
        "#personId": "personId",
        "#gsi4pk": "GSI4PK",
        "#gsi4sk": "GSI4SK",
    }
)

# ---- the re-stamp ------------------------------------------------------------------------
# Its condition is the row still as the Scan read it (expressions.unchanged_since_read): GSI4PK,
# since nobody re-stamped it (writers in `migrating` do, and win); and when the target keys by
# person, the personId the target shard was computed from and the GSI4SK the anomaly check read.
HELD_FOR_EVERY_TARGET = ("GSI4PK",)
HELD_FOR_A_PERSON_KEYED_TARGET = ("GSI4PK", "personId", "GSI4SK")
# The only change a re-stamp makes.
SET_ONLY_GSI4PK = Expression(
    "SET #gsi4pk = :target", names={"#gsi4pk": "GSI4PK"}, slots=frozenset({":target"})
)


class RowRestamper:
    """The rows of one segment invocation, one at a time, counted in `result`."""

    # What the segment's Scan reads of a row for this decision.
    projection: Expression = ROW_DECISION_ATTRIBUTES

    def __init__(
        self,
        client: Any,
        table_name: str,
        request: SegmentRequest,
        result: SegmentResult,
        *,
        throttles: ThrottleCounter | None,
        bucket: TokenBucket,
        fence: LeaseFence | None = None,
    ) -> None:
        self.client = client
        # None: a run outside the control record (RunTicket.unleased: benchmarks, the runner's
        # own tests), which holds no lease to fence.
        self.fence = fence
        self.table_name = table_name
        self.request = request
        self.result = result
        self.throttles = throttles
        self.bucket = bucket
        self.move = request.move

    def handle(self, raw: Mapping[str, Any], take_token: Callable[[], bool]) -> bool:
        """Deal with one row the Scan returned. False: stopped before writing it (take_token,
        the wait for a write token, returned False)."""
        request = self.request
        if raw.get("entityType", {}).get("S") != keys.ENTITY_TYPE:
            return True  # not a saga: never touched
        gsi4pk = raw.get("GSI4PK", {}).get("S")
        if not self.move.is_on_source(gsi4pk):
            return True  # not on the source layout: moved already (or not indexed at all)
        item = deserialize(raw)
        reason = keys.person_anomaly(item)
        target = self.move.target_key_of(item)
        if target is None:
            self.result.anomalies += 1
            self._list_anomaly(raw, reason)
            log.warning(
                "saga row anomaly, left on its key for a human to repair: %s: %s",
                plain_key(raw),
                reason,
                extra={"key": plain_key(raw), "reason": reason},
            )
            return True
        if gsi4pk == target:
            return True  # a key both layouts give this person (a re-shard's shared keys)
        if request.dry_run:
            self.result.would_restamp += 1
            if reason is not None:
                self._list_anomaly(raw, reason)
            return True
        if not take_token():
            return False
        outcome = self._restamp(raw, target, take_token)
        if outcome is None or outcome is RowWrite.LEASE_LOST:
            return False  # not written: the segment stops before this row
        if outcome is RowWrite.WRITTEN and reason is not None:
            # Moved to a key that needs no personId (the legacy key): listed, not left behind.
            self._list_anomaly(raw, reason)
            log.warning(
                "saga row anomaly moved to %s (its personId still needs a human): %s: %s",
                target,
                plain_key(raw),
                reason,
                extra={"key": plain_key(raw), "reason": reason, "target": target},
            )
        return True

    def _list_anomaly(self, raw: Mapping[str, Any], reason: str | None) -> None:
        # Every listed row is an anomaly (keys.person_anomaly gave a reason): in every
        # direction its key says why, so the operator can repair it from the report alone.
        if reason is None or len(self.result.anomaly_keys) >= self.request.anomaly_key_limit:
            return
        self.result.anomaly_keys.append(anomaly_key(raw, reason))

    def _restamp(
        self, raw: Mapping[str, Any], target: str, take_token: Callable[[], bool]
    ) -> RowWrite | None:
        """The conditional write, through the fence when the run holds a lease (None: stopped
        while waiting to try a throttled write again, nothing written)."""
        # A target that keys no one by person needs neither the personId nor the GSI4SK read.
        held = (
            HELD_FOR_A_PERSON_KEYED_TARGET
            if self.move.target_needs_person
            else HELD_FOR_EVERY_TARGET
        )
        update: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {name: raw[name] for name in TABLE_KEY_ATTRIBUTES},
            **request_expressions(
                update=SET_ONLY_GSI4PK.given({":target": {"S": target}}),
                # The values the Scan returned, as typed attribute values: equality is exact.
                condition=unchanged_since_read(raw, held),
            ),
        }
        outcome = self._paced_write(update, raw, take_token)
        if outcome is None:
            return None
        if outcome is RowWrite.ROW_CHANGED:
            self.result.skipped += 1
            log.info(
                "skipped %s: moved, changed or deleted since it was read",
                plain_key(raw),
                extra={"key": plain_key(raw)},
            )
        elif outcome is RowWrite.WRITTEN:
            self.result.restamped += 1
        return outcome

    def _paced_write(
        self, update: dict[str, Any], raw: Mapping[str, Any], take_token: Callable[[], bool]
    ) -> RowWrite | None:
        """Write, telling the pacer of every throttle with its reasons. A write still throttled
        after botocore's retries waits for the pacer's next token (at the slower pace, or after
        its pause) and tries again, PACED_ATTEMPTS times in all, before the segment stops: the
        pace, not the stop, is the answer to back-pressure."""
        for attempt in range(1, PACED_ATTEMPTS + 1):
            try:
                return self._write(update)
            except ClientError as err:
                if not (is_throttle(err) or is_transaction_throttle(err)):
                    raise
                self._tell_pacer(final=err)
                if attempt == PACED_ATTEMPTS:
                    raise SegmentThrottledError(
                        f"segment {self.request.segment}: UpdateItem of {plain_key(raw)} still "
                        f"throttled after {PACED_ATTEMPTS} paced attempts ({error_code(err)}); "
                        "the segment stopped, nothing was lost: run the backfill again"
                    ) from err
            finally:
                self._tell_pacer()
            if not take_token():
                return None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _tell_pacer(self, final: ClientError | None = None) -> None:
        """The reasons of this thread's throttled attempts (botocore's retries, seen by the
        client's observer) and of a final throttle no observer saw (one answered before it was
        sent, as the semantics layer does; a cancelled transaction, whose code the observer does
        not count: its items' codes are its reasons, pacer.reasons_of)."""
        attempts = self.throttles.take_mine() if self.throttles is not None else []
        if final is not None and (not attempts or is_transaction_throttle(final)):
            attempts = [*attempts, reasons_of(final.response)]
        for reasons in attempts:
            self.bucket.on_throttle(reasons, segment=self.request.segment)

    def _write(self, update: dict[str, Any]) -> RowWrite:
        if self.fence is not None:
            return self.fence.write(update, slot=self.request.segment)
        try:
            self.client.update_item(**update)
        except ClientError as err:
            if is_condition_failed(err):
                return RowWrite.ROW_CHANGED
            raise
        return RowWrite.WRITTEN
