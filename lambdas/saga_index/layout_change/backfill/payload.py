"""The wire shapes every backfill payload is built of: a camelCase JSON model (the Step
Functions and CLI contracts), a table key, a Scan cursor and a layout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import Layout, LayoutKind
from saga_index.index.names import TABLE_PARTITION_KEY, TABLE_SORT_KEY

# The table's key schema (infra/table.py): the cursor is a key of this shape.
TABLE_KEY_ATTRIBUTES = (TABLE_PARTITION_KEY, TABLE_SORT_KEY)


class Payload(BaseModel):
    """A payload's model: camelCase in JSON, snake_case in Python, nothing unknown accepted."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


TableKey = dict[str, str]
Cursor = dict[str, dict[str, str]]


def cursor_of(raw: Mapping[str, Any]) -> Cursor:
    """The table key of a row the Scan returned, as a cursor (ExclusiveStartKey) to resume at."""
    return {name: dict(raw[name]) for name in TABLE_KEY_ATTRIBUTES}


def plain_key(raw: Mapping[str, Any]) -> TableKey:
    """The table key of a row read in the wire shape, as plain strings (what reports carry)."""
    return {name: str(raw[name].get("S", raw[name])) for name in TABLE_KEY_ATTRIBUTES}


def check_cursor(value: Cursor | None) -> Cursor | None:
    """A cursor as a payload carries it (the segment's ExclusiveStartKey), or ValueError."""
    if value is None:
        return None
    shape = '{"PK": {"S": "..."}, "SK": {"S": "..."}}'
    if set(value) != set(TABLE_KEY_ATTRIBUTES):
        raise ValueError(
            f"cursor must be the segment's ExclusiveStartKey {shape} or null; "
            f"got attributes {sorted(value)}"
        )
    for name in TABLE_KEY_ATTRIBUTES:
        attribute = value[name]
        if set(attribute) != {"S"} or not isinstance(attribute["S"], str) or not attribute["S"]:
            raise ValueError(
                f"cursor.{name} must be a typed string value {{'S': '...'}} as in {shape}; "
                f"got {attribute!r}"
            )
    return value


class LayoutSpec(Payload):
    """A layout in a payload: {"kind": "legacy"} or {"kind": "sharded", "shardCount": N}."""

    kind: LayoutKind
    shard_count: int | None = None

    @model_validator(mode="after")
    def _valid(self) -> LayoutSpec:
        try:
            self.layout()
        except InvalidInputError as err:
            raise ValueError(str(err)) from None
        return self

    @classmethod
    def of(cls, layout: Layout) -> LayoutSpec:
        return cls(kind=layout.kind, shard_count=layout.shard_count)

    def layout(self) -> Layout:
        return Layout(self.kind, self.shard_count)
