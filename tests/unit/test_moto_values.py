"""tests/support/moto_values.py compares and measures moto's attribute values as moto's own
methods do: the same cast values, equalities, orders and sizes on generated pairs (drawn from a
few values, so equal pairs are common)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from tests.support import moto_values

_text = st.sampled_from(["", "a", "b", "RenewalSaga#3", "é"])
_number = st.sampled_from(["0", "1", "1.0", "-2", "10"])
_leaf = st.one_of(
    _text.map(lambda v: {"S": v}),
    _number.map(lambda v: {"N": v}),
    st.sampled_from([b"", b"a"]).map(lambda v: {"B": v}),
    st.just({"NULL": True}),
    st.booleans().map(lambda v: {"BOOL": v}),
    st.lists(_text, min_size=1, max_size=2, unique=True).map(lambda v: {"SS": v}),
    st.lists(_number, min_size=1, max_size=2, unique=True).map(lambda v: {"NS": v}),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.dictionaries(_text, inner, max_size=2).map(lambda v: {"M": v}),
        st.lists(inner, max_size=2).map(lambda v: {"L": v}),
    ),
    max_leaves=6,
)


@contextmanager
def _moto_own() -> Iterator[None]:
    cast, eq, ne = moto_values.moto_own()
    with (
        mock.patch.object(DynamoType, "cast_value", cast),
        mock.patch.object(DynamoType, "__eq__", eq),
        mock.patch.object(DynamoType, "__ne__", ne),
        mock.patch.object(DynamoType, "size", moto_values.moto_own_size()),
    ):
        yield


def _compare(left: dict[str, Any], right: dict[str, Any]) -> tuple[Any, ...]:
    a, b = DynamoType(left), DynamoType(right)
    order: Any = None
    if a.type == b.type and a.type in {"S", "N", "B"}:
        order = (a < b, a <= b, a > b, a >= b)
    return (a.cast_value, b.cast_value, a == b, a != b, b == a, order, a.size(), b.size())


@settings(max_examples=300, deadline=None)
@given(left=_value, right=_value)
def test_cast_values_equality_and_order_are_moto_s_own(
    left: dict[str, Any], right: dict[str, Any]
) -> None:
    with _moto_own():
        own = _compare(left, right)
    moto_values.install()

    assert _compare(left, right) == own


def test_a_string_equals_only_the_same_string_of_the_same_type() -> None:
    moto_values.install()

    assert DynamoType({"S": "1"}) == DynamoType({"S": "1"})
    assert DynamoType({"S": "1"}) != DynamoType({"N": "1"})
    assert DynamoType({"N": "1"}) == DynamoType({"N": "1.0"})
    assert DynamoType({"S": "1"}) != DynamoType({"S": "1.0"})


_KEY_VALUES = {
    "S": st.sampled_from(["", "a", "b", "RenewalSaga#3", "RenewalSaga#10", "é"]).filter(bool),
    "N": st.sampled_from(["0", "1", "-2", "10", "2.5", "100"]),
    "B": st.sampled_from([b"a", b"b", b"ab", b"\x00"]),
}


@st.composite
def _tables(draw: st.DrawFn) -> tuple[str, str | None, list[dict[str, Any]]]:
    hash_type = draw(st.sampled_from(sorted(_KEY_VALUES)))
    range_type = draw(st.sampled_from([None, *sorted(_KEY_VALUES)]))
    keys = st.tuples(_KEY_VALUES[hash_type], _KEY_VALUES[range_type] if range_type else st.none())
    rows = draw(st.lists(keys, max_size=12, unique=True))
    items = []
    for hash_value, range_value in rows:
        item = {"h": {hash_type: hash_value}, "x": {"S": "payload"}}
        if range_type:
            item["r"] = {range_type: range_value}
        items.append(item)
    return hash_type, range_type, items


@settings(max_examples=40, deadline=None)
@given(table=_tables())
def test_a_table_s_items_come_in_moto_s_own_key_order(
    table: tuple[str, str | None, list[dict[str, Any]]],
) -> None:
    hash_type, range_type, items = table
    schema = [{"AttributeName": "h", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "h", "AttributeType": hash_type}]
    if range_type:
        schema.append({"AttributeName": "r", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "r", "AttributeType": range_type})
    moto_table = Table(
        "t", account_id=DEFAULT_ACCOUNT_ID, region="us-east-1", schema=schema, attr=attributes
    )
    for item in items:
        moto_table.put_item(item)  # moto's own put: it refuses a key of another type
    with mock.patch.object(Table, "all_items", moto_values.moto_own_all_items()):
        own = [item.to_json() for item in moto_table.all_items()]
    moto_values.install()

    assert [item.to_json() for item in moto_table.all_items()] == own
    assert len(own) == len(items)
