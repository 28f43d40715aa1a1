"""Properties of index.shard and of the personId / shard-count validation it relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from saga_index.index.errors import InvalidPersonIdError, InvalidShardCountError
from saga_index.index.keys import (
    all_shard_gsi4pks,
    gsi4sk,
    person_prefix,
    shard_gsi4pk_for_person,
    validate_person_id,
)
from saga_index.index.shard import DEFAULT_SHARD_COUNT, shard, validate_shard_count

VALID_SHARD_COUNTS = [2**k for k in range(11)]  # 1 .. 1024
# Strings hypothesis draws by default never contain surrogates, so they are all valid UTF-8.
person_ids = st.text(min_size=1, max_size=40)
shard_counts = st.sampled_from(VALID_SHARD_COUNTS)
# 24 bytes, the longest openedAt production writes (millisecond precision).
OPENED_AT = "2026-07-10T12:00:00.000Z"
KEY_LIMIT = 1024


def _is_valid_shard_count(value: int) -> bool:
    return 1 <= value <= 1024 and value & (value - 1) == 0


# --- the shard function ------------------------------------------------------------------------


@given(person_id=person_ids, shard_count=shard_counts)
def test_given_any_person_and_valid_n_when_sharded_then_shard_is_in_zero_to_n(
    person_id: str, shard_count: int
) -> None:
    result = shard(person_id, shard_count)

    assert isinstance(result, int)
    assert 0 <= result < shard_count


@given(person_id=person_ids, shard_count=shard_counts)
def test_given_the_same_person_twice_when_sharded_then_the_shard_is_the_same(
    person_id: str, shard_count: int
) -> None:
    # An equal but distinct string object: the shard depends on the characters, not identity.
    copy = "".join(list(person_id))

    assert shard(person_id, shard_count) == shard(copy, shard_count)
    assert shard(person_id, shard_count) == shard(person_id, shard_count)


@given(person_id=person_ids)
def test_given_no_shard_count_when_sharded_then_the_default_of_16_is_used(person_id: str) -> None:
    assert DEFAULT_SHARD_COUNT == 16
    assert shard(person_id) == shard(person_id, 16)


@given(person_id=person_ids, shard_count=st.sampled_from(VALID_SHARD_COUNTS[:-1]))
def test_given_n_doubled_when_resharded_then_each_shard_splits_into_itself_or_itself_plus_n(
    person_id: str, shard_count: int
) -> None:
    before = shard(person_id, shard_count)

    after = shard(person_id, 2 * shard_count)

    assert after in (before, before + shard_count)


def _vector_persons() -> list[str]:
    path = Path(__file__).resolve().parents[2] / "docs" / "shard-vectors.json"
    return sorted({v["personId"] for v in json.loads(path.read_text())["vectors"]})


VECTOR_PERSONS = _vector_persons()


@pytest.mark.parametrize("shard_count", VALID_SHARD_COUNTS[:-1])
def test_given_every_vector_person_when_n_doubles_then_its_shard_is_s_or_s_plus_n(
    shard_count: int,
) -> None:
    # The reason N can change (docs/shard-contract.md): a split moves a row from key s to key
    # s + N or leaves it, and a merge is the same move backwards, for EVERY person.
    assert VECTOR_PERSONS
    for person_id in VECTOR_PERSONS:
        before = shard(person_id, shard_count)
        after = shard(person_id, 2 * shard_count)
        assert after in (before, before + shard_count), (person_id, shard_count)
        assert after % shard_count == before  # the merge back lands where the split began


@given(person_id=person_ids, shard_count=shard_counts)
def test_given_any_valid_n_then_the_shard_is_the_largest_n_shard_reduced_mod_n(
    person_id: str, shard_count: int
) -> None:
    assert shard(person_id, shard_count) == shard(person_id, 1024) % shard_count


@given(person_id=person_ids, shard_count=shard_counts)
def test_given_any_person_then_its_gsi4pk_is_one_of_the_n_shard_keys(
    person_id: str, shard_count: int
) -> None:
    assert shard_gsi4pk_for_person(person_id, shard_count) in all_shard_gsi4pks(shard_count)


# --- invalid shard counts ----------------------------------------------------------------------

INVALID_SHARD_COUNTS: list[object] = [
    0,
    -1,
    -16,
    3,
    12,
    1023,
    1025,
    2048,
    1.0,
    16.0,
    True,
    False,
    "16",
    None,
]


def _assert_refused_naming(value: object, err: InvalidShardCountError) -> None:
    message = str(err)
    assert repr(value) in message
    assert "power of two" in message


@pytest.mark.parametrize("bad", INVALID_SHARD_COUNTS, ids=repr)
def test_given_an_invalid_n_when_used_anywhere_then_it_is_refused_naming_the_value(
    bad: object,
) -> None:
    for use in (
        lambda: validate_shard_count(bad),
        lambda: shard("alice", bad),  # type: ignore[arg-type]
        lambda: shard_gsi4pk_for_person("alice", bad),  # type: ignore[arg-type]
        lambda: all_shard_gsi4pks(bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidShardCountError) as caught:
            use()
        _assert_refused_naming(bad, caught.value)


@given(bad=st.integers().filter(lambda n: not _is_valid_shard_count(n)))
@example(bad=0)
@example(bad=1536)
def test_given_any_integer_that_is_not_a_power_of_two_up_to_1024_then_n_is_refused(
    bad: int,
) -> None:
    with pytest.raises(InvalidShardCountError) as caught:
        shard("alice", bad)

    _assert_refused_naming(bad, caught.value)


@given(bad=st.floats(allow_nan=False))
def test_given_a_float_n_even_a_whole_one_then_it_is_refused(bad: float) -> None:
    with pytest.raises(InvalidShardCountError) as caught:
        validate_shard_count(bad)

    _assert_refused_naming(bad, caught.value)


@pytest.mark.parametrize("good", VALID_SHARD_COUNTS)
def test_given_every_power_of_two_up_to_1024_then_n_is_accepted(good: int) -> None:
    assert validate_shard_count(good) == good


# --- invalid personIds -------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [None, 42, 1.5, b"alice", ["alice"], {"id": "alice"}], ids=repr)
def test_given_a_non_string_person_id_when_used_anywhere_then_it_is_refused(bad: object) -> None:
    for use in (
        lambda: validate_person_id(bad),
        lambda: shard(bad),  # type: ignore[arg-type]
        lambda: shard_gsi4pk_for_person(bad, 16),  # type: ignore[arg-type]
        lambda: gsi4sk(bad, OPENED_AT),  # type: ignore[arg-type]
        lambda: person_prefix(bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidPersonIdError, match="string") as caught:
            use()
        assert repr(bad) in str(caught.value)


def test_given_an_empty_person_id_when_used_anywhere_then_it_is_refused_as_empty() -> None:
    for use in (
        lambda: validate_person_id(""),
        lambda: shard(""),
        lambda: shard_gsi4pk_for_person("", 16),
        lambda: gsi4sk("", OPENED_AT),
        lambda: person_prefix(""),
    ):
        with pytest.raises(InvalidPersonIdError, match="non-empty"):
            use()


@given(
    before=st.text(max_size=10),
    surrogate=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    after=st.text(max_size=10),
)
def test_given_a_person_id_with_a_lone_surrogate_then_it_is_refused_as_not_unicode_text(
    before: str, surrogate: str, after: str
) -> None:
    # Python cannot encode it; JavaScript would silently hash U+FFFD instead: refuse it.
    person_id = before + surrogate + after

    for use in (
        lambda: validate_person_id(person_id),
        lambda: shard(person_id),
        lambda: shard_gsi4pk_for_person(person_id, 16),
        lambda: gsi4sk(person_id, OPENED_AT),
    ):
        with pytest.raises(InvalidPersonIdError, match="not valid Unicode text"):
            use()


# Characters of each UTF-8 width, so the byte limit is tested where characters != bytes.
_WIDE_CHARACTERS = st.sampled_from(["a", "é", "山", "😀", "#"])


def _person_id_of_exactly(size: int, body: list[str]) -> str:
    """A personId of exactly `size` UTF-8 bytes: as much of body as fits, padded with ASCII."""
    person_id = ""
    for character in body:
        if len((person_id + character).encode("utf-8")) > size:
            break
        person_id += character
    return person_id + "x" * (size - len(person_id.encode("utf-8")))


@settings(max_examples=50)
@given(body=st.lists(_WIDE_CHARACTERS, max_size=400))
def test_given_a_gsi4sk_of_exactly_1024_bytes_then_it_is_accepted_and_1025_is_refused(
    body: list[str],
) -> None:
    budget = KEY_LIMIT - len("#") - len(OPENED_AT.encode("utf-8"))
    fits = _person_id_of_exactly(budget, body)
    too_long = _person_id_of_exactly(budget + 1, body)

    assert len(gsi4sk(fits, OPENED_AT).encode("utf-8")) == KEY_LIMIT
    with pytest.raises(InvalidPersonIdError, match="too long") as caught:
        gsi4sk(too_long, OPENED_AT)
    assert "1025 bytes" in str(caught.value)


@pytest.mark.parametrize(
    ("character", "width"), [("a", 1), ("é", 2), ("山", 3), ("😀", 4)], ids=["1B", "2B", "3B", "4B"]
)
def test_given_multi_byte_characters_then_the_limit_counts_utf8_bytes_not_characters(
    character: str, width: int
) -> None:
    # Without openedAt the check reserves room for the '#' only: 1,023 bytes of personId fit.
    count = 1023 // width
    padding = "x" * (1023 - count * width)
    fits = character * count + padding

    assert validate_person_id(fits) == fits
    with pytest.raises(InvalidPersonIdError, match="1025 bytes"):
        validate_person_id(fits + "x")
    if width > 1:
        # Fewer than 1,024 characters, yet over the byte limit.
        over = character * (count + 1)
        assert len(over) < KEY_LIMIT
        with pytest.raises(InvalidPersonIdError, match="too long"):
            validate_person_id(over)
