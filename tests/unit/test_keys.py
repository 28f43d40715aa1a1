"""Build/parse round trips and refusals of every key string of a saga row (saga_index.index.keys).

The key formats are spelled out literally here on purpose: these tests pin the contract that
other languages and the stored rows depend on, so they must not be derived from the code under
test.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from saga_index.index import keys
from saga_index.index.errors import InvalidKeyError, InvalidPersonIdError
from saga_index.index.keys import (
    LEGACY_GSI4PK,
    SortKey,
    all_shard_gsi4pks,
    gsi4sk,
    is_sharded_gsi4pk,
    parse_gsi4pk,
    parse_gsi4sk,
    parse_saga_table_key,
    person_anomaly,
    person_prefix,
    saga_table_key,
    shard_gsi4pk_for_person,
    sharded_gsi4pk,
    table_key_of,
)
from saga_index.index.names import INDEX_NAME
from saga_index.index.shard import shard

OPENED_AT = "2026-07-10T12:00:00.000Z"

person_ids = st.text(min_size=1, max_size=40)
person_ids_with_hash = st.builds(
    lambda a, b: f"{a}#{b}", st.text(max_size=15), st.text(max_size=15)
)
opened_ats = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda moment: moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
saga_ids = st.text(min_size=1, max_size=40)


# --- constants ---------------------------------------------------------------------------------


def test_given_the_contract_then_index_and_legacy_key_names_are_the_production_ones() -> None:
    assert INDEX_NAME == "renewal-saga-person-index"
    assert LEGACY_GSI4PK == "RenewalSaga"


# --- GSI4PK ------------------------------------------------------------------------------------


@given(shard_number=st.integers(min_value=0, max_value=1023))
def test_given_a_shard_number_when_its_gsi4pk_is_built_then_it_is_decimal_and_parses_back(
    shard_number: int,
) -> None:
    key = sharded_gsi4pk(shard_number)

    assert key == "RenewalSaga#" + str(shard_number)
    assert parse_gsi4pk(key) == shard_number
    assert is_sharded_gsi4pk(key)


def test_given_the_legacy_gsi4pk_when_parsed_then_it_is_none_and_not_sharded() -> None:
    assert parse_gsi4pk("RenewalSaga") is None
    assert not is_sharded_gsi4pk("RenewalSaga")


@given(person_id=person_ids, shard_count=st.sampled_from([1, 2, 16, 64, 1024]))
def test_given_a_person_when_its_gsi4pk_is_built_then_it_parses_back_to_its_shard(
    person_id: str, shard_count: int
) -> None:
    key = shard_gsi4pk_for_person(person_id, shard_count)

    assert parse_gsi4pk(key) == shard(person_id, shard_count)


@pytest.mark.parametrize(
    "malformed",
    [
        "RenewalSaga#",  # no shard number
        "RenewalSaga#01",  # zero padding: one shard must have exactly one key
        "RenewalSaga#00",
        "RenewalSaga#x",
        "RenewalSaga#-1",
        "RenewalSaga#+1",
        "RenewalSaga# 1",
        "RenewalSaga#1 ",
        "RenewalSaga#1.0",
        "RenewalSaga#١",  # ARABIC-INDIC DIGIT ONE: int() would accept it, the contract does not
        "RenewalSaga#10000",
        "RenewalSaga#1#2",
        "Other",
        "",
        "renewalsaga",
        "RenewalSaga ",
        "RenewalSaga#1\n",
    ],
    ids=repr,
)
def test_given_a_malformed_gsi4pk_when_parsed_then_it_is_refused_naming_the_value(
    malformed: str,
) -> None:
    with pytest.raises(InvalidKeyError) as caught:
        parse_gsi4pk(malformed)

    assert repr(malformed) in str(caught.value)
    assert not is_sharded_gsi4pk(malformed)


@pytest.mark.parametrize("not_a_string", [None, 3, b"RenewalSaga#3"], ids=repr)
def test_given_a_non_string_gsi4pk_then_it_is_not_a_sharded_key(not_a_string: object) -> None:
    assert not is_sharded_gsi4pk(not_a_string)


def test_given_16_shards_when_all_keys_are_listed_then_they_are_16_distinct_keys_in_order() -> None:
    keys = all_shard_gsi4pks(16)

    assert keys == [f"RenewalSaga#{n}" for n in range(16)]
    assert len(set(keys)) == 16
    assert LEGACY_GSI4PK not in keys


def test_given_1_shard_when_all_keys_are_listed_then_there_is_one_key() -> None:
    assert all_shard_gsi4pks(1) == ["RenewalSaga#0"]


# --- GSI4SK ------------------------------------------------------------------------------------


@given(person_id=st.one_of(person_ids, person_ids_with_hash), opened_at=opened_ats)
def test_given_a_person_and_open_time_when_gsi4sk_is_built_then_it_parses_back(
    person_id: str, opened_at: str
) -> None:
    key = gsi4sk(person_id, opened_at)

    assert key == person_id + "#" + opened_at
    assert parse_gsi4sk(key) == SortKey(person_id=person_id, opened_at=opened_at)
    assert key.startswith(person_prefix(person_id))


@given(person_id=person_ids_with_hash, opened_at=opened_ats)
def test_given_a_person_id_containing_hash_when_gsi4sk_is_parsed_then_the_last_hash_splits_it(
    person_id: str, opened_at: str
) -> None:
    parsed = parse_gsi4sk(gsi4sk(person_id, opened_at))

    assert parsed.person_id == person_id
    assert parsed.opened_at == opened_at


def test_given_a_person_whose_id_extends_another_with_hash_then_parsing_tells_them_apart() -> None:
    # begins_with(GSI4SK, "a#") also matches "a#b#<openedAt>": a per-person read must compare the
    # parsed personId, which is exact.
    other_persons_key = gsi4sk("a#b", OPENED_AT)

    assert other_persons_key.startswith(person_prefix("a"))
    assert parse_gsi4sk(other_persons_key).person_id == "a#b"


@pytest.mark.parametrize(
    "malformed",
    ["alice", "", "#2026-07-10T12:00:00.000Z", "alice#", "#"],
    ids=repr,
)
def test_given_a_malformed_gsi4sk_when_parsed_then_it_is_refused_naming_the_value(
    malformed: str,
) -> None:
    with pytest.raises(InvalidKeyError) as caught:
        parse_gsi4sk(malformed)

    assert repr(malformed) in str(caught.value)


@pytest.mark.parametrize("bad_opened_at", ["", "2026#07", None, 20260710], ids=repr)
def test_given_an_invalid_open_time_when_gsi4sk_is_built_then_it_is_refused(
    bad_opened_at: Any,
) -> None:
    with pytest.raises(InvalidKeyError, match="openedAt"):
        gsi4sk("alice", bad_opened_at)


def test_given_an_invalid_person_when_gsi4sk_is_built_then_the_person_error_is_raised() -> None:
    with pytest.raises(InvalidPersonIdError):
        gsi4sk("", OPENED_AT)


# --- table key ---------------------------------------------------------------------------------


@given(saga_id=saga_ids)
def test_given_a_saga_id_when_its_table_key_is_built_then_it_parses_back(saga_id: str) -> None:
    key = saga_table_key(saga_id)

    assert key == {"PK": "RSAGA#" + saga_id, "SK": "META"}
    assert parse_saga_table_key(key["PK"], key["SK"]) == saga_id
    assert table_key_of({**key, "GSI4PK": "RenewalSaga#3"}) == ("RSAGA#" + saga_id, "META")


@pytest.mark.parametrize(
    ("pk", "sk"),
    [("RSAGA#", "META"), ("RSAGA#s-1", "OTHER"), ("PERSON#p-1", "META"), ("s-1", "META")],
)
def test_given_a_foreign_table_key_when_parsed_as_a_saga_key_then_it_is_refused(
    pk: str, sk: str
) -> None:
    with pytest.raises(InvalidKeyError, match="not a saga table key"):
        parse_saga_table_key(pk, sk)


@pytest.mark.parametrize("bad_saga_id", ["", None, 7], ids=repr)
def test_given_an_invalid_saga_id_when_its_table_key_is_built_then_it_is_refused(
    bad_saga_id: Any,
) -> None:
    with pytest.raises(InvalidKeyError, match="sagaId"):
        saga_table_key(bad_saga_id)


# --- person anomalies ---------------------------------------------------------------------------


_MISSING = object()


def _row(**attributes: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "PK": "RSAGA#s-1",
        "SK": "META",
        "entityType": "RenewalSaga",
        "personId": "alice",
        "GSI4PK": "RenewalSaga",
        "GSI4SK": "alice#" + OPENED_AT,
    }
    row.update(attributes)
    return {name: value for name, value in row.items() if value is not _MISSING}


@given(person_id=st.one_of(person_ids, person_ids_with_hash), opened_at=opened_ats)
def test_given_a_healthy_row_then_it_has_no_person_anomaly(person_id: str, opened_at: str) -> None:
    assert person_anomaly(_row(personId=person_id, GSI4SK=gsi4sk(person_id, opened_at))) is None


def test_given_a_row_without_gsi4sk_then_only_its_person_id_is_judged() -> None:
    assert person_anomaly(_row(GSI4SK=_MISSING)) is None


@pytest.mark.parametrize(
    ("person_id", "reason"),
    [
        (_MISSING, "must be a string"),
        (None, "must be a string"),
        (42, "must be a string"),
        ("", "non-empty"),
        ("\ud800", "not valid Unicode text"),
        ("p" * 1024, "too long"),
    ],
    ids=["missing", "null", "number", "empty", "lone-surrogate", "too-long"],
)
def test_given_a_row_with_an_unusable_person_id_then_the_anomaly_names_the_problem(
    person_id: object, reason: str
) -> None:
    anomaly = person_anomaly(_row(personId=person_id))

    assert anomaly is not None
    assert reason in anomaly


def test_given_a_row_whose_gsi4sk_belongs_to_another_person_then_the_anomaly_names_both() -> None:
    anomaly = person_anomaly(_row(personId="alice", GSI4SK="bob#" + OPENED_AT))

    assert anomaly is not None
    assert "'bob#" in anomaly
    assert "'alice'" in anomaly


def test_given_a_row_whose_gsi4sk_has_no_separator_then_the_anomaly_names_it() -> None:
    anomaly = person_anomaly(_row(GSI4SK="alice"))

    assert anomaly is not None
    assert "GSI4SK 'alice'" in anomaly


def test_given_a_row_whose_person_id_only_prefixes_its_gsi4sk_person_then_it_is_flagged() -> None:
    anomaly = person_anomaly(_row(personId="a", GSI4SK="a#b#" + OPENED_AT))

    assert anomaly is not None
    assert "personId 'a'" in anomaly


@pytest.mark.parametrize("bad", [-1, 1024, True, "3", 2.0])
def test_given_a_shard_number_outside_0_to_1023_when_building_a_key_then_it_is_refused(
    bad: object,
) -> None:
    with pytest.raises(InvalidKeyError, match="shard number"):
        keys.sharded_gsi4pk(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["RenewalSaga#1024", "RenewalSaga#5000"])
def test_given_a_shard_suffix_no_shard_count_can_produce_when_parsing_then_it_is_refused(
    bad: str,
) -> None:
    with pytest.raises(InvalidKeyError):
        keys.parse_gsi4pk(bad)


@pytest.mark.parametrize("bad", [None, 7, b"RenewalSaga"])
def test_given_a_non_string_key_when_parsing_then_an_invalid_key_error_names_it(
    bad: object,
) -> None:
    with pytest.raises(InvalidKeyError, match="must be a string"):
        keys.parse_gsi4pk(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError, match="must be a string"):
        keys.parse_gsi4sk(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidKeyError):
        keys.parse_saga_table_key(bad, "META")  # type: ignore[arg-type]


def test_given_a_sort_key_of_a_longer_person_id_then_the_anomaly_names_its_real_owner() -> None:
    reason = keys.person_anomaly({"personId": "a", "GSI4SK": "a#b#2026-01-01T00:00:00Z"})
    assert reason is not None
    assert "belongs to person 'a#b'" in reason


@given(person_ids.filter(lambda p: "#" not in p), st.sampled_from([1, 2, 16, 64, 1024]))
def test_given_a_person_then_its_open_index_key_is_its_gsi4_shard_under_the_open_prefix(
    person_id: str, shard_count: int
) -> None:
    expected = f"RenewalSagaOpen#{shard(person_id, shard_count)}"
    assert keys.Person.of(person_id).open_index_pk(shard_count) == expected
    assert expected in keys.all_open_index_pks(shard_count)


def test_given_a_shard_count_then_the_open_index_keys_are_each_shard_once_in_order() -> None:
    assert keys.all_open_index_pks(4) == [
        "RenewalSagaOpen#0",
        "RenewalSagaOpen#1",
        "RenewalSagaOpen#2",
        "RenewalSagaOpen#3",
    ]
    with pytest.raises(InvalidKeyError):
        keys.open_index_pk(1024)
