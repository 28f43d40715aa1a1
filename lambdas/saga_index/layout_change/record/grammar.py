"""The values a control item's attributes may hold, one grammar for every reader
(docs/control-contract.md, "The record"). record/schema.py says which attribute holds which kind
of value; this module says what a value of each kind is, as text on the wire, so that readers
in any language decide alike. docs/contract-vectors.json carries it (`grammar`), and
devkit.ts_record writes it into the TypeScript package with the attribute table.

Each rule is one a reader can apply the same way with its own language's tools:
  - a time is ASCII digits in a fixed width (a pattern with `[0-9]`, never a Unicode-aware
    digit class), a real instant of the proleptic Gregorian calendar, from year 0001;
  - an N is a plain decimal literal (`-`, ASCII digits, an optional fraction, an exponent of at
    most three digits): nothing around it, no `+`, no hexadecimal, no `NaN` or `Infinity`.
    DynamoDB itself returns nothing else; a hand-edited item (or a copy through another tool)
    may hold anything, and a language's own number parser accepts different extras;
  - an integer is an N whose exact decimal value is whole, at most 2^53 - 1 in magnitude (the
    largest any JavaScript number holds exactly, so no reader rounds it into another value);
  - a number (a rate) is an N whose nearest double is finite;
  - a layout kind, a direction, an open index state: exactly one of the words, as writers
    write them.
A NULL attribute counts as absent, like an attribute the item lacks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from boto3.dynamodb.types import TypeDeserializer

from saga_index.index import LEGACY_KIND, SHARDED_KIND
from saga_index.layout_change.record.open_index import OPEN_INDEX_STATES
from saga_index.layout_change.record.state import BackfillDirection

TIME_PATTERN: Final = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"
FIRST_YEAR: Final = 1
NUMBER_PATTERN: Final = r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?"
MAX_INTEGER: Final = 2**53 - 1
LAYOUT_KINDS: Final = (LEGACY_KIND, SHARDED_KIND)
DIRECTIONS: Final = tuple(direction.value for direction in BackfillDirection)

_NUMBER: Final = re.compile(NUMBER_PATTERN)
_TIME: Final = re.compile(TIME_PATTERN)


@dataclass(frozen=True)
class NumberText:
    """An N attribute whose text is not a number under the grammar, kept as it was stored so
    that the reader refuses it at its attribute, in the item's order, and shows it."""

    text: str

    def __repr__(self) -> str:
        return repr(self.text)


def is_time_text(text: str) -> bool:
    """The fixed-width shape of a record time (ASCII digits); the calendar is checked after."""
    return _TIME.fullmatch(text) is not None and int(text[:4]) >= FIRST_YEAR


def exact_number(text: str) -> Decimal | NumberText:
    """An N's text as its exact decimal value, or NumberText when the grammar refuses it.

    Decimal(text) without a context: boto3's deserializer rounds nothing but traps on more than
    38 digits or an exponent out of DynamoDB's range, which would fail the read with no refusal."""
    return Decimal(text) if _NUMBER.fullmatch(text) else NumberText(text)


class _ControlDeserializer(TypeDeserializer):
    def _deserialize_n(self, value: str) -> Decimal | NumberText:
        return exact_number(value)


_deserializer = _ControlDeserializer()


def deserialize_control_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A control item from DynamoDB's wire form, every N read under the grammar (a NumberText
    where it is not a number) so that the decoder refuses, never crashes, on a bad one."""
    return {name: _deserializer.deserialize(value) for name, value in item.items()}


def grammar_document() -> dict[str, Any]:
    """The grammar as data, for docs/contract-vectors.json and the TypeScript package."""
    return {
        "timePattern": TIME_PATTERN,
        "firstYear": FIRST_YEAR,
        "numberPattern": NUMBER_PATTERN,
        "maxInteger": MAX_INTEGER,
        "layoutKinds": list(LAYOUT_KINDS),
        "directions": list(DIRECTIONS),
        "openIndexStates": list(OPEN_INDEX_STATES),
    }
