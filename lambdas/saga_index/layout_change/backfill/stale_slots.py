"""Clearing stale fence slots (`saga-index backfill clear-fence`, docs/runbook.md): the
operator's way out when a slot holds an epoch that no run holds (docs/control-contract.md, "The
fence").

A new lease's epoch is one above the highest the record holds (lease.epoch: the STATE item's
`leaseEpoch` and fence slot 0's), so a slot armed before STATE was lost and restored never
refuses the next run by itself. A slot still can when its slot 0 is gone (deleted by hand, a
partial restore of the table) while higher slots keep their epochs: the next run's arming is
refused there, and no run will ever clear it. This removes them.

Guarded: refused while a run holds a live lease (LeaseHeldError, exit 5: a live run's slots
are its fence) and while the STATE item is missing (restore it first). Every slot is deleted
only while it still holds the epoch read (a run arming meanwhile keeps what it armed), the
highest first and slot 0 last, so a run that takes the lease meanwhile still reads slot 0 and
gets an epoch above every slot left. Recorded as a `fence-cleared` event.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from saga_index.layout_change.backfill.slots import read_slot
from saga_index.layout_change.lease import LeaseHeldError, nonblank, record_control_event
from saga_index.layout_change.record import (
    FENCE_EPOCH,
    FENCE_SLOTS,
    ControlRecordMissingError,
    ControlStore,
    RecordCondition,
    WallClock,
    fence_slot_key,
    format_time,
    to_millis,
    utc_now,
)
from saga_index.store.dynamo import (
    DEFAULT_POLICY,
    RetryPolicy,
    attribute_fragment,
    deserialize,
    is_condition_failed,
    request_expressions,
    retry_transient,
    serialize,
)

EVENT_FENCE_CLEARED: Final = "fence-cleared"
# Every slot a run can arm: one per segment (backfill.wire MAX_TOTAL_SEGMENTS).
SLOT_LIMIT: Final = 1000
# BatchGetItem reads at most 100 keys per request.
_BATCH: Final = 100
_STILL_THE_EPOCH_READ: Final = attribute_fragment(
    f"#{FENCE_EPOCH} = :seenEpoch", FENCE_EPOCH, slots=(":seenEpoch",)
)


@dataclass(frozen=True)
class ClearedFence:
    """What `clear_fence` found and did: each slot's epoch as read, the slots deleted, and the
    slots that changed under it (armed by a run meanwhile: left as they are)."""

    found: Mapping[int, int]
    cleared: tuple[int, ...]
    changed: tuple[int, ...]
    lease_epoch: int | None

    @property
    def highest_cleared(self) -> int | None:
        return max((self.found[s] for s in self.cleared), default=None)


def armed_slots(store: ControlStore) -> dict[int, int]:
    """Every fence slot that exists, with its epoch: slot 0's high-water mark bounds them; with
    no slot 0, every possible slot is read (BatchGetItem, 100 keys a request)."""
    zero = read_slot(store.client, store.table_name, 0)
    bound = int(zero.get(FENCE_SLOTS, 1)) if zero is not None else SLOT_LIMIT
    found = {} if zero is None else {0: int(zero[FENCE_EPOCH])}
    for start in range(1, bound, _BATCH):
        keys = [serialize(fence_slot_key(s)) for s in range(start, min(bound, start + _BATCH))]
        for item in _batch_get(store, keys):
            slot = int(str(item["PK"]).rsplit("#", 1)[1])
            found[slot] = int(item[FENCE_EPOCH])
    return found


def clear_fence(
    store: ControlStore,
    *,
    changed_by: str,
    reason: str,
    clock: WallClock = utc_now,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> ClearedFence:
    """Delete every fence slot no live run holds (the module docstring says when it is
    refused); a slot armed meanwhile is left, and named in `changed`."""
    changed_by, reason = nonblank("changed_by", changed_by), nonblank("reason", reason)
    state = store.read()
    if state.condition is RecordCondition.MISSING:
        raise ControlRecordMissingError(state.version)
    now = to_millis(clock())
    lease = state.lease
    if lease is not None and lease.is_live(now):
        raise LeaseHeldError(lease.holder, format_time(lease.expires_at), retry_at=lease.expires_at)
    found = armed_slots(store)
    cleared: list[int] = []
    changed: list[int] = []
    for slot in sorted(found, reverse=True):
        (cleared if _delete(store, slot, found[slot], policy) else changed).append(slot)
    result = ClearedFence(found, tuple(sorted(cleared)), tuple(sorted(changed)), state.lease_epoch)
    if cleared:
        record_control_event(
            store,
            EVENT_FENCE_CLEARED,
            changed_by,
            now,
            state.version,
            {"slotsCleared": len(cleared), "highestEpochCleared": result.highest_cleared},
            reason=reason,
        )
    return result


def _delete(store: ControlStore, slot: int, epoch: int, policy: RetryPolicy) -> bool:
    request = {
        "TableName": store.table_name,
        "Key": serialize(fence_slot_key(slot)),
        **request_expressions(
            condition=_STILL_THE_EPOCH_READ.given(serialize({":seenEpoch": epoch}))
        ),
    }

    def send() -> bool:
        try:
            store.client.delete_item(**request)
        except ClientError as err:
            if is_condition_failed(err):
                return False
            raise
        return True

    return retry_transient(send, what=f"fence slot {slot}", policy=policy)


def _batch_get(store: ControlStore, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    pending: dict[str, Any] = {store.table_name: {"Keys": keys, "ConsistentRead": True}}
    while pending:
        response = store.client.batch_get_item(RequestItems=pending)
        answered = response.get("Responses", {}).get(store.table_name, [])
        items.extend(deserialize(raw) for raw in answered)
        pending = response.get("UnprocessedKeys") or {}
    return items
