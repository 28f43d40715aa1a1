"""Layouts: where a row's GSI4PK points.

`legacy` gives every saga row one key; `sharded(N)` gives a person's rows the key of their shard
under N. A layout on its own is also the key plan of a table that is not moving (one key per
person, one stage of partitions): what a service needs once no layout change is in progress.
A move between two layouts, and the name of such a state, is the layout-change machinery's
(saga_index.layout_change.record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError
from saga_index.index.keys import Person
from saga_index.index.shard import validate_shard_count

LayoutKind = Literal["legacy", "sharded"]
LEGACY_KIND: LayoutKind = "legacy"
SHARDED_KIND: LayoutKind = "sharded"


@dataclass(frozen=True)
class Layout:
    """`legacy`, or `sharded` with its shard count (a power of two from 1 to 1024)."""

    kind: LayoutKind
    shard_count: int | None = None

    def __post_init__(self) -> None:
        if self.kind == LEGACY_KIND:
            if self.shard_count is not None:
                raise InvalidInputError("the legacy layout has no shard count")
        elif self.kind == SHARDED_KIND:
            validate_shard_count(self.shard_count)
        else:
            raise InvalidInputError(f"layout must be 'legacy' or 'sharded', got {self.kind!r}")

    @classmethod
    def legacy(cls) -> Layout:
        return cls(LEGACY_KIND)

    @classmethod
    def sharded(cls, shard_count: int) -> Layout:
        return cls(SHARDED_KIND, shard_count)

    @property
    def is_sharded(self) -> bool:
        return self.kind == SHARDED_KIND

    def key_for(self, person: str | Person) -> str:
        """The GSI4PK this layout gives a person's rows (a str personId is validated either way;
        a Person was validated when it was made)."""
        checked = Person.of(person)
        if self.shard_count is None:
            return keys.LEGACY_GSI4PK
        return checked.shard_gsi4pk(self.shard_count)

    def partitions(self) -> tuple[str, ...]:
        """Every GSI4PK of this layout, in ascending shard order."""
        if self.shard_count is None:
            return (keys.LEGACY_GSI4PK,)
        return tuple(keys.all_shard_gsi4pks(self.shard_count))

    # ---- the key plan of a table in this layout, not moving (saga_index.store.plan) ---------

    def write_key(self, person: str | Person) -> str:
        return self.key_for(person)

    def read_keys(self, person: str | Person) -> tuple[str, ...]:
        return (self.key_for(person),)

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        return (self.partitions(),)

    def __str__(self) -> str:
        return self.kind if self.shard_count is None else f"{self.kind}({self.shard_count})"


LEGACY = Layout.legacy()
