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
from moto.dynamodb.models.dynamo_type import DynamoType

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
