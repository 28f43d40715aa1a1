"""What a backfill run moves: from the control record's source layout to its target layout.

The row rule, the same for every move (legacy -> sharded(N) forward, sharded(N) -> legacy
rollback, and sharded(N) -> sharded(M) forward while resharding):

  a saga row moves when it is on a key the run SWEEPS and that key differs from the key the
  TARGET layout gives its person.

The swept keys are the SOURCE layout's keys and, when the target is sharded, the target's keys
too: a row on a target key that is not its person's (misrouted: on `#8` when its person belongs
on `#3`, e.g. a row repaired before repairs stamped GSI4PK) is then moved like any other, so a
forward run in `sharded` leaves every saga row with a usable personId on its write key. A move
to legacy sweeps the source's keys only (every one of them moves to the one legacy key).

A sharded target needs the row's person to pick its key, so a row whose personId is unusable
(keys.person_anomaly) cannot move there: it is left and reported. The legacy layout gives every
person the same key, so a move to it needs no personId: a rollback moves every saga row on a
source key, anomalies included, and reports the anomalies it moved.

The layouts come from the record (lease.grant.backfill_layouts), never from flags: a run is
only safe while the writers stamp the same key the run moves rows to, which is what the record's
state guarantees (writers stamp its target) and what the lease's heartbeat keeps checking (the
state's version has not moved on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from saga_index.index import LEGACY, Layout, keys
from saga_index.layout_change.lease import backfill_layouts
from saga_index.layout_change.record import (
    BackfillDirection,
    ControlRecordMissingError,
    ControlState,
    RecordCondition,
)


@dataclass(frozen=True)
class Move:
    """One run's direction and the two layouts it moves rows between."""

    direction: BackfillDirection
    source: Layout
    target: Layout

    @classmethod
    def for_state(cls, state: ControlState, direction: BackfillDirection | str) -> Move:
        """The move a run in `direction` makes under `state`. Refused: a missing record (it
        must be restored first: ControlRecordMissingError), and a direction the state's writers
        would undo (LeaseDirectionError, exit 2)."""
        if state.condition is RecordCondition.MISSING:
            raise ControlRecordMissingError(state.version)
        wanted = BackfillDirection.parse(direction)
        source, target = backfill_layouts(state, wanted)
        return cls(wanted, source, target)

    @classmethod
    def between_legacy_and(cls, direction: BackfillDirection | str, shard_count: int) -> Move:
        """forward: legacy -> sharded(N); rollback: sharded(N) -> legacy (tests, benchmarks)."""
        wanted = BackfillDirection.parse(direction)
        sharded = Layout.sharded(shard_count)
        if wanted is BackfillDirection.FORWARD:
            return cls(wanted, LEGACY, sharded)
        return cls(wanted, sharded, LEGACY)

    def source_partitions(self) -> list[str]:
        """The GSI4 partitions rows are moved away from (the progress bar counts these)."""
        return list(self.source.partitions())

    def swept_partitions(self) -> list[str]:
        """Every GSI4 partition the run judges (module docstring): the source's, then the
        target's when it is sharded (its misrouted rows), each once, in that order."""
        return list(dict.fromkeys(self._swept_order))

    def is_on_source(self, gsi4pk: object) -> bool:
        """Is a row with this GSI4PK on a key the run sweeps (source keys; and the target's
        keys when the target is sharded, for its misrouted rows)?"""
        return isinstance(gsi4pk, str) and gsi4pk in self._source_keys

    def target_key(self, person_id: str) -> str:
        return self.target.key_for(person_id)

    def must_move(self, gsi4pk: object, person_id: str) -> bool:
        """The row rule (module docstring) for a row whose personId is usable."""
        return self.is_on_source(gsi4pk) and gsi4pk != self.target_key(person_id)

    @property
    def target_needs_person(self) -> bool:
        """Does the target layout key a row by its person? False for legacy (one key for all)."""
        return self.target.is_sharded

    def target_key_of(self, item: Mapping[str, Any]) -> str | None:
        """The key the target layout gives a deserialised saga row; None when that needs a
        usable personId and the row has none (an anomaly, left on its key)."""
        if not self.target_needs_person:
            return keys.LEGACY_GSI4PK
        if keys.person_anomaly(item) is not None:
            return None
        return self.target_key(item["personId"])

    def must_move_row(self, item: Mapping[str, Any]) -> bool:
        """The row rule for a deserialised saga row: on a source key, and that key is not the
        one the target gives it. A row the target cannot key (target_key_of: None) stays."""
        gsi4pk = item.get("GSI4PK")
        if not self.is_on_source(gsi4pk):
            return False
        target = self.target_key_of(item)
        return target is not None and gsi4pk != target

    @cached_property
    def _swept_order(self) -> tuple[str, ...]:
        if self.target.is_sharded:
            return (*self.source.partitions(), *self.target.partitions())
        return self.source.partitions()

    @cached_property
    def _source_keys(self) -> frozenset[str]:
        return frozenset(self._swept_order)

    def describe(self) -> str:
        return f"{self.direction.value}: {self.source} -> {self.target}"
