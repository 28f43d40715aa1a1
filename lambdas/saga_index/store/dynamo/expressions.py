"""The expressions of a DynamoDB request, and exactly the names and values they use.

An Expression is a text (a ConditionExpression, UpdateExpression, KeyConditionExpression,
FilterExpression or ProjectionExpression, or one clause of one) together with what its
placeholders stand for: `names` maps each "#name" placeholder it spells to the attribute, and
`slots` lists the ":value" placeholders whose values the request must supply (`given`, as typed
attribute values: {"S": ...}). A fragment is named for what it keeps true and reads as a
sentence; a write combines its fragments with `all_of`. `request_expressions` turns the
expressions of one request into its fields, with ExpressionAttributeNames and
ExpressionAttributeValues holding exactly the placeholders the texts use: DynamoDB rejects a
request that defines one it does not use, or uses one it does not define. Placeholders are
declared, never derived from a text.

The condition every write that decided from a read holds, "the row is still what I read", is
`unchanged_since_read`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from saga_index.index import INDEX_PARTITION_KEY, OPEN_INDEX_PARTITION_KEY

# The placeholders of the saga row's attributes a "still what I read" condition may hold: the
# name, and the slot of the value read.
_READ_PLACEHOLDERS: Final = {
    "personId": ("#personId", ":readPersonId"),
    "GSI4SK": ("#gsi4sk", ":readGsi4sk"),
    "GSI4PK": ("#gsi4pk", ":readGsi4pk"),
    "openedAt": ("#openedAt", ":readOpenedAt"),
    "state": ("#state", ":readState"),
    OPEN_INDEX_PARTITION_KEY: ("#openKey", ":readOpenKey"),
}


def _merged(first: Mapping[str, Any], second: Mapping[str, Any], what: str) -> dict[str, Any]:
    clashes = sorted(k for k in first.keys() & second.keys() if first[k] != second[k])
    if clashes:
        raise ValueError(
            f"the {what} placeholder(s) {clashes} stand for two different things: "
            f"{[(first[k], second[k]) for k in clashes]}"
        )
    return {**first, **second}


def _check_placeholder(placeholder: str, sigil: str) -> None:
    body = placeholder[1:]
    if not placeholder.startswith(sigil) or not body or not body.replace("_", "").isalnum():
        raise ValueError(
            f"{placeholder!r} is not a placeholder: {sigil!r} then letters, digits or '_'"
        )


@dataclass(frozen=True)
class Expression:
    """A text and what its placeholders stand for (see the module docstring)."""

    text: str
    names: Mapping[str, str] = field(default_factory=dict)
    slots: frozenset[str] = frozenset()
    # The values given so far, by slot, as typed attribute values.
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for placeholder in self.names:
            _check_placeholder(placeholder, "#")
        for slot in self.slots:
            _check_placeholder(slot, ":")
        unknown = sorted(set(self.values) - self.slots)
        if unknown:
            raise ValueError(f"values given for {unknown}, which {self.text!r} does not use")

    def given(self, values: Mapping[str, Any]) -> Expression:
        """This expression with values for (some of) its slots, as typed attribute values."""
        return replace(self, values=_merged(self.values, values, "value"))

    def grouped(self) -> Expression:
        """The same expression in parentheses, so an OR inside it binds before an outer AND."""
        return replace(self, text=f"({self.text})")


def attribute_fragment(text: str, *attributes: str, slots: Iterable[str] = ()) -> Expression:
    """A named fragment whose `text` spells each of `attributes` as "#" + its name and uses the
    value placeholders `slots`."""
    return Expression(text, names={f"#{a}": a for a in attributes}, slots=frozenset(slots))


def attribute_list(placeholders: Mapping[str, str]) -> Expression:
    """A comma-separated list of attribute names (a ProjectionExpression, or the attributes of
    a REMOVE): `placeholders` maps each placeholder to its attribute, in order."""
    return Expression(", ".join(placeholders), names=dict(placeholders))


def joined(separator: str, parts: Iterable[Expression]) -> Expression:
    """The parts' texts joined by `separator`, with all their names, slots and values."""
    parts = list(parts)
    if not parts:
        raise ValueError("nothing to join: an expression needs at least one part")
    attribute_names: dict[str, str] = {}
    values: dict[str, Any] = {}
    for part in parts:
        attribute_names = _merged(attribute_names, part.names, "name")
        values = _merged(values, part.values, "value")
    return Expression(
        separator.join(part.text for part in parts),
        names=attribute_names,
        slots=frozenset().union(*(part.slots for part in parts)),
        values=values,
    )


