"""Which way a backfill moves rows, and the deployment it needs to converge.

forward moves saga rows from the legacy GSI4PK to the shard of their personId; rollback moves
them back. A run is only safe while the writers stamp the same key the run moves rows to:
otherwise every transition would undo it (check_phase), and rows stamped with a shard count the
readers do not query would be lost to them (check_deployment).
"""

from __future__ import annotations

from enum import StrEnum

from saga_index import keys
from saga_index.errors import InvalidInputError
from saga_index.model import Phase


class Direction(StrEnum):
    FORWARD = "forward"  # legacy -> shard(personId)
    ROLLBACK = "rollback"  # shard -> legacy

    def is_source(self, gsi4pk: object) -> bool:
        """Is a row with this GSI4PK still to be moved by this direction?"""
        if self is Direction.FORWARD:
            return gsi4pk == keys.LEGACY_GSI4PK
        return keys.is_sharded_gsi4pk(gsi4pk)

    def target(self, person_id: str, shard_count: int) -> str:
        if self is Direction.FORWARD:
            return keys.shard_gsi4pk_for_person(person_id, shard_count)
        return keys.LEGACY_GSI4PK

    def source_partitions(self, shard_count: int) -> list[str]:
        """The GSI4 partitions rows are moved away from."""
        if self is Direction.FORWARD:
            return [keys.LEGACY_GSI4PK]
        return keys.all_shard_gsi4pks(shard_count)

    @property
    def source_name(self) -> str:
        return "legacy" if self is Direction.FORWARD else "sharded"

    @property
    def allowed_phases(self) -> tuple[Phase, ...]:
        # Writers must already stamp the target key, or every transition would move a row
        # back to the source while the backfill moves it forward: the run would never converge.
        if self is Direction.FORWARD:
            return (Phase.MIGRATING, Phase.SHARDED)
        return (Phase.ROLLING_BACK, Phase.LEGACY)

    def check_phase(self, phase: Phase | str) -> None:
        current = Phase.parse(phase)
        if current not in self.allowed_phases:
            wanted = " or ".join(p.value for p in self.allowed_phases)
            raise InvalidInputError(
                f"a {self.value} backfill needs the writers in phase {wanted}, but the phase is "
                f"{current.value!r}: writers in {current.value!r} stamp the "
                f"{'legacy' if self is Direction.FORWARD else 'sharded'} key, so they would undo "
                f"the backfill. Deploy with `cdk deploy -c phase={self.allowed_phases[0].value}` "
                f"first (and pass --phase {self.allowed_phases[0].value} to the CLI)"
            )


def check_deployment(
    direction: Direction, shard_count: int, *, deployed_shard_count: int, phase: Phase | str
) -> None:
    """Refuse a run the deployment would undo: the writers' phase, and the writers' N."""
    direction.check_phase(phase)
    if shard_count != deployed_shard_count:
        raise InvalidInputError(
            f"shardCount {shard_count} differs from the deployed shard count "
            f"{deployed_shard_count}: rows would be stamped with shards the readers do not "
            "query. Use the deployed N (context shardCount), or change N with a new deploy first"
        )
