"""The phase: the operator's name for a state, a (current layout, layout moved to) pair.

The one phase vocabulary of the repository: the record stores it for readers' convenience (the
layouts are the truth), `phase set` takes it, and the CLI's read-only --phase override names
one of the phases that need a single shard count.
"""

from __future__ import annotations

from enum import StrEnum

from saga_index.index import LEGACY, InvalidInputError, Layout


class Phase(StrEnum):
    LEGACY = "legacy"  # legacy, not moving
    MIGRATING = "migrating"  # legacy -> sharded(N)
    SHARDED = "sharded"  # sharded(N), not moving
    ROLLING_BACK = "rolling-back"  # sharded(N) -> legacy
    RESHARDING = "resharding"  # sharded(N) -> sharded(M), M = 2N or N/2

    @classmethod
    def parse(cls, value: object) -> Phase:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(p.value for p in cls)
            raise InvalidInputError(f"phase must be one of {allowed}; got {value!r}") from None


def phase_of(current: Layout, moving_to: Layout | None) -> Phase:
    """The phase of a state; a 'move' to the same layout is not a state."""
    if moving_to is None:
        return Phase.SHARDED if current.is_sharded else Phase.LEGACY
    if moving_to == current:
        raise InvalidInputError(f"a state cannot move from {current} to itself")
    if not current.is_sharded:
        return Phase.MIGRATING
    return Phase.RESHARDING if moving_to.is_sharded else Phase.ROLLING_BACK


def layouts_for_phase(phase: Phase | str, shard_count: int) -> tuple[Layout, Layout | None]:
    """The (current, movingTo) pair a phase names under N = shard_count: what a reader in that
    phase would follow (the CLI's read-only --phase/--shards overrides). `resharding` needs two
    shard counts, so it has no pair here."""
    named = Phase.parse(phase)
    sharded = Layout.sharded(shard_count)
    pairs: dict[Phase, tuple[Layout, Layout | None]] = {
        Phase.LEGACY: (LEGACY, None),
        Phase.MIGRATING: (LEGACY, sharded),
        Phase.SHARDED: (sharded, None),
        Phase.ROLLING_BACK: (sharded, LEGACY),
    }
    if named not in pairs:
        raise InvalidInputError(f"phase {named.value!r} names no single shard count")
    return pairs[named]


# The phases a reader can be told to follow with one N (the CLI's --phase override).
SINGLE_COUNT_PHASES: tuple[str, ...] = tuple(p.value for p in Phase if p is not Phase.RESHARDING)
