"""The layout lab's six layouts and their keys: which GSI4PK a saga row carries (from its person
and whether it is open), and the sparse open-saga index's key. Legacy and sharded keys are the
product's (saga_index.index.layout); the sparse open-saga index's plan is the product's routing
of a control record whose open index is `open` (writers stamp OpenSagaPK on open sagas and remove
it when one closes, enumerations of open sagas read the open index); the state-split and
person-key rules are key plans of the lab's own (saga_index.store.plan's seam). The product's
repository and writer read and write them all on a server (bench.layouts_store) and the model
prices the same keys (bench.layouts_model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from saga_index.index import (
    OPEN_INDEX_KEY_PREFIX,
    OPEN_INDEX_PARTITION_KEY,
    OPEN_STATES,
    InvalidInputError,
    Layout,
    Person,
    keys,
)
from saga_index.layout_change.record import OpenIndex, OpenIndexState, Routing
from saga_index.store import KeyPlan

SHARD_COUNT = 16
# The sparse open-saga index of layout 5: an attribute present only while the saga is open.
from saga_index.index import OPEN_INDEX_NAME as OPEN_INDEX_NAME  # noqa: E402  (the lab's modules read it here)

OPEN_INDEX_PK = OPEN_INDEX_PARTITION_KEY
OPEN_KEY_PREFIX = OPEN_INDEX_KEY_PREFIX
# State-split keys (layout 4): terminal sagas are re-stamped under a second key family.
CLOSED_KEY_PREFIX = "RenewalSagaClosed#"
SHARD_KEY_PREFIX = keys.LEGACY_GSI4PK + "#"
GSI4Key = Literal["legacy", "sharded", "state-split", "person"]


@dataclass(frozen=True)
class LabLayout:
    """One way to key the saga rows. `gsi4` is GSI4PK's rule; `open_index` adds the sparse
    open-saga index (enumerations read it); `scan` enumerates by a parallel Scan of the table;
    `staggered` runs the sweeps at the deployed offsets instead of all in one second."""

    name: str
    title: str
    gsi4: GSI4Key
    open_index: bool = False
    scan: bool = False
    staggered: bool = False


LAYOUTS: tuple[LabLayout, ...] = (
    LabLayout("legacy", "legacy, one key", "legacy"),
    LabLayout("adr-n16", "ADR, N=16", "sharded"),
    LabLayout("adr-n16-staggered", "ADR, N=16, sweeps staggered", "sharded", staggered=True),
    LabLayout("state-split", "state-split keys, N=16", "state-split"),
    LabLayout("sparse-open-index", "ADR + sparse open-saga index", "sharded", open_index=True),
    LabLayout("person-key-scan", "GSI4PK = personId, Scan", "person", scan=True),
)
LAYOUTS_BY_NAME = {layout.name: layout for layout in LAYOUTS}


# ---- keys: each layout's key plan (the product's seam, saga_index.store.plan) --------------


@dataclass(frozen=True)
class StateSplitPlan:
    """The state-split layout's key plan (the product has no such layout): open sagas under the
    shard keys, terminal ones under RenewalSagaClosed#<shard>. `closed` is the plan of a write
    that leaves a saga terminal. A by-person read queries both families, open first (the full
    history); an enumeration of the open sagas reads the open family only."""

    shard_count: int
    closed: bool = False

    def write_key(self, person: Person) -> str:
        if self.closed:
            return f"{CLOSED_KEY_PREFIX}{person.shard_hash % self.shard_count}"
        return person.shard_gsi4pk(self.shard_count)

    def read_keys(self, person: Person) -> tuple[str, ...]:
        open_key = StateSplitPlan(self.shard_count).write_key(person)
        return (open_key, StateSplitPlan(self.shard_count, closed=True).write_key(person))

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        return (tuple(keys.all_shard_gsi4pks(self.shard_count)),)


@dataclass(frozen=True)
class PersonKeyPlan:
    """The person-key layout's key plan: GSI4PK = personId. No list of keys reaches every
    person, so its enumeration is a parallel Scan of the table (bench.layouts_store)."""

    def write_key(self, person: Person) -> str:
        return person.id

    def read_keys(self, person: Person) -> tuple[str, ...]:
        return (person.id,)

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        raise InvalidInputError("the person-key layout is enumerated by a Scan, not by its keys")


def key_plan(layout: LabLayout, shard_count: int = SHARD_COUNT, *, is_open: bool = True) -> KeyPlan:
    """The key plan of `layout` for rows that are open (or terminal): the product's own Layout
    for legacy and sharded keys, its routing with the open index in use for the sparse layout
    (open_index_routing), the lab's plans for the two key rules the product lacks."""
    if layout.gsi4 == "legacy":
        return Layout.legacy()
    if layout.gsi4 == "person":
        return PersonKeyPlan()
    if layout.gsi4 == "state-split":
        return StateSplitPlan(shard_count, closed=not is_open)
    if layout.open_index:
        return open_index_routing(shard_count)
    return Layout.sharded(shard_count)


def open_index_routing(shard_count: int = SHARD_COUNT) -> Routing:
    """The product's routing of a table at rest in sharded(N) whose open index is `open` at N:
    what every writer and reader follows once the open index's move has ended."""
    in_use = OpenIndex.of(OpenIndexState.OPEN, shard_count)
    return Routing.between(Layout.sharded(shard_count), open_writes=in_use, open_reads=in_use)


def gsi4pk(layout: LabLayout, person_id: str, is_open: bool, shard_count: int = SHARD_COUNT) -> str:
    """The GSI4PK a saga row of `person_id` carries in `layout`."""
    return key_plan(layout, shard_count, is_open=is_open).write_key(Person.of(person_id))


def open_index_pk(
    layout: LabLayout, person_id: str, is_open: bool, shard_count: int = SHARD_COUNT
) -> str | None:
    """The sparse index's key of the row (the one the product's writer stamps), or None when the
    row is not in that index."""
    if not layout.open_index or not is_open:
        return None
    return open_index_routing(shard_count).open_write_key(person_id)


def index_attributes(
    layout: LabLayout, person_id: str, state: str, shard_count: int = SHARD_COUNT
) -> dict[str, str]:
    """The index key attributes of a row (the GSI4SK is every layout's: personId#openedAt)."""
    is_open = state in OPEN_STATES
    attributes = {"GSI4PK": gsi4pk(layout, person_id, is_open, shard_count)}
    open_pk = open_index_pk(layout, person_id, is_open, shard_count)
    if open_pk is not None:
        attributes[OPEN_INDEX_PK] = open_pk
    return attributes


def attributes_bytes(attributes: Mapping[str, str]) -> int:
    return sum(len(k.encode()) + len(v.encode()) for k, v in attributes.items())
