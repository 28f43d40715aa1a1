"""tests/support/moto_responses.py serves moto's DynamoDB answers byte for byte as moto's own
serialiser does: the same output shapes serialised both ways, on generated items."""

from __future__ import annotations

import base64
import json
from typing import Any
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from moto.core.serialize import BaseJSONSerializer, JSONSerializer, XFormedAttributePicker
from moto.core.utils import get_service_model

from tests.support import moto_responses

_text = st.text(max_size=12)
_number = st.integers(-(10**12), 10**12).map(str) | st.decimals(
    allow_nan=False, allow_infinity=False, places=3
).map(str)
_leaf = st.one_of(
    _text.map(lambda v: {"S": v}),
    _number.map(lambda v: {"N": v}),
    st.just({"NULL": True}),
    st.booleans().map(lambda v: {"BOOL": v}),
    st.lists(_text, min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    st.lists(_number, min_size=1, max_size=3, unique=True).map(lambda v: {"NS": v}),
    # What the copy does not cover, for the walk: binaries as moto holds them (base64 text).
    st.binary(max_size=6).map(lambda v: {"B": base64.b64encode(v).decode()}),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.dictionaries(_text, inner, max_size=3).map(lambda v: {"M": v}),
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
    ),
    max_leaves=12,
)
_item = st.dictionaries(st.text(min_size=1, max_size=8), _value, max_size=6)


def _body(operation: str, result: Any) -> Any:
    model = get_service_model("dynamodb")
    serializer = JSONSerializer(
        operation_model=model.operation_model(operation), value_picker=XFormedAttributePicker()
    )
    return json.loads(serializer.serialize(result)["body"])


def _both(operation: str, result: Any) -> tuple[Any, Any]:
    with mock.patch.object(
        BaseJSONSerializer, "_serialize_type_structure", moto_responses.walk_only()
    ):
        walked = _body(operation, result)
    moto_responses.install()
    return walked, _body(operation, result)


@settings(max_examples=40, deadline=None)
@given(items=st.lists(_item, max_size=4), last=_item)
def test_a_query_answer_is_the_same_both_ways(items: list[dict[str, Any]], last: Any) -> None:
    result = {"Items": items, "Count": len(items), "ScannedCount": 7, "LastEvaluatedKey": last}

    walked, copied = _both("Query", result)

    assert copied == walked


@settings(max_examples=20, deadline=None)
@given(item=_item)
def test_an_item_and_an_update_answer_are_the_same_both_ways(item: dict[str, Any]) -> None:
    assert _both("GetItem", {"Item": item})[1] == _both("GetItem", {"Item": item})[0]
    walked, copied = _both("UpdateItem", {"Attributes": item})
    assert copied == walked


def test_a_value_the_copy_does_not_cover_goes_through_the_walk() -> None:
    # A number set holding a number (not its string), a value with two types, a binary set, a
    # map with an empty name: the walk stringifies, keeps both, encodes and merges the empty
    # name's value into the map; the copy must not answer for them.
    odd = {
        "a": {"NS": [1, 2]},
        "b": {"S": "x", "N": "1"},
        "c": {"BS": ["aGk="]},
        "d": {"M": {"": {"S": "merged"}}},
    }
    for value in odd.values():
        try:
            moto_responses.wire_copy(value)
        except moto_responses._NotPlain:
            continue
        raise AssertionError(f"copied {value}")

    walked, copied = _both("GetItem", {"Item": odd})

    assert copied == walked
    assert walked["Item"]["a"] == {"NS": ["1", "2"]}
