"""moto's DynamoDB attribute values compared without a detour for strings.

moto answers a Query by reading every item of the table and comparing each one's key attributes
with the request's (`DynamoType.__eq__`), then sorting the matches (`__lt__`); both compare
`cast_value`, a property that asks five type questions (is it a number, a set, a list, a map, a
null?) before it returns a string as it is. On the component tests' tables (hundreds of items,
thousands of Queries) those questions were the largest share of the CPU: about 40 % of the
drift-cursor tests'.

A value's size (a Query adds up every matching item's, twice) asks the same questions before
it measures a string. The same results, in the order that makes the common types cheap: a
string, a binary and a boolean are their value, a number its Decimal, and every other type
(sets, lists, maps, null) still goes through moto's property. Equality of two strings compares
the strings; a string's size is its UTF-8 length, a number's the length of its text.
tests/unit/test_moto_values.py checks the two agree on generated values.

Every Query and Scan also starts from the whole table in key order (`Table.all_items`), sorted
by comparing DynamoType keys: each comparison an equality then an order of two DynamoTypes.
Sorted here by the keys' cast values instead, the same order when every item's keys are of one
type (a table's key attributes are typed: moto refuses an item whose key has another type); a
table whose keys are not is sorted by moto's own. tests/unit/test_moto_values.py checks the
orders agree on generated tables.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_AS_IS = frozenset({"S", "B", "BOOL"})

_cast_value = DynamoType.cast_value
_eq = DynamoType.__eq__
_ne = DynamoType.__ne__
_size = DynamoType.size
_all_items = Table.all_items


def cast_value(self: DynamoType) -> Any:
    kind = self.type
    if kind in _AS_IS:
        return self.value
    if kind == "N":
        return Decimal(self.value)
    return _cast_value.fget(self)  # type: ignore[attr-defined]


def equal(self: DynamoType, other: DynamoType) -> bool:
    kind = self.type
    if kind != other.type:
        return False
    if kind == "S":
        return bool(self.value == other.value)
    return bool(self.cast_value == other.cast_value)


def not_equal(self: DynamoType, other: DynamoType) -> bool:
    return not equal(self, other)


def size(self: DynamoType) -> int:
    """moto's size of a value (a Query adds up every matching item's twice, attribute by
    attribute): a string's is its UTF-8 length and a number's the length of its text, as moto
    finds after asking whether it is a number, a set, a list, a map or a boolean."""
    kind, value = self.type, self.value
    if kind == "S" and type(value) is str:
        return len(value.encode("utf-8"))
    if kind == "N":
        return len(str(value))
    return int(_size(self))


def all_items(self: Table) -> list[Item]:
    """moto's all_items: every item of the table, in (hash key, range key) order."""
    items: list[Item] = []
    if self.range_key_attr:
        for hash_set in self.items.values():
            items.extend(hash_set.values())
    else:
        items.extend(self.items.values())  # type: ignore[arg-type]
    kinds = {
        (item.hash_key.type, None if item.range_key is None else item.range_key.type)
        for item in items
    }
    if len(kinds) > 1:
        return _all_items(self)
    if any(item.range_key is not None for item in items):
        return sorted(
            items,
            key=lambda x: (x.hash_key.cast_value, x.range_key.cast_value),  # type: ignore[union-attr]
        )
    return sorted(items, key=lambda x: x.hash_key.cast_value)


def install() -> None:
    """Use these from now on, in this process (idempotent)."""
    DynamoType.cast_value = property(cast_value)  # type: ignore[method-assign,assignment]
    DynamoType.__eq__ = equal  # type: ignore[method-assign,assignment]
    DynamoType.__ne__ = not_equal  # type: ignore[method-assign,assignment]
    DynamoType.size = size  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]


def moto_own_all_items() -> Any:
    """moto's own all_items (for the test that compares)."""
    return _all_items


def moto_own_size() -> Any:
    """moto's own size (for the test that compares)."""
    return _size


def moto_own() -> tuple[Any, Any, Any]:
    """moto's own cast_value property, __eq__ and __ne__ (for the test that compares)."""
    return _cast_value, _eq, _ne
