"""The size of an item, by DynamoDB's documented rule (CapacityUnitCalculations.html). Estimate
item and page sizes with this rule, never with repr() or JSON lengths.

item size = sum over attributes of UTF-8 name length + value size (strings: UTF-8 bytes;
numbers: 1 byte per two significant digits + 1; binary: raw bytes; null/bool: 1; list/map:
3 bytes + 1 byte per element + the elements; sets: the sum of their elements, an assumption
the documentation does not spell out).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: 1 byte per two significant digits, plus 1 byte."""
    try:
        value = Decimal(text)
    except InvalidOperation as err:
        raise ValueError(f"not a DynamoDB number: {text!r}") from err
    digits = value.normalize().as_tuple().digits if value != 0 else (0,)
    significant = len(digits)
    return (significant + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one AttributeValue in the low-level wire shape ({"S": ...}, {"M": {...}}, ...)."""
    if len(value) != 1:
        raise ValueError(f"an AttributeValue has exactly one type key, got {sorted(value)}")
    ((kind, payload),) = value.items()
    if kind == "S":
        return len(str(payload).encode("utf-8"))
    if kind == "N":
        return number_size(str(payload))
    if kind == "B":
        return len(raw_bytes(payload))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(member).encode("utf-8")) for member in payload)
    if kind == "NS":
        return sum(number_size(str(member)) for member in payload)
    if kind == "BS":
        return sum(len(raw_bytes(member)) for member in payload)
    if kind == "L":
        return 3 + sum(1 + value_size(member) for member in payload)
    if kind == "M":
        return 3 + sum(1 + attribute_size(name, member) for name, member in payload.items())
    raise ValueError(f"unknown AttributeValue type {kind!r}")


def attribute_size(name: str, value: Mapping[str, Any]) -> int:
    return len(name.encode("utf-8")) + value_size(value)


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes of an item in the wire shape: the sum of its attribute names and values."""
    if not item:
        return 0
    return sum(attribute_size(name, value) for name, value in item.items())


def raw_bytes(payload: Any) -> bytes:
    # botocore hands blobs to callers as bytes; a base64 string is what the wire carries.
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return base64.b64decode(str(payload))
