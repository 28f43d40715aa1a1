"""The capacity one request consumed, per partition key (pure).

- reads: a Query or Scan sums the sizes of the items it READ (before any filter) and rounds the
  sum up once; GetItem and each BatchGetItem item round per item; a missing item still costs
  one unit;
- writes, per index touched: the base table is charged the larger of the item before and
  after; each GSI is charged for the index entries that change: a put when the item enters the
  index, a delete when it leaves, BOTH when an index key attribute changes (the delete under
  the old key, the put under the new one), one write when only projected attributes change,
  nothing when the item is in the index neither before nor after;
- a failed conditional write costs the base table the size of the existing item (one unit when
  there is none) and touches no index;
- a TransactWriteItems is priced from its actions as single writes (a ConditionCheck as a
  failed conditional write of the item it checks), then its base-table charges are doubled
  (prepare and commit) and its GSI writes are not (`transactional`).

Charges are attributed to (table or index name, partition key value).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from devkit.capacity.errors import MeterError
from devkit.capacity.table_schema import IndexSchema, TableSchema, key_text
from devkit.capacity.units import read_units, write_units
from saga_index.store.dynamo import item_size

# DynamoDB performs two underlying writes of every item in a transaction, one to prepare it and
# one to commit it (developerguide/transaction-apis.html#transaction-capacity-handling); a
# ConditionCheck's item included.
TRANSACTIONAL_FACTOR = 2


@dataclass(frozen=True)
class Charge:
    """Capacity one request consumed on one partition key of the table or of an index."""

    target: str
    partition_key: str
    rcu: float = 0.0
    wcu: float = 0.0


def write_charges(
    schema: TableSchema,
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    *,
    condition_failed: bool = False,
    key: Mapping[str, Any] | None = None,
) -> list[Charge]:
    """The write units of one PutItem/UpdateItem/DeleteItem that turned `old` into `new`.

    old None: the item did not exist; new None: it was deleted. A failed conditional write
    changes nothing: it costs the base table the existing item's size, or one unit when there
    is no item. `key` (the request's table key) locates a write that found no item at all.
    """
    if condition_failed or (not old and not new):
        located = old or new or key
        if not located:
            raise MeterError("a write that changed nothing needs the request's key")
        units = write_units(item_size(old)) if old else 1
        return [Charge(schema.name, key_text(located[schema.hash_key]), wcu=units)]
    reference = new or old
    assert reference is not None
    base = write_units(max(item_size(old), item_size(new)))
    charges = [Charge(schema.name, key_text(reference[schema.hash_key]), wcu=base)]
    for index in schema.indexes:
        before = schema.index_entry(index, old)
        after = schema.index_entry(index, new)
        if before is None and after is None:
            continue
        if before is None and after is not None:
            charges.append(_index_write(index, after))
        elif after is None and before is not None:
            charges.append(_index_write(index, before))
        elif before is not None and after is not None:
            keys_moved = any(before[a] != after[a] for a in index.key_attributes)
            if keys_moved:
                # Two writes: delete under the old key, put under the new one.
                charges.append(_index_write(index, before))
                charges.append(_index_write(index, after))
            elif before != after:
                size = max(item_size(before), item_size(after))
                charges.append(
                    Charge(index.name, key_text(after[index.hash_key]), wcu=write_units(size))
                )
    return charges


def condition_check_charges(
    schema: TableSchema, item: Mapping[str, Any] | None, key: Mapping[str, Any]
) -> list[Charge]:
    """One ConditionCheck of a transaction, before the transaction's factor: the write units of
    the item it checks (one when there is none), on its partition, no index touched."""
    return write_charges(schema, item, None, condition_failed=True, key=key)


def transactional(schema: TableSchema, charges: Iterable[Charge]) -> list[Charge]:
    """A transaction's charges, from its actions priced as single writes: the table's items
    twice (prepare and commit), their GSI writes once.

    The documentation counts the two underlying writes per ITEM and says nothing of the
    indexes; it says a transaction's changes propagate to its GSIs after it completes, which is
    the path a single write's index updates take, so they are priced as a single write's: an
    assumption, the one docs/control-contract.md ("Cost") makes.
    """
    return [
        replace(charge, wcu=charge.wcu * TRANSACTIONAL_FACTOR)
        if charge.target == schema.name
        else charge
        for charge in charges
    ]


def _index_write(index: IndexSchema, entry: Mapping[str, Any]) -> Charge:
    return Charge(index.name, key_text(entry[index.hash_key]), wcu=write_units(item_size(entry)))


def query_charge(
    target: str, partition_key: str, evaluated: Iterable[Mapping[str, Any]], *, consistent: bool
) -> Charge:
    """One Query page: the sizes of every item it read, summed, rounded up to 4 KB once."""
    total = sum(item_size(item) for item in evaluated)
    return Charge(target, partition_key, rcu=read_units(total, consistent=consistent))


def scan_charges(
    target: str, hash_key: str, evaluated: Sequence[Mapping[str, Any]], *, consistent: bool
) -> list[Charge]:
    """One Scan page, priced as one read and shared among the partition keys it read by bytes.

    DynamoDB rounds a Scan page once; which partition served which bytes is only known by key,
    so each key is attributed its share of the page's units in proportion to its bytes.
    """
    by_key: dict[str, int] = defaultdict(int)
    for item in evaluated:
        by_key[key_text(item.get(hash_key))] += item_size(item)
    total = sum(by_key.values())
    units = read_units(total, consistent=consistent)
    if not by_key:
        return [Charge(target, "", rcu=units)]
    return [Charge(target, key, rcu=units * size / total) for key, size in by_key.items()]


_EQUALITY = re.compile(r"([#:\w.-]+)\s*=\s*([#:\w.-]+)")


def query_partition_key(params: Mapping[str, Any], hash_key: str) -> str | None:
    """The partition key value a Query addresses, read from its key condition."""
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    expression = params.get("KeyConditionExpression")
    if expression:
        for left, right in _EQUALITY.findall(expression):
            for name, placeholder in ((left, right), (right, left)):
                if names.get(name, name) == hash_key and placeholder in values:
                    return key_text(values[placeholder])
    conditions = params.get("KeyConditions") or {}
    condition = conditions.get(hash_key)
    if condition and condition.get("ComparisonOperator") == "EQ":
        return key_text(condition["AttributeValueList"][0])
    return None
