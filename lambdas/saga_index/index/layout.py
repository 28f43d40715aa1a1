"""Layouts and the phase a state is named by.

A layout is where a row's GSI4PK points: `legacy` (one key) or `sharded(N)` (N keys). A state
is a pair (current layout, layout being moved to or none); its phase is a name for that pair,
the words operators already use, plus `resharding` for a move between two sharded layouts
(a split N -> 2N or a merge N -> N/2: the same kind of state, control/transitions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError
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

    def key_for(self, person_id: str) -> str:
        """The GSI4PK this layout gives a person's rows (the personId is validated either way)."""
        if self.shard_count is None:
            keys.validate_person_id(person_id)
            return keys.LEGACY_GSI4PK
        return keys.shard_gsi4pk_for_person(person_id, self.shard_count)

    def partitions(self) -> tuple[str, ...]:
        """Every GSI4PK of this layout, in ascending shard order."""
        if self.shard_count is None:
            return (keys.LEGACY_GSI4PK,)
        return tuple(keys.all_shard_gsi4pks(self.shard_count))

    def __str__(self) -> str:
        return self.kind if self.shard_count is None else f"{self.kind}({self.shard_count})"


LEGACY = Layout.legacy()


class StatePhase(StrEnum):
    """The name of a (current, movingTo) pair. Stored in the record for readers' convenience;
    the layouts are the truth."""

    LEGACY = "legacy"  # legacy, not moving
    MIGRATING = "migrating"  # legacy -> sharded(N)
    SHARDED = "sharded"  # sharded(N), not moving
    ROLLING_BACK = "rolling-back"  # sharded(N) -> legacy
    RESHARDING = "resharding"  # sharded(N) -> sharded(M), M = 2N or N/2

    @classmethod
    def parse(cls, value: object) -> StatePhase:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(p.value for p in cls)
            raise InvalidInputError(f"phase must be one of {allowed}; got {value!r}") from None


def phase_of(current: Layout, moving_to: Layout | None) -> StatePhase:
    """The phase of a state; a 'move' to the same layout is not a state."""
    if moving_to is None:
        return StatePhase.SHARDED if current.is_sharded else StatePhase.LEGACY
    if moving_to == current:
        raise InvalidInputError(f"a state cannot move from {current} to itself")
    if not current.is_sharded:
        return StatePhase.MIGRATING
    return StatePhase.RESHARDING if moving_to.is_sharded else StatePhase.ROLLING_BACK


def layouts_for_phase(phase: StatePhase | str, shard_count: int) -> tuple[Layout, Layout | None]:
    """The (current, movingTo) pair a phase names under N = shard_count: what a reader in that
    phase would follow (the CLI's read-only --phase/--shards overrides). `resharding` needs two
    shard counts, so it has no pair here."""
    named = StatePhase.parse(phase)
    sharded = Layout.sharded(shard_count)
    pairs: dict[StatePhase, tuple[Layout, Layout | None]] = {
        StatePhase.LEGACY: (LEGACY, None),
        StatePhase.MIGRATING: (LEGACY, sharded),
        StatePhase.SHARDED: (sharded, None),
        StatePhase.ROLLING_BACK: (sharded, LEGACY),
    }
    if named not in pairs:
        raise InvalidInputError(f"phase {named.value!r} names no single shard count")
    return pairs[named]
