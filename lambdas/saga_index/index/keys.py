"""Every key string of a saga row is built and parsed here, and nowhere else.

Contract (docs/shard-contract.md, docs/data-model.md):
  table key   PK = "RSAGA#" + sagaId, SK = "META"
  legacy      GSI4PK = "RenewalSaga"
  sharded     GSI4PK = "RenewalSaga#" + str(shard)    (decimal, no padding)
  sort key    GSI4SK = personId + "#" + openedAt       (unchanged by sharding)
  open index  OpenSagaPK = "RenewalSagaOpen#" + str(shard)  (open sagas only; N its own)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.index.errors import InvalidKeyError, InvalidPersonIdError
from saga_index.index.names import OPEN_INDEX_KEY_PREFIX
from saga_index.index.shard import MAX_SHARD_COUNT, utf8_shard_hash, validate_shard_count

ENTITY_TYPE = "RenewalSaga"
LEGACY_GSI4PK = "RenewalSaga"
_SHARD_PREFIX = LEGACY_GSI4PK + "#"
SAGA_PK_PREFIX = "RSAGA#"
SAGA_SK = "META"
# DynamoDB caps a sort key at 1,024 bytes of UTF-8.
MAX_SORT_KEY_BYTES = 1024
_SHARD_SUFFIX = re.compile(r"0|[1-9][0-9]{0,3}")


def validate_person_id(person_id: object, opened_at: str = "") -> str:
    """Return person_id if it is a non-empty string whose GSI4SK fits the 1,024-byte key limit.

    opened_at is the saga's openedAt when known; without it the check reserves no room for it,
    so a caller that builds a GSI4SK must pass it.
    """
    if not isinstance(person_id, str):
        raise InvalidPersonIdError(
            f"personId must be a string, got {type(person_id).__name__}: {person_id!r}"
        )
    if not person_id:
        raise InvalidPersonIdError("personId must be a non-empty string")
    try:
        encoded = person_id.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidPersonIdError(f"personId is not valid Unicode text: {err}") from err
    size = len(encoded) + 1 + len(opened_at.encode("utf-8"))
    if size > MAX_SORT_KEY_BYTES:
        raise InvalidPersonIdError(
            f"personId is too long: its GSI4SK would be {size} bytes of UTF-8, "
            f"over DynamoDB's {MAX_SORT_KEY_BYTES}-byte sort-key limit"
        )
    return person_id


@dataclass(frozen=True)
class Person:
    """A personId checked once at the edge of a read or write path, and its shard hash computed
    once: every layout's key for the person is then arithmetic on the hash, with no second
    check and no second SHA-256 (a reader of two layouts needs both keys)."""

    id: str
    shard_hash: int

    @classmethod
    def of(cls, person: str | Person) -> Person:
        """The person as given (already checked), or `person` checked by validate_person_id."""
        if isinstance(person, Person):
            return person
        checked = validate_person_id(person)
        return cls(checked, utf8_shard_hash(checked.encode("utf-8")))

    @property
    def prefix(self) -> str:
        """The begins_with prefix of this person's GSI4SK values."""
        return self.id + "#"

    def shard_gsi4pk(self, shard_count: int) -> str:
        """The sharded GSI4PK of this person under N = shard_count."""
        return sharded_gsi4pk(self.shard_hash % validate_shard_count(shard_count))

    def open_index_pk(self, shard_count: int) -> str:
        """The sparse open-saga index's partition key of this person's OPEN sagas under the open
        index's N: the same shard as GSI4's sharded key under that N."""
        return open_index_pk(self.shard_hash % validate_shard_count(shard_count))


def sharded_gsi4pk(shard_number: int) -> str:
    if (
        isinstance(shard_number, bool)
        or not isinstance(shard_number, int)
        or not 0 <= shard_number < MAX_SHARD_COUNT
    ):
        raise InvalidKeyError(
            f"shard number must be an integer from 0 to {MAX_SHARD_COUNT - 1}, got {shard_number!r}"
        )
    return f"{_SHARD_PREFIX}{shard_number}"


def open_index_pk(shard_number: int) -> str:
    """OpenSagaPK of shard `shard_number`: "RenewalSagaOpen#" + decimal shard number."""
    return OPEN_INDEX_KEY_PREFIX + sharded_gsi4pk(shard_number)[len(_SHARD_PREFIX) :]


def all_open_index_pks(shard_count: int) -> list[str]:
    """Every partition key of the open-saga index under its N, shard 0 first."""
    return [open_index_pk(n) for n in range(validate_shard_count(shard_count))]


