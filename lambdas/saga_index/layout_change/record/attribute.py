"""The kinds of value a control item's attribute holds, and the shape of the attribute table
(record/schema.py holds the table itself: every STATE and HISTORY attribute)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final


class Value(StrEnum):
    """What an attribute holds: its DynamoDB type and the rule a reader checks."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    TIME = "time"  # UTC ISO-8601 with milliseconds and "Z" (record/times.py)
    STRINGS = "strings"
    LAYOUT = "layout"  # a layout's kind: "legacy" | "sharded"
    SHARD_COUNT = "shardCount"  # its N: a power of two from 1 to 1024, only for "sharded"
    PHASE = "phase"  # derived from two layouts
    DIRECTION = "direction"  # "forward" | "rollback"
    OPEN_INDEX = "openIndex"  # the open index's state: "off" | "adding" | "open" | "removing"

    @property
    def dynamo_type(self) -> str:
        return _DYNAMO_TYPES[self]


_DYNAMO_TYPES: Final = {
    Value.STRING: "S",
    Value.INTEGER: "N",
    Value.NUMBER: "N",
    Value.BOOLEAN: "BOOL",
    Value.TIME: "S",
    Value.STRINGS: "L",
    Value.LAYOUT: "S",
    Value.SHARD_COUNT: "N",
    Value.PHASE: "S",
    Value.DIRECTION: "S",
    Value.OPEN_INDEX: "S",
}
_DOC_TYPES: Final = {
    Value.TIME: "S (time)",
    Value.STRINGS: "L of S",
}


@dataclass(frozen=True)
class Attribute:
    """One attribute of a control item.

    `field` is the dataclass field it fills (for a shard count: the layout's field); None for a
    derived attribute, which is written from `written_from` and never read into a field.
    `optional`: an item may lack it; it then reads as `absent`."""

    name: str
    value: Value
    meaning: str
    field: str | None
    optional: bool = False
    absent: Any = None
    written_from: str | None = None
    count: str | None = None  # a LAYOUT's (an OPEN_INDEX's) shard-count attribute

    @property
    def source(self) -> str | None:
        """The dataclass attribute an encoder reads."""
        return self.written_from or self.field

    def doc_type(self, *, whole_part_optional: bool = False) -> str:
        shown = _DOC_TYPES.get(self.value, self.value.dynamo_type)
        return f"{shown}, opt." if self.optional or whole_part_optional else shown


@dataclass(frozen=True)
class Part:
    """Attributes written and read together: a transition, a lease, a completed backfill. A
    reader checks them in this order and refuses at the first that breaks the contract, so
    the layouts come first: an item that names no usable layout is refused for that.

    `present_if`: the attribute whose presence puts the whole part on the item (each of its
    attributes is then required); None for a part every item of its kind carries."""

    name: str
    items: tuple[str, ...]
    attributes: tuple[Attribute, ...]
    present_if: str | None = None

    def __post_init__(self) -> None:
        for attribute in self.attributes:
            if attribute.value in PAIRED and attribute.count is None:
                raise ValueError(f"{attribute.name} names no shard-count attribute")


# The kinds written with a shard-count attribute, read and written with it as one value.
PAIRED: Final = (Value.LAYOUT, Value.OPEN_INDEX)
