"""moto's DynamoDB answers, serialised without walking the model for every attribute value.

moto 5.2 builds each JSON answer by walking the operation's output shape: for every member of
every structure it asks five alias providers which key of the Python object holds the member,
and an AttributeValue is a structure of ten members (S, N, B, SS, NS, BS, M, L, NULL, BOOL). An
item of a dozen attributes costs a few hundred such look-ups; in the protocol simulator, answers
took about 40 % of the run's CPU, and the component tests are made of moto requests.

moto's DynamoDB model hands the serialiser attribute values that are already in wire form
({"S": "x"}, {"M": {...}}, ...). For those made only of strings, numbers, string and number
sets, booleans, nulls, maps and lists, the walk's result is the value itself, copied: each is
served that way here. Any other value (a binary, a set holding something not a string, a map
with an empty attribute name, a malformed value) goes through moto's walk as before.
tests/unit/test_moto_responses.py checks that the two give the same answers on generated items.
"""

from __future__ import annotations

from typing import Any

from moto.core.serialize import BaseJSONSerializer

_STRINGS = frozenset({"S", "N"})
_STRING_SETS = frozenset({"SS", "NS"})
_FLAGS = frozenset({"NULL", "BOOL"})


class _NotPlain(Exception):
    """An attribute value the copy does not cover: moto's walk serialises it."""


def wire_copy(value: Any) -> dict[str, Any]:
    """The attribute value `value` as moto's walk would serialise it, or _NotPlain."""
    if type(value) is not dict or len(value) != 1:
        raise _NotPlain
    ((kind, inner),) = value.items()
    if kind in _STRINGS and type(inner) is str:
        return {kind: inner}
    if kind in _FLAGS and type(inner) is bool:
        return {kind: inner}
    if kind in _STRING_SETS and type(inner) is list and all(type(v) is str for v in inner):
        return {kind: list(inner)}
    # An empty name is left to the walk, which takes an empty key for "no key" and merges the
    # value into the map around it (DynamoDB refuses empty attribute names anyway).
    if kind == "M" and type(inner) is dict and all(inner):
        return {"M": {name: wire_copy(v) for name, v in inner.items()}}
    if kind == "L" and type(inner) is list:
        return {"L": [wire_copy(v) for v in inner]}
    raise _NotPlain


_walk = BaseJSONSerializer._serialize_type_structure


def _serialize_type_structure(
    self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str
) -> None:
    if key and shape.name == "AttributeValue" and self.service_model.service_name == "dynamodb":
        try:
            copied = wire_copy(value)
        except _NotPlain:
            pass
        else:
            self._default_serialize(serialized, copied, shape, key)
            return
    _walk(self, serialized, value, shape, key)


def install() -> None:
    """Serve plain attribute values as copies from now on, in this process (idempotent)."""
    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]


def walk_only() -> Any:
    """moto's own structure serialiser (for the test that compares the two)."""
    return _walk
