"""What a backfill will cost, estimated before it runs: its time at the write cap, and the write
capacity it consumes on the hot legacy index key.

A re-stamp changes a row's GSI4PK, which DynamoDB writes to the index as two entries: a delete
under the old key and a put under the new one, each 1 WCU per started 1 KB of the index entry
(the index projects ALL, so an entry is the whole item), plus the base-table write (1 WCU per
started 1 KB of the larger of the item before and after). On DynamoDB the re-stamp is fenced
(fence.LeaseFence): a TransactWriteItems of the row's Update and a ConditionCheck on the
segment's fence slot, and a transaction's items are billed twice (prepare and commit), so the
table write counts twice and the slot's check adds 2 WCU on the slot's own partition; the
index entries are priced as a single write's (the assumption docs/control-contract.md, "Cost",
states). A server without transactions (dynalite) bills neither. A forward move (legacy -> sharded)
therefore deletes one entry from the legacy key per row; a rollback (sharded -> legacy) puts one
onto it; a re-shard (sharded -> sharded) does not touch it. One partition serves at most 1,000
WCU/s, shared with production traffic: the share of that ceiling the run takes at its cap is
what an operator weighs before choosing the cap.

The item sizes come from a small sample of the rows the run would move, read through the index
(whole items; sizing.item_size, DynamoDB's documented rule): the rows to move are counted by the
dry run itself, their sizes are only sampled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from saga_index.index import INDEX_PARTITION_KEY, InvalidInputError, keys
from saga_index.layout_change.backfill.move import Move
from saga_index.store import partition_rows
from saga_index.store.dynamo import deserialize, item_size, on_index_partition, request_expressions

# DynamoDB's ceiling of one partition (AWS documentation), on-demand mode and indexes included.
PARTITION_WCU_PER_SECOND = 1000.0
# One write capacity unit covers a write of up to 1 KB; a bigger item takes one unit per KB.
WRITE_UNIT_BYTES = 1024
# Rows whose sizes are sampled: ~25 eventually consistent read units for 2 KB rows, once.
DEFAULT_SAMPLE_ROWS = 100
# An item in a transaction is billed as two writes (AWS documentation: prepare and commit).
TRANSACTION_WRITES = 2
# The fence slot's ConditionCheck: a slot item is far under 1 KB, billed as a transaction's item.
FENCE_SLOT_WCU = 1 * TRANSACTION_WRITES


class LegacyKeyEffect(StrEnum):
    """What the run does to the legacy index key."""

    OFF = "off"  # forward from legacy: one index delete on the legacy key per row
    ONTO = "onto"  # rollback to legacy: one index put onto the legacy key per row
    NONE = "none"  # between two sharded layouts: the legacy key is not touched

    @classmethod
    def of(cls, move: Move) -> LegacyKeyEffect:
        if not move.source.is_sharded:
            return cls.OFF
        if not move.target.is_sharded:
            return cls.ONTO
        return cls.NONE


def write_units(size_bytes: int) -> int:
    """WCU of one write of an item (or index entry) of this size: 1 per started KB, at least 1."""
    if size_bytes < 0:
        raise InvalidInputError(f"an item size is a number of bytes >= 0, got {size_bytes}")
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))


@dataclass(frozen=True)
class RestampUnits:
    """The write units one row's re-stamp consumes."""

    table: int  # the base-table Update, in its transaction: the larger item's units, twice
    source_index: int  # the index entry deleted under the source key
    target_index: int  # the index entry put under the target key
    legacy_key: int  # of those two, the one on the legacy key (0 when neither is)
    fence_slot: int = FENCE_SLOT_WCU  # the slot's ConditionCheck, on the slot's partition

    @property
    def total(self) -> int:
        return self.table + self.source_index + self.target_index + self.fence_slot


def restamp_units(raw: Mapping[str, Any], move: Move) -> RestampUnits:
    """The write units of re-stamping one saga row (wire shape, as read) that `move` moves, as
    DynamoDB bills the fenced re-stamp."""
    target = move.target_key_of(deserialize(raw))
    if target is None:
        raise InvalidInputError(f"{move.describe()} cannot move a row whose personId is unusable")
    before = item_size(raw)
    after = item_size({**raw, INDEX_PARTITION_KEY: {"S": target}})
    source_index, target_index = write_units(before), write_units(after)
    effect = LegacyKeyEffect.of(move)
    legacy = {
        LegacyKeyEffect.OFF: source_index,
        LegacyKeyEffect.ONTO: target_index,
        LegacyKeyEffect.NONE: 0,
    }[effect]
    return RestampUnits(
        table=write_units(max(before, after)) * TRANSACTION_WRITES,
        source_index=source_index,
        target_index=target_index,
        legacy_key=legacy,
    )


@dataclass(frozen=True)
class RowSample:
    """The sizes of a sample of the rows a run would move."""

    rows: int = 0
    item_bytes: int = 0
    legacy_key_units: int = 0
    total_units: int = 0

    def add(self, raw: Mapping[str, Any], move: Move) -> RowSample:
        units = restamp_units(raw, move)
        return RowSample(
            rows=self.rows + 1,
            item_bytes=self.item_bytes + item_size(raw),
            legacy_key_units=self.legacy_key_units + units.legacy_key,
            total_units=self.total_units + units.total,
        )


