"""What the meter knows of a table: its keys, its GSIs' keys and projections, and key values."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devkit.capacity.errors import MeterError
from saga_index.store.dynamo import raw_bytes


@dataclass(frozen=True)
class IndexSchema:
    name: str
    hash_key: str
    range_key: str | None
    projection_type: str = "ALL"
    non_key_attributes: tuple[str, ...] = ()

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)


@dataclass(frozen=True)
class TableSchema:
    """What the meter needs to know of a table: its keys and its GSIs' keys and projections."""

    name: str
    hash_key: str
    range_key: str | None
    indexes: tuple[IndexSchema, ...] = ()

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)

    def index(self, name: str) -> IndexSchema:
        for index in self.indexes:
            if index.name == name:
                return index
        raise MeterError(f"table {self.name!r} has no index {name!r}")

    def key_of(self, item: Mapping[str, Any]) -> dict[str, Any]:
        missing = [a for a in self.key_attributes if a not in item]
        if missing:
            raise MeterError(f"item lacks the table key attribute(s) {missing} of {self.name!r}")
        return {a: item[a] for a in self.key_attributes}

    def index_entry(
        self, index: IndexSchema, item: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The entry `item` has in `index` (its projected attributes), or None when it has none.

        A GSI holds only the items that carry every one of its key attributes (sparse index).
        """
        if not item or any(a not in item for a in index.key_attributes):
            return None
        if index.projection_type == "ALL":
            return dict(item)
        keep = set(self.key_attributes) | set(index.key_attributes)
        if index.projection_type == "INCLUDE":
            keep |= set(index.non_key_attributes)
        return {name: value for name, value in item.items() if name in keep}

    @classmethod
    def from_create_kwargs(cls, kwargs: Mapping[str, Any]) -> TableSchema:
        """From boto3 `create_table` kwargs (devkit.schema.table_create_kwargs)."""
        hash_key, range_key = _key_schema(kwargs["KeySchema"])
        indexes = []
        for index in kwargs.get("GlobalSecondaryIndexes", []):
            index_hash, index_range = _key_schema(index["KeySchema"])
            projection = index.get("Projection", {})
            indexes.append(
                IndexSchema(
                    name=index["IndexName"],
                    hash_key=index_hash,
                    range_key=index_range,
                    projection_type=projection.get("ProjectionType", "ALL"),
                    non_key_attributes=tuple(projection.get("NonKeyAttributes", ())),
                )
            )
        return cls(
            name=kwargs["TableName"],
            hash_key=hash_key,
            range_key=range_key,
            indexes=tuple(indexes),
        )

    @classmethod
    def from_template(cls, template: Mapping[str, Any], table_name: str) -> TableSchema:
        """From the CDK-synthesised template: the meter prices the table that deploys."""
        from devkit.schema import table_create_kwargs

        return cls.from_create_kwargs(table_create_kwargs(template, table_name))


def _key_schema(elements: Sequence[Mapping[str, str]]) -> tuple[str, str | None]:
    hash_key = next(e["AttributeName"] for e in elements if e["KeyType"] == "HASH")
    range_key = next((e["AttributeName"] for e in elements if e["KeyType"] == "RANGE"), None)
    return hash_key, range_key


def key_text(value: Mapping[str, Any] | None) -> str:
    """A partition key value as text: the string, the number, or base64 of the bytes."""
    if not value:
        return ""
    ((kind, payload),) = value.items()
    if kind == "B":
        return base64.b64encode(raw_bytes(payload)).decode("ascii")
    return str(payload)
