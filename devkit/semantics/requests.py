"""What a request includes (its items, for the conflict rules) and what it costs (its charges,
for the ceilings), priced by devkit.capacity's documented rules.

A write is priced twice: before it runs, from the item as it is and the request (an UpdateItem's
result is not known yet: its plain `SET name = :value` assignments are applied, the rest assumed
unchanged in size: an estimate the ceilings admit on; a GSI key it sets is the index write
DynamoDB throttles it for), and after it ran, from the item before and after (what it really
consumed). A transaction's items cost twice (prepare and commit), their GSI writes once, as a
single write's; a ConditionCheck costs twice the write units of the item it checks
(devkit.capacity.pricing.transactional, which the capacity meter applies too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkit.capacity.pricing import TRANSACTIONAL_FACTOR as TRANSACTIONAL_FACTOR
from devkit.capacity.pricing import (
    Charge,
    condition_check_charges,
    query_charge,
    query_partition_key,
    scan_charges,
    transactional,
    write_charges,
)
from devkit.capacity.table_schema import TableSchema, key_text
from devkit.capacity.units import read_units
from devkit.semantics.model import ItemRef
from saga_index.store.dynamo import item_size

SINGLE_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})
READS = frozenset({"GetItem", "Query", "Scan"})
Items = Mapping[ItemRef, Mapping[str, Any] | None]


@dataclass(frozen=True)
class Action:
    """One write of a request: a single-item write, or one action of a transaction."""

    kind: (
        str  # PutItem, UpdateItem, DeleteItem, or a transaction's Put/Update/Delete/ConditionCheck
    )
    ref: ItemRef | None  # None: another table than the modelled one
    key: dict[str, Any]
    item: Mapping[str, Any] | None = None  # a Put's item
    # An Update's plain `SET name = :value` assignments (wire values): what the estimate can
    # know of its result before it runs (a GSI key it sets is the index write it will make).
    assigns: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Touch:
    operation: str
    actions: tuple[Action, ...] = field(default_factory=tuple)

    @property
    def refs(self) -> list[ItemRef]:
        return [a.ref for a in self.actions if a.ref is not None]


def item_ref(schema: TableSchema, table_name: str, key: Mapping[str, Any]) -> ItemRef | None:
    if table_name != schema.name:
        return None
    return (table_name, tuple(key_text(key.get(a)) for a in schema.key_attributes))


def touched(schema: TableSchema, operation: str, params: Mapping[str, Any]) -> Touch:
    """The writes of a request on the modelled table (none for a read or another operation)."""
    if operation in SINGLE_WRITES:
        return Touch(operation, (_action(schema, operation, params),))
    if operation in ("TransactWriteItems", "TransactGetItems"):
        actions = []
        for entry in params.get("TransactItems", []):
            ((kind, body),) = entry.items()
            actions.append(_action(schema, kind, body))
        return Touch(operation, tuple(actions))
    return Touch(operation)


def _action(schema: TableSchema, kind: str, body: Mapping[str, Any]) -> Action:
    item = body.get("Item")
    key = schema.key_of(item) if item is not None else dict(body["Key"])
    return Action(kind, item_ref(schema, body["TableName"], key), key, item, assigns_of(body))


_SET_CLAUSE = re.compile(r"\bSET\b(.*?)(?=\b(?:REMOVE|ADD|DELETE)\b|$)", re.IGNORECASE | re.DOTALL)
_ASSIGNMENT = re.compile(r"^\s*(#?[A-Za-z0-9_]+)\s*=\s*(:[A-Za-z0-9_]+)\s*$")


def assigns_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `SET name = :value` assignments of an update (others, e.g. if_not_exists or
    arithmetic, are left to the after-the-fact charge)."""
    expression = body.get("UpdateExpression")
    if not isinstance(expression, str):
        return {}
    names = body.get("ExpressionAttributeNames") or {}
    values = body.get("ExpressionAttributeValues") or {}
    assigned: dict[str, Any] = {}
    for clause in _SET_CLAUSE.findall(expression):
        for part in clause.split(","):
            match = _ASSIGNMENT.match(part)
            if match and match.group(2) in values:
                name = str(names.get(match.group(1), match.group(1)))
                assigned[name] = values[match.group(2)]
    return assigned


def write_cost(
    schema: TableSchema, touch: Touch, before: Items, after: Items | None = None
) -> list[Charge]:
    """The write units of `touch`'s writes: estimated from `before` alone (after None), or
    what they consumed given the items `after`. A transaction's table items are charged twice,
    its GSI writes once (devkit.capacity.pricing.transactional)."""
    charges: list[Charge] = []
    for action in touch.actions:
        if action.ref is None or action.kind == "Get":
            continue
        old = before.get(action.ref)
        if action.kind == "ConditionCheck":
            charges.extend(condition_check_charges(schema, old, action.key))
            continue
        if after is not None:
            new = after.get(action.ref)
        elif action.kind in ("PutItem", "Put"):
            new = action.item
        elif action.kind in ("DeleteItem", "Delete"):
            new = None
        else:
            # An update, before it ran: its plain assignments applied, else assumed unchanged.
            new = {**old, **action.assigns} if old is not None else None
        charges.extend(write_charges(schema, old, new, key=action.key))
    return charges if touch.operation in SINGLE_WRITES else transactional(schema, charges)


def read_cost(
    schema: TableSchema,
    operation: str,
    params: Mapping[str, Any],
    before: Items,
    response: Mapping[str, Any] | None = None,
) -> list[Charge]:
    """The read units of a GetItem (exact, from the item), or of a Query/Scan page: estimated
    at its least (one unit; response None) or from the items it returned."""
    if params.get("TableName") != schema.name or operation not in READS:
        return []
    consistent = bool(params.get("ConsistentRead", False)) and "IndexName" not in params
    if operation == "GetItem":
        ref = item_ref(schema, schema.name, params["Key"])
        assert ref is not None
        units = read_units(item_size(before.get(ref)), consistent=consistent)
        return [Charge(schema.name, ref[1][0], rcu=units)]
    index_name = params.get("IndexName")
    target = index_name or schema.name
    hash_key = schema.index(index_name).hash_key if index_name else schema.hash_key
    items: Sequence[Mapping[str, Any]] = (response or {}).get("Items") or []
    if operation == "Query":
        key = query_partition_key(params, hash_key) or ""
        return [query_charge(target, key, items, consistent=consistent)]
    if response is None:
        return []  # a Scan page's keys are not known before it runs
    return scan_charges(target, hash_key, items, consistent=consistent)