def shard_gsi4pk_for_person(person_id: str, shard_count: int) -> str:
    """The sharded GSI4PK of a person: "RenewalSaga#" + shard(personId, N)."""
    return Person.of(person_id).shard_gsi4pk(shard_count)


def all_shard_gsi4pks(shard_count: int) -> list[str]:
    return [sharded_gsi4pk(n) for n in range(validate_shard_count(shard_count))]


def parse_gsi4pk(value: str) -> int | None:
    """None for the legacy key, the shard number for a sharded key; anything else is an error."""
    if not isinstance(value, str):
        raise InvalidKeyError(f"GSI4PK must be a string, got {type(value).__name__}: {value!r}")
    if value == LEGACY_GSI4PK:
        return None
    if value.startswith(_SHARD_PREFIX):
        suffix = value[len(_SHARD_PREFIX) :]
        if _SHARD_SUFFIX.fullmatch(suffix) and int(suffix) < MAX_SHARD_COUNT:
            return int(suffix)
    raise InvalidKeyError(
        f"GSI4PK {value!r} is neither the legacy key {LEGACY_GSI4PK!r} "
        f"nor a sharded key {_SHARD_PREFIX!r} + decimal shard number"
    )


def is_sharded_gsi4pk(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return parse_gsi4pk(value) is not None
    except InvalidKeyError:
        return False


def gsi4sk(person_id: str, opened_at: str) -> str:
    if not isinstance(opened_at, str) or not opened_at or "#" in opened_at:
        raise InvalidKeyError(f"openedAt must be a non-empty ISO-8601 string, got {opened_at!r}")
    return validate_person_id(person_id, opened_at) + "#" + opened_at


def person_prefix(person_id: str) -> str:
    """The begins_with prefix of one person's GSI4SK values."""
    return validate_person_id(person_id) + "#"


@dataclass(frozen=True)
class SortKey:
    person_id: str
    opened_at: str


def parse_gsi4sk(value: str) -> SortKey:
    """Inverse of gsi4sk. openedAt never contains '#', so the LAST '#' separates the two;
    personIds may contain '#' themselves."""
    if not isinstance(value, str):
        raise InvalidKeyError(f"GSI4SK must be a string, got {type(value).__name__}: {value!r}")
    person_id, sep, opened_at = value.rpartition("#")
    if not sep or not person_id or not opened_at:
        raise InvalidKeyError(f"GSI4SK {value!r} is not personId + '#' + openedAt")
    return SortKey(person_id=person_id, opened_at=opened_at)


def saga_table_key(saga_id: str) -> dict[str, str]:
    if not isinstance(saga_id, str) or not saga_id:
        raise InvalidKeyError(f"sagaId must be a non-empty string, got {saga_id!r}")
    return {"PK": SAGA_PK_PREFIX + saga_id, "SK": SAGA_SK}


def parse_saga_table_key(pk: str, sk: str) -> str:
    """Inverse of saga_table_key: the sagaId."""
    if not isinstance(pk, str) or not isinstance(sk, str):
        raise InvalidKeyError(f"({pk!r}, {sk!r}) is not a saga table key (RSAGA#<id>, META)")
    if not pk.startswith(SAGA_PK_PREFIX) or len(pk) == len(SAGA_PK_PREFIX) or sk != SAGA_SK:
        raise InvalidKeyError(f"({pk!r}, {sk!r}) is not a saga table key (RSAGA#<id>, META)")
    return pk[len(SAGA_PK_PREFIX) :]


def table_key_of(item: Mapping[str, Any]) -> tuple[str, str]:
    """(PK, SK) of a deserialised item: the identity used to de-duplicate reads."""
    return (str(item["PK"]), str(item["SK"]))


def person_anomaly(item: Mapping[str, Any]) -> str | None:
    """Why a saga row's personId is unusable for routing, or None when it is fine.

    Production has a few such rows. They are still returned by enumerations and never crash a
    read; callers log them so a human can repair them.
    """
    person_id = item.get("personId")
    try:
        validate_person_id(person_id)
    except InvalidPersonIdError as err:
        return str(err)
    sort_key = item.get("GSI4SK")
    if isinstance(sort_key, str):
        try:
            parsed = parse_gsi4sk(sort_key)
        except InvalidKeyError as err:
            return str(err)
        if parsed.person_id != person_id:
            return (
                f"GSI4SK {sort_key!r} belongs to person {parsed.person_id!r}, "
                f"not to the row's personId {person_id!r}"
            )
    return None
