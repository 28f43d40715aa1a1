"""The fencing epoch (`leaseEpoch`) a new lease gets (docs/control-contract.md, "The fence").

An epoch is above every epoch the record holds: the STATE item's `leaseEpoch` (the last lease
handed out) and fence slot 0's `epoch` (slot 0 is armed first by every run, as a compare-and-set
that never lowers it: the highest epoch any run armed). Slot 0 outlives a lost or restored STATE
item, so a restored record never hands out an epoch that an armed slot would refuse, whatever the
host clocks said when those slots were armed.

The wall clock (epoch milliseconds) is only a floor: it keeps epochs increasing when the record
holds neither (a STATE item restored without `leaseEpoch` and no slot armed yet, or the slots
cleared by `saga-index backfill clear-fence`). A host whose clock runs ahead raises the epochs it
hands out, and every later run starts above them: it never blocks one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from saga_index.layout_change.record import FENCE_EPOCH, ControlState, ControlStore, fence_slot_key
from saga_index.store.dynamo import deserialize, serialize


def newest_armed_epoch(store: ControlStore) -> int | None:
    """The epoch fence slot 0 holds (strongly consistent), or None when it was never armed."""
    raw: dict[str, Any] | None = store.client.get_item(
        TableName=store.table_name, Key=serialize(fence_slot_key(0)), ConsistentRead=True
    ).get("Item")
    if not raw:
        return None
    epoch = deserialize(raw).get(FENCE_EPOCH)
    return None if epoch is None else int(epoch)


def next_epoch(state: ControlState, now: datetime, armed: int | None = None) -> int:
    """The fencing epoch of a lease taken now by a new token: one above the highest epoch the
    record holds (`state.lease_epoch`; `armed`, fence slot 0's), and no lower than `now` in
    epoch milliseconds (the floor when the record holds none)."""
    held = [e for e in (state.lease_epoch, armed) if e is not None]
    floor = int(now.timestamp() * 1000)
    return max([floor, *(e + 1 for e in held)])
