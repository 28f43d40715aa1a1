"""Items between DynamoDB's wire shape ({"S": ...}) and Python values, and on to plain JSON."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import Binary, TypeDeserializer, TypeSerializer

_deserializer = TypeDeserializer()
_serializer = TypeSerializer()


def deserialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def serialize(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items()}


def to_plain_json(value: Any) -> Any:
    """Deserialised values as plain JSON: Decimal to int/float, sets to lists, bytes to base64."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {str(k): to_plain_json(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((to_plain_json(v) for v in value), key=repr)
    if isinstance(value, list | tuple):
        return [to_plain_json(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Binary):
        return base64.b64encode(value.value).decode("ascii")
    return value