def sample_rows_to_move(
    client: Any,
    table_name: str,
    *,
    index_name: str,
    move: Move,
    limit: int = DEFAULT_SAMPLE_ROWS,
) -> RowSample:
    """Sizes of up to `limit` rows the run would move: the first index items of the source
    partitions, in order, one Query page per partition until `limit` items were read (an
    eventually consistent read of whole items; the index projects ALL)."""
    if limit < 1:
        raise InvalidInputError(f"a sample needs at least 1 row, got {limit}")
    sample = RowSample()
    read = 0
    for partition in move.source_partitions():
        if read >= limit:
            break
        page = client.query(
            TableName=table_name,
            IndexName=index_name,
            **request_expressions(key_condition=on_index_partition(partition)),
            Limit=limit - read,
        )
        for raw in page.get("Items", []):
            read += 1
            item = deserialize(raw)
            if item.get("entityType") == keys.ENTITY_TYPE and move.must_move_row(item):
                sample = sample.add(raw, move)
    return sample


def count_rows_to_move(client: Any, table_name: str, *, index_name: str, move: Move) -> int:
    """The saga rows the run will move, as the index shows them now (the progress bar's
    total): every swept partition read to its end, counting the rows the row rule moves. A
    re-shard's rows whose shard does not change, other entities and rows a sharded target
    cannot key are not counted. The read costs what a COUNT query of the same partitions
    costs (DynamoDB charges the items examined); only the key attributes come back."""
    attributes = ("PK", "entityType", "personId", INDEX_PARTITION_KEY, "GSI4SK")
    rows = 0
    for partition in move.swept_partitions():
        for item in partition_rows(
            client, table_name, partition, attributes=attributes, index_name=index_name
        ):
            if item.get("entityType") == keys.ENTITY_TYPE and move.must_move_row(item):
                rows += 1
    return rows


@dataclass(frozen=True)
class BackfillEstimate:
    """A run's time at its cap and its write capacity on the legacy key.

    rows_to_move: what the dry run counted (wouldRestamp). The per-row figures are the sample's
    means; None when no sampled row would move (nothing to size).
    """

    rows_to_move: int
    max_writes_per_second: float
    legacy_key: LegacyKeyEffect
    sampled_rows: int
    average_item_bytes: float | None
    legacy_key_wcu_per_row: float | None
    wcu_per_row: float | None

    @classmethod
    def of(
        cls, *, rows_to_move: int, max_writes_per_second: float, move: Move, sample: RowSample
    ) -> BackfillEstimate:
        if rows_to_move < 0:
            raise InvalidInputError(f"rows to move must be >= 0, got {rows_to_move}")
        if not max_writes_per_second > 0 or math.isinf(max_writes_per_second):
            raise InvalidInputError(
                f"the write cap must be a positive number of writes/s, got {max_writes_per_second}"
            )
        rows = sample.rows
        return cls(
            rows_to_move=rows_to_move,
            max_writes_per_second=max_writes_per_second,
            legacy_key=LegacyKeyEffect.of(move),
            sampled_rows=rows,
            average_item_bytes=sample.item_bytes / rows if rows else None,
            legacy_key_wcu_per_row=sample.legacy_key_units / rows if rows else None,
            wcu_per_row=sample.total_units / rows if rows else None,
        )

    @property
    def seconds(self) -> float:
        """The run's writes at the cap: rows / cap (the Scan and the read-back come on top)."""
        return self.rows_to_move / self.max_writes_per_second

    def _per_row(self, value: float | None) -> float | None:
        if self.rows_to_move == 0:
            return 0.0
        return value

    @property
    def legacy_key_wcu_per_second(self) -> float | None:
        """Legacy-key WCU/s while the run writes at its cap."""
        per_row = self._per_row(self.legacy_key_wcu_per_row)
        return None if per_row is None else per_row * self.max_writes_per_second

    @property
    def legacy_key_share_of_partition_limit(self) -> float | None:
        """legacy_key_wcu_per_second as a share of one partition's 1,000 WCU/s."""
        per_second = self.legacy_key_wcu_per_second
        return None if per_second is None else per_second / PARTITION_WCU_PER_SECOND

    @property
    def legacy_key_wcu(self) -> float | None:
        """Legacy-key WCU over the whole run."""
        per_row = self._per_row(self.legacy_key_wcu_per_row)
        return None if per_row is None else per_row * self.rows_to_move

    @property
    def total_wcu(self) -> float | None:
        """WCU over the whole run: every row's fenced re-stamp (the table write twice, the fence
        slot's check, both index entries)."""
        per_row = self._per_row(self.wcu_per_row)
        return None if per_row is None else per_row * self.rows_to_move

    def to_json(self) -> dict[str, Any]:
        return {
            "rowsToMove": self.rows_to_move,
            "maxWritesPerSecond": self.max_writes_per_second,
            "seconds": self.seconds,
            "legacyKey": self.legacy_key.value,
            "sampledRows": self.sampled_rows,
            "averageItemBytes": self.average_item_bytes,
            "legacyKeyWcuPerRow": self.legacy_key_wcu_per_row,
            "legacyKeyWcuPerSecond": self.legacy_key_wcu_per_second,
            "legacyKeyShareOfPartitionLimit": self.legacy_key_share_of_partition_limit,
            "legacyKeyWcu": self.legacy_key_wcu,
            "partitionWcuPerSecondLimit": PARTITION_WCU_PER_SECOND,
            "wcuPerRow": self.wcu_per_row,
            "totalWcu": self.total_wcu,
        }