def all_of(*fragments: Expression) -> Expression:
    """One condition that holds when every fragment holds."""
    return joined(" AND ", fragments)


def all_conditions(*fragments: Expression) -> Expression:
    """Fragments joined with AND, each parenthesised (a fragment may hold an OR)."""
    return all_of(*(f.grouped() for f in fragments))


def update(*, set_: Sequence[Expression] = (), remove: Sequence[Expression] = ()) -> Expression:
    """An UpdateExpression: its SET actions, then its REMOVE ones (attribute names)."""
    clauses = []
    if set_:
        clauses.append(joined(" ", [Expression("SET"), joined(", ", set_)]))
    if remove:
        clauses.append(joined(" ", [Expression("REMOVE"), joined(", ", remove)]))
    if not clauses:
        raise ValueError("an update must set or remove at least one attribute")
    return joined(" ", clauses)


# UpdateItem creates a missing row; this turns a write to a deleted row into a failed condition
# instead, so nothing a writer read can be re-created after someone deleted it.
ROW_STILL_EXISTS: Final = Expression("attribute_exists(#pk)", names={"#pk": "PK"})


def unchanged_since_read(read: Mapping[str, Any], attributes: Sequence[str]) -> Expression:
    """The row still exists and each of `attributes` is as `read` (the item as read, typed
    attribute values): equal to the value read (typed values compare byte-exactly), or still
    absent when the read had none. A writer that decided from those values holds this, so a
    concurrent writer wins and a deleted row is never re-created. `attributes`: of personId,
    GSI4SK, GSI4PK, openedAt, state and OpenSagaPK, in the order the clauses are written."""
    clauses = [ROW_STILL_EXISTS]
    for attribute in attributes:
        if attribute not in _READ_PLACEHOLDERS:
            raise ValueError(
                f"{attribute!r} is none of the attributes a read condition holds: "
                f"{sorted(_READ_PLACEHOLDERS)}"
            )
        name, slot = _READ_PLACEHOLDERS[attribute]
        if attribute in read:
            # Someone else's write since the read (a re-stamp, a repair, a new person) wins.
            clause = Expression(
                f"{name} = {slot}", names={name: attribute}, slots=frozenset({slot})
            ).given({slot: read[attribute]})
        else:
            # Read without it: it must still be absent.
            clause = Expression(f"attribute_not_exists({name})", names={name: attribute})
        clauses.append(clause)
    return all_of(*clauses)


def on_index_partition(gsi4pk: str) -> Expression:
    """The key condition of a Query of one GSI4 partition, `gsi4pk`."""
    return Expression(
        "#gsi4pk = :pk", names={"#gsi4pk": INDEX_PARTITION_KEY}, slots=frozenset({":pk"})
    ).given({":pk": {"S": gsi4pk}})


def on_open_index_key(key: str) -> Expression:
    """The key condition of a Query of one key of the sparse open-saga index."""
    return Expression(
        "#open = :pk", names={"#open": OPEN_INDEX_PARTITION_KEY}, slots=frozenset({":pk"})
    ).given({":pk": {"S": key}})


def request_expressions(
    *,
    condition: Expression | None = None,
    update: Expression | None = None,
    key_condition: Expression | None = None,
    filter: Expression | None = None,
    projection: Expression | None = None,
) -> dict[str, Any]:
    """The expression fragments of one request: each expression given, under its request key,
    with ExpressionAttributeNames and ExpressionAttributeValues (each left out when empty:
    DynamoDB rejects an empty map). ValueError when a slot has no value, or one placeholder
    stands for two attributes or values."""
    parts = {
        "ConditionExpression": condition,
        "UpdateExpression": update,
        "KeyConditionExpression": key_condition,
        "FilterExpression": filter,
        "ProjectionExpression": projection,
    }
    given = {key: part for key, part in parts.items() if part is not None}
    if not given:
        raise ValueError("a request needs at least one expression")
    whole = joined(" ", given.values())
    missing = sorted(whole.slots - set(whole.values))
    if missing:
        raise ValueError(f"no value given for {missing} of {whole.text!r}")
    fragments: dict[str, Any] = {key: part.text for key, part in given.items()}
    if whole.names:
        fragments["ExpressionAttributeNames"] = dict(whole.names)
    if whole.values:
        fragments["ExpressionAttributeValues"] = dict(whole.values)
    return fragments
