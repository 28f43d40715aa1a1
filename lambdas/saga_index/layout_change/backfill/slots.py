"""The backfill's fence slots: one item per segment, each on its own partition key, armed with
the run's lease epoch before its first re-stamp (docs/control-contract.md, "The fence").

  slot i   PK = "RSAGA_INDEX#FENCE#<i>", SK = "FENCE": `epoch`, `leaseToken` (absent on a revoked
           slot), `stateVersion`, `armedAt`, `armedBy`; slot 0 also `slots`, the high-water mark
           of slots any run armed

Segment i of a run re-stamps only while slot i holds the run's epoch and token (the
ConditionCheck of its transaction, fence.LeaseFence). Arming, part of taking the run:

  1  slot 0 first, as a compare-and-set on the slot 0 just read (its epoch, or its absence): the
     high-water mark H it held, and this run's S segments, give slot 0 `slots = max(H, S)`. An
     older run arming late either wrote slot 0 before this read (and this run sees its mark) or
     is refused: it arms nothing more, so no slot above the mark this run read can be left to
     an older epoch.
  2  every other slot below max(H, S), by a bounded pool: slots below S get the run's epoch and
     token, the rest are revoked (the epoch, no token), so a segment of an older, wider run
     cannot re-stamp through them. Each write is conditional on the slot's epoch being absent
     or not above this run's: an older run's late arming never undoes a newer one, and a retry
     of the same arming is idempotent (an epoch belongs to one token: lease.grant).

A slot that holds a NEWER epoch means the run lost its lease: LeaseLostError naming it. Each
write is retried on conflicts and throttles (store.dynamo.retry: an in-flight re-stamp of the
segment holds its slot for milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import TABLE_PARTITION_KEY
from saga_index.layout_change.lease import LeaseLostError
from saga_index.layout_change.record import (
    ENTITY_FENCE,
    ENTITY_TYPE,
    FENCE_ARMED_AT,
    FENCE_ARMED_BY,
    FENCE_EPOCH,
    FENCE_SLOTS,
    LEASE_TOKEN,
    STATE_VERSION,
    ControlError,
    ControlStore,
    WallClock,
    fence_slot_key,
    format_time,
    utc_now,
)
from saga_index.store.dynamo import (
    DEFAULT_POLICY,
    Expression,
    RetryPolicy,
    attribute_fragment,
    deserialize,
    error_code,
    is_condition_failed,
    request_expressions,
    retry_transient,
    serialize,
)

# How many slot writes an arming has in flight at once.
ARMING_POOL: Final = 16
# One partition takes at most 1,000 WCU/s; a re-stamp's ConditionCheck costs its slot 2 WCU (an
# item under 1 KB, in a transaction): one segment re-stamps at most this often, leaving a fifth
# of the slot's partition to arming.
SLOT_PARTITION_CAP: Final = 400.0

# The re-stamp's check: the slot still holds this run's epoch and token.
SLOT_STILL_OURS: Final = attribute_fragment(
    f"#{FENCE_EPOCH} = :fenceEpoch AND #{LEASE_TOKEN} = :fenceToken",
    FENCE_EPOCH,
    LEASE_TOKEN,
    slots=(":fenceEpoch", ":fenceToken"),
)
# An arming writes a slot no newer epoch holds.
_NOT_ARMED_BY_A_NEWER_EPOCH: Final = attribute_fragment(
    f"attribute_not_exists(#{TABLE_PARTITION_KEY}) OR #{FENCE_EPOCH} <= :epoch",
    TABLE_PARTITION_KEY,
    FENCE_EPOCH,
    slots=(":epoch",),
)
# Slot 0: still as this arming read it.
_SLOT_ZERO_UNSEEN: Final = attribute_fragment(
    f"attribute_not_exists(#{TABLE_PARTITION_KEY})", TABLE_PARTITION_KEY
)
_SLOT_ZERO_AS_SEEN: Final = attribute_fragment(
    f"#{FENCE_EPOCH} = :seenEpoch", FENCE_EPOCH, slots=(":seenEpoch",)
)
# Slot 0's compare-and-set loses only to another arming's write between its read and its put.
_SLOT_ZERO_ROUNDS: Final = 5


def read_slot(client: Any, table_name: str, slot: int) -> dict[str, Any] | None:
    """Fence slot `slot` as stored (strongly consistent), or None when never armed."""
    raw = client.get_item(
        TableName=table_name, Key=serialize(fence_slot_key(slot)), ConsistentRead=True
    ).get("Item")
    return deserialize(raw) if raw else None


def describe_slot(slot: int, item: Mapping[str, Any] | None) -> str:
    if item is None:
        return f"fence slot {slot} was never armed"
    token = item.get(LEASE_TOKEN)
    return (
        f"fence slot {slot} is armed by epoch {item.get(FENCE_EPOCH)} "
        f"({'token ' + str(token) if token else 'revoked'}, by {item.get(FENCE_ARMED_BY)!r} "
        f"at {item.get(FENCE_ARMED_AT)})"
    )


def refused_by_slot(
    slot: int, epoch: int, seen: Mapping[str, Any] | None, held: str
) -> LeaseLostError:
    """An arming refused by a slot a higher epoch holds: what the slot holds, what the record
    holds (`held`), and what to do when no run holds the slot."""
    return LeaseLostError(
        f"fence slot {slot} refused this run's epoch {epoch}: {describe_slot(slot, seen)}, and "
        f"{held}. Either a newer run armed it (then `saga-index status` shows its live lease: "
        "let it finish), or no run holds it (a slot armed before the record was lost or "
        "restored): then `saga-index backfill clear-fence --reason TEXT` clears the stale "
        "slots, and the same backfill can start"
    )


class _Arming:
    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        epoch: int,
        token: str,
        state_version: int,
        armed_by: str,
        clock: WallClock,
        policy: RetryPolicy,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.epoch = epoch
        self.token = token
        self.state_version = state_version
        self.armed_by = armed_by
        self.armed_at = format_time(clock())
        self.policy = policy

    def item(self, slot: int, *, armed: bool, high_water: int | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {
            **fence_slot_key(slot),
            ENTITY_TYPE: ENTITY_FENCE,
            FENCE_EPOCH: self.epoch,
            STATE_VERSION: self.state_version,
            FENCE_ARMED_AT: self.armed_at,
            FENCE_ARMED_BY: self.armed_by,
        }
        if armed:
            item[LEASE_TOKEN] = self.token
        if high_water is not None:
            item[FENCE_SLOTS] = high_water
        return item

    def put(self, slot: int, item: Mapping[str, Any], condition: Expression) -> bool:
        """One conditional PutItem, retried while refused for now; False: the condition
        failed."""

        def send() -> bool:
            try:
                self.client.put_item(
                    TableName=self.table_name,
                    Item=serialize(item),
                    **request_expressions(condition=condition),
                )
            except ClientError as err:
                if is_condition_failed(err):
                    return False
                raise
            return True

        try:
            return retry_transient(send, what=f"fence slot {slot}", policy=self.policy)
        except ClientError as err:
            raise ControlError(
                f"fence slot {slot} could not be armed ({error_code(err)}: {err}): the run did "
                "not start, nothing was re-stamped"
            ) from err

    def newer(self, slot: int) -> LeaseLostError:
        """The refusal of a slot a higher epoch holds: what the slot and the record hold, and
        what to do when no run holds it (a slot left by a run whose epoch the record lost)."""
        seen = read_slot(self.client, self.table_name, slot)
        try:
            record = ControlStore(self.client, self.table_name).read()
            held = (
                f"the record's leaseEpoch is {record.lease_epoch}"
                if record.lease_epoch is not None
                else "the record holds no leaseEpoch"
            )
        except (ClientError, BotoCoreError, ControlError) as err:
            held = f"the record could not be read ({type(err).__name__})"
        return refused_by_slot(slot, self.epoch, seen, held)

    def slot_zero(self, segments: int) -> int:
        """Arm slot 0 as a compare-and-set on what was read; the slots to arm in all."""
        for _ in range(_SLOT_ZERO_ROUNDS):
            seen = read_slot(self.client, self.table_name, 0)
            seen_epoch = None if seen is None else int(seen[FENCE_EPOCH])
            if seen_epoch is not None and seen_epoch > self.epoch:
                raise self.newer(0)
            high_water = max(segments, int(seen.get(FENCE_SLOTS, 0)) if seen else 0)
            condition = (
                _SLOT_ZERO_UNSEEN
                if seen_epoch is None
                else _SLOT_ZERO_AS_SEEN.given(serialize({":seenEpoch": seen_epoch}))
            )
            if self.put(0, self.item(0, armed=True, high_water=high_water), condition):
                return high_water
        raise ControlError(
            f"fence slot 0 changed under this run's arming {_SLOT_ZERO_ROUNDS} times: another "
            "run is arming at once; the run did not start, nothing was re-stamped"
        )

    def other(self, slot: int, segments: int) -> None:
        condition = _NOT_ARMED_BY_A_NEWER_EPOCH.given(serialize({":epoch": self.epoch}))
        if not self.put(slot, self.item(slot, armed=slot < segments), condition):
            raise self.newer(slot)


def arm_fence(
    client: Any,
    table_name: str,
    *,
    epoch: int,
    token: str,
    state_version: int,
    segments: int,
    armed_by: str,
    clock: WallClock = utc_now,
    policy: RetryPolicy = DEFAULT_POLICY,
) -> int:
    """Arm the fence slots of a run of `segments` segments under lease epoch `epoch` (the
    module docstring); the number of slots written (the high-water mark). LeaseLostError when
    a newer epoch holds a slot; ControlError (RetryLaterError when only contention stopped it)
    naming the slot that could not be armed: the run must not start."""
    if segments < 1:
        raise ValueError(f"a run has at least one segment, got {segments}")
    arming = _Arming(
        client,
        table_name,
        epoch=epoch,
        token=token,
        state_version=state_version,
        armed_by=armed_by,
        clock=clock,
        policy=policy,
    )
    high_water = arming.slot_zero(segments)
    rest = range(1, high_water)
    if rest:
        with ThreadPoolExecutor(
            max_workers=min(ARMING_POOL, len(rest)), thread_name_prefix="fence-arming"
        ) as pool:
            # list(): the first slot's error (in slot order) propagates once all have ended.
            list(pool.map(lambda slot: arming.other(slot, segments), rest))
    return high_water
