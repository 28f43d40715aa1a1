"""The parity snapshot: what each read returned at one moment, as a JSON document.

A verify run records one (`--snapshot FILE`); a later run compares against it (`--compare`,
ADR-0085's "identical to pre-migration"). The document names its format and version, the table,
index, phase and shard count it was taken of, the sampled persons, and per read (`Read`: the
reads parity compares) the table keys [PK, SK] it returned. Parsing names the first thing wrong
with a document, its phase, shard count and persons included, so a run refuses a bad one before
it reads anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from saga_index.index import OPEN_STATES, InvalidInputError, keys, validate_shard_count
from saga_index.layout_change.record import Phase

CHECK_ALL = "all-sagas"
CHECK_OPEN = "open-sagas"
CHECK_PERSON = "by-person"

SNAPSHOT_FORMAT = "saga-index-verify-snapshot"
SNAPSHOT_VERSION = 1

TableKey = tuple[str, str]


class InvalidSnapshotError(InvalidInputError):
    """A snapshot document is not one this tool wrote, or is damaged."""


@dataclass(frozen=True, order=True)
class Read:
    """One read of the repository: an enumeration, or one person's by-person read."""

    check: str
    person_id: str | None = None

    @property
    def label(self) -> str:
        return self.check if self.person_id is None else f"{self.check}:{self.person_id}"

    def qualifies(self, row: Mapping[str, Any]) -> bool:
        """Whether the base-table row belongs in this read's result."""
        if self.check == CHECK_OPEN:
            return row.get("state") in OPEN_STATES
        if self.check == CHECK_PERSON:
            return row.get("personId") == self.person_id
        return True


@dataclass(frozen=True)
class Snapshot:
    """The results of the reads at one moment: table keys per read."""

    table_name: str
    index_name: str
    phase: str
    shard_count: int
    created_at: str
    persons: tuple[str, ...]
    results: Mapping[Read, frozenset[TableKey]]

    def to_document(self) -> dict[str, Any]:
        def listed(read: Read) -> list[list[str]]:
            return [list(k) for k in sorted(self.results.get(read, frozenset()))]

        return {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "table": self.table_name,
            "index": self.index_name,
            "phase": self.phase,
            "shardCount": self.shard_count,
            "createdAt": self.created_at,
            "persons": list(self.persons),
            "results": {
                CHECK_ALL: listed(Read(CHECK_ALL)),
                CHECK_OPEN: listed(Read(CHECK_OPEN)),
                CHECK_PERSON: {p: listed(Read(CHECK_PERSON, p)) for p in self.persons},
            },
        }

    @classmethod
    def from_document(cls, document: Any) -> Snapshot:
        """Parse a snapshot document, naming the first thing that is wrong with it."""
        if not isinstance(document, Mapping):
            raise InvalidSnapshotError(
                f"a snapshot is a JSON object, got {type(document).__name__}"
            )
        if document.get("format") != SNAPSHOT_FORMAT:
            raise InvalidSnapshotError(
                f"not a verify snapshot: format is {document.get('format')!r}, "
                f"expected {SNAPSHOT_FORMAT!r}"
            )
        if document.get("version") != SNAPSHOT_VERSION:
            raise InvalidSnapshotError(
                f"unsupported snapshot version {document.get('version')!r}; this tool reads "
                f"version {SNAPSHOT_VERSION}"
            )
        table = _text(document, "table")
        index = _text(document, "index")
        phase = _text(document, "phase")
        if phase not in {p.value for p in Phase}:
            allowed = ", ".join(p.value for p in Phase)
            raise InvalidSnapshotError(f"snapshot phase {phase!r} is not one of {allowed}")
        created_at = _text(document, "createdAt")
        shard_count = document.get("shardCount")
        if isinstance(shard_count, bool) or not isinstance(shard_count, int):
            raise InvalidSnapshotError(f"snapshot shardCount must be an integer: {shard_count!r}")
        try:
            validate_shard_count(shard_count)
        except InvalidInputError as err:
            raise InvalidSnapshotError(f"snapshot shardCount: {err}") from None
        persons = document.get("persons")
        if not isinstance(persons, list) or not all(isinstance(p, str) and p for p in persons):
            raise InvalidSnapshotError("snapshot persons must be a list of non-empty strings")
        if len(set(persons)) != len(persons):
            raise InvalidSnapshotError("snapshot persons must not repeat")
        for person in persons:
            try:
                keys.validate_person_id(person)
            except InvalidInputError as err:
                raise InvalidSnapshotError(
                    f"snapshot person {_short(person)}: {err} (its by-person read is refused)"
                ) from None
        results = document.get("results")
        if not isinstance(results, Mapping):
            raise InvalidSnapshotError("snapshot results must be an object")
        by_person = results.get(CHECK_PERSON)
        if not isinstance(by_person, Mapping) or set(by_person) != set(persons):
            raise InvalidSnapshotError(
                f"snapshot results.{CHECK_PERSON} must hold exactly the listed persons"
            )
        parsed: dict[Read, frozenset[TableKey]] = {
            Read(CHECK_ALL): _key_set(results.get(CHECK_ALL), CHECK_ALL),
            Read(CHECK_OPEN): _key_set(results.get(CHECK_OPEN), CHECK_OPEN),
        }
        for person in persons:
            parsed[Read(CHECK_PERSON, person)] = _key_set(
                by_person[person], f"{CHECK_PERSON}.{person}"
            )
        return cls(
            table_name=table,
            index_name=index,
            phase=phase,
            shard_count=shard_count,
            created_at=created_at,
            persons=tuple(persons),
            results=parsed,
        )

    def require_taken_of(self, table_name: str, index_name: str) -> Snapshot:
        """This snapshot, when it was taken of `table_name` and `index_name`; InvalidSnapshotError
        naming both pairs when not."""
        if self.table_name != table_name or self.index_name != index_name:
            raise InvalidSnapshotError(
                f"the snapshot was taken of table {self.table_name!r} index "
                f"{self.index_name!r}; this run reads table {table_name!r} index {index_name!r}"
            )
        return self


def _short(text: str) -> str:
    return repr(text) if len(text) <= 64 else f"{text[:32]!r}... ({len(text)} characters)"


def _text(document: Mapping[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str) or not value:
        raise InvalidSnapshotError(f"snapshot {name} must be a non-empty string, got {value!r}")
    return value


def _key_set(value: Any, where: str) -> frozenset[TableKey]:
    if not isinstance(value, list):
        raise InvalidSnapshotError(f"snapshot results.{where} must be a list of [PK, SK] pairs")
    out: set[TableKey] = set()
    for entry in value:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not all(isinstance(part, str) for part in entry)
        ):
            raise InvalidSnapshotError(
                f"snapshot results.{where} holds {entry!r}, not a [PK, SK] pair of strings"
            )
        out.add((entry[0], entry[1]))
    return frozenset(out)
