"""The expression builder: every request it makes defines exactly the placeholders its texts use
(DynamoDB rejects a request with an unused or an undefined one), and the "still what I read"
condition says what the re-stamp, the repair and the writer always said."""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saga_index.store.dynamo.expressions import (
    ROW_STILL_EXISTS,
    Expression,
    all_of,
    attribute_list,
    joined,
    on_index_partition,
    request_expressions,
    unchanged_since_read,
    update,
)

# A placeholder as DynamoDB reads one: "#" or ":" then letters, digits or "_".
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
_EXPRESSION_KEYS = (
    "ConditionExpression",
    "UpdateExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)


def used_placeholders(fields: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(names, values) the expression texts of a request use."""
    tokens = {
        token for key in _EXPRESSION_KEYS for token in _PLACEHOLDER.findall(fields.get(key, ""))
    }
    return {t for t in tokens if t.startswith("#")}, {t for t in tokens if t.startswith(":")}


def assert_exactly_covered(fields: Mapping[str, Any]) -> None:
    names, values = used_placeholders(fields)
    assert set(fields.get("ExpressionAttributeNames", {})) == names
    assert set(fields.get("ExpressionAttributeValues", {})) == values
    # DynamoDB rejects an empty map: an absent one is left out.
    assert fields.get("ExpressionAttributeNames", None) != {}
    assert fields.get("ExpressionAttributeValues", None) != {}


# ---- the property ------------------------------------------------------------------------------

_ATTRIBUTES = ("personId", "GSI4SK", "GSI4PK", "openedAt")
_wire = st.builds(lambda s: {"S": s}, st.text(max_size=8)) | st.builds(
    lambda n: {"N": str(n)}, st.integers(-5, 5)
)
_idents = st.from_regex(r"[a-z][A-Za-z0-9_]{0,6}", fullmatch=True)


@st.composite
def read_conditions(draw: st.DrawFn) -> Expression:
    attributes = draw(st.lists(st.sampled_from(_ATTRIBUTES), unique=True))
    read = {a: draw(_wire) for a in attributes if draw(st.booleans())}
    return unchanged_since_read(read, attributes)


@st.composite
def assignments(draw: st.DrawFn) -> list[Expression]:
    """SET actions of distinct attributes, each with its value given."""
    idents = draw(st.lists(_idents, min_size=1, max_size=4, unique=True))
    return [
        Expression(
            f"#set_{i} = :set_{i}", names={f"#set_{i}": f"attr-{i}"}, slots=frozenset({f":set_{i}"})
        ).given({f":set_{i}": draw(_wire)})
        for i in idents
    ]


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    parts: dict[str, Expression] = {}
    if draw(st.booleans()):
        parts["condition"] = draw(read_conditions())
    if draw(st.booleans()):
        removed = draw(st.lists(_idents, max_size=3, unique=True))
        remove = [attribute_list({f"#rm_{i}": f"gone-{i}" for i in removed})] if removed else []
        set_ = draw(assignments()) if draw(st.booleans()) or not remove else []
        parts["update"] = update(set_=set_, remove=remove)
    if draw(st.booleans()):
        parts["key_condition"] = on_index_partition(draw(st.text(min_size=1, max_size=8)))
    if draw(st.booleans()) or not parts:
        projected = draw(st.lists(st.sampled_from(_ATTRIBUTES), min_size=1, unique=True))
        parts["projection"] = attribute_list({f"#a{n}": a for n, a in enumerate(projected)})
    return request_expressions(**parts)


@given(requests())
def test_given_any_request_then_its_names_and_values_are_exactly_the_placeholders_used(
    fields: dict[str, Any],
) -> None:
    assert_exactly_covered(fields)


@given(read_conditions(), st.data())
def test_given_a_slot_left_without_a_value_then_no_request_is_made(
    condition: Expression, data: st.DataObject
) -> None:
    if not condition.slots:
        return
    dropped = data.draw(st.sampled_from(sorted(condition.slots)))
    unbound = Expression(
        condition.text,
        names=condition.names,
        slots=condition.slots,
        values={k: v for k, v in condition.values.items() if k != dropped},
    )
    with pytest.raises(ValueError, match=dropped):
        request_expressions(condition=unbound)


# ---- every fragment the code declares ------------------------------------------------------


_MODULES = (
    "saga_index.store.writer",
    "saga_index.store.repository",
    "saga_index.sweeps.claims",
    "saga_index.layout_change.backfill.row",
    "saga_index.layout_change.backfill.fence",
    "saga_index.store.repair",
    "saga_index.layout_change.checks.layout_probe",
    "saga_index.layout_change.lease.grant",
    "saga_index.layout_change.record.history",
    "saga_index.layout_change.record.store",
)


def declared_fragments() -> list[tuple[str, Expression]]:
    found = []
    for module_name in _MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if isinstance(value, Expression):
                found.append((f"{module_name}.{name}", value))
    return found


@pytest.mark.parametrize(("where", "fragment"), declared_fragments())
def test_given_a_declared_fragment_then_it_declares_exactly_the_placeholders_it_spells(
    where: str, fragment: Expression
) -> None:
    tokens = set(_PLACEHOLDER.findall(fragment.text))
    assert set(fragment.names) == {t for t in tokens if t.startswith("#")}, where
    assert fragment.slots == {t for t in tokens if t.startswith(":")}, where


def test_given_the_modules_then_fragments_were_found_in_each_writer() -> None:
    modules = {where.rsplit(".", 1)[0] for where, _ in declared_fragments()}
    assert {"saga_index.sweeps.claims", "saga_index.layout_change.record.store"} <= modules


# ---- "still what I read" --------------------------------------------------------------------


def test_given_a_restamp_read_then_the_condition_holds_the_key_person_and_sort_key() -> None:
    raw = {"GSI4PK": {"S": "RSAGA"}, "personId": {"S": "p-1"}, "GSI4SK": {"S": "p-1#t"}}
    fields = request_expressions(
        condition=unchanged_since_read(raw, ("GSI4PK", "personId", "GSI4SK"))
    )
    assert fields["ConditionExpression"] == (
        "attribute_exists(#pk) AND #gsi4pk = :readGsi4pk AND #personId = :readPersonId "
        "AND #gsi4sk = :readGsi4sk"
    )
    assert fields["ExpressionAttributeNames"] == {
        "#pk": "PK",
        "#gsi4pk": "GSI4PK",
        "#personId": "personId",
        "#gsi4sk": "GSI4SK",
    }
    # The typed values read, as they were: equality is byte-exact.
    assert fields["ExpressionAttributeValues"] == {
        ":readGsi4pk": {"S": "RSAGA"},
        ":readPersonId": {"S": "p-1"},
        ":readGsi4sk": {"S": "p-1#t"},
    }


def test_given_attributes_read_absent_then_they_must_still_be_absent() -> None:
    raw = {"openedAt": {"S": "2026-01-01T00:00:00.000Z"}, "personId": {"N": "7"}}
    condition = unchanged_since_read(raw, ("openedAt", "personId", "GSI4SK", "GSI4PK"))
    assert condition.text == (
        "attribute_exists(#pk) AND #openedAt = :readOpenedAt AND #personId = :readPersonId "
        "AND attribute_not_exists(#gsi4sk) AND attribute_not_exists(#gsi4pk)"
    )
    assert condition.values == {
        ":readOpenedAt": {"S": "2026-01-01T00:00:00.000Z"},
        ":readPersonId": {"N": "7"},
    }


def test_given_no_attribute_then_the_row_only_has_to_exist() -> None:
    assert unchanged_since_read({}, ()) == all_of(ROW_STILL_EXISTS)


def test_given_an_attribute_no_read_condition_holds_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="updatedAt"):
        unchanged_since_read({"updatedAt": {"S": "2026-01-01T00:00:00Z"}}, ("updatedAt",))


# ---- what the builder refuses ------------------------------------------------------------------


def test_given_one_placeholder_for_two_attributes_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="#k"):
        all_of(
            Expression("#k = :a", {"#k": "GSI4PK"}, frozenset({":a"})), attribute_list({"#k": "PK"})
        )


def test_given_one_slot_with_two_values_then_it_is_refused() -> None:
    one = Expression("#a = :v", {"#a": "a"}, frozenset({":v"})).given({":v": {"S": "x"}})
    other = Expression("#b = :v", {"#b": "b"}, frozenset({":v"})).given({":v": {"S": "y"}})
    with pytest.raises(ValueError, match=":v"):
        all_of(one, other)
    # The same value under one slot is one placeholder, defined once.
    same = Expression("#b = :v", {"#b": "b"}, frozenset({":v"})).given({":v": {"S": "x"}})
    assert all_of(one, same).values == {":v": {"S": "x"}}


def test_given_a_value_for_a_slot_the_text_does_not_use_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match=":other"):
        Expression("#a = :v", {"#a": "a"}, frozenset({":v"})).given({":other": {"S": "x"}})


@pytest.mark.parametrize("placeholder", ["pk", "#", "#a-b", ":pk", "# pk"])
def test_given_a_name_that_is_no_placeholder_then_it_is_refused(placeholder: str) -> None:
    with pytest.raises(ValueError, match="not a placeholder"):
        Expression("x", names={placeholder: "PK"})


def test_given_nothing_to_set_or_remove_then_no_update_is_made() -> None:
    with pytest.raises(ValueError, match="at least one attribute"):
        update()


def test_given_no_expression_then_no_request_is_made() -> None:
    with pytest.raises(ValueError, match="at least one expression"):
        request_expressions()
    with pytest.raises(ValueError, match="at least one part"):
        joined(" AND ", [])


# ---- the shapes ------------------------------------------------------------------------------


def test_given_sets_and_removes_then_the_update_sets_first() -> None:
    change = update(
        set_=[
            Expression("#a = :a", {"#a": "a"}, frozenset({":a"})).given({":a": {"N": "1"}}),
            Expression("#b = :b", {"#b": "b"}, frozenset({":b"})).given({":b": {"S": "x"}}),
        ],
        remove=[attribute_list({"#c": "c", "#d": "d"})],
    )
    assert change.text == "SET #a = :a, #b = :b REMOVE #c, #d"
    assert update(remove=[attribute_list({"#c": "c"})]).text == "REMOVE #c"


def test_given_a_fragment_with_an_or_then_grouping_keeps_it_whole_under_and() -> None:
    either = Expression("attribute_not_exists(#a) OR #a = :a", {"#a": "a"}, frozenset({":a"}))
    assert all_of(either.grouped(), ROW_STILL_EXISTS.grouped()).text == (
        "(attribute_not_exists(#a) OR #a = :a) AND (attribute_exists(#pk))"
    )


def test_given_a_query_of_one_partition_then_only_used_maps_are_sent() -> None:
    fields = request_expressions(key_condition=on_index_partition("RSAGA#3"))
    assert fields == {
        "KeyConditionExpression": "#gsi4pk = :pk",
        "ExpressionAttributeNames": {"#gsi4pk": "GSI4PK"},
        "ExpressionAttributeValues": {":pk": {"S": "RSAGA#3"}},
    }
    projection_only = request_expressions(projection=attribute_list({"#p": "personId"}))
    assert projection_only == {
        "ProjectionExpression": "#p",
        "ExpressionAttributeNames": {"#p": "personId"},
    }
