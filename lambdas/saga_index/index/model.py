"""Saga states and the migration phase (docs/data-model.md)."""

from __future__ import annotations

from enum import StrEnum

from saga_index.index.errors import InvalidInputError


class Phase(StrEnum):
    """How sagas are written and read during the migration (ADR-0085)."""

    LEGACY = "legacy"  # write the legacy key; read the legacy partition
    MIGRATING = "migrating"  # write sharded; read legacy FIRST, then shards; de-duplicate
    SHARDED = "sharded"  # write sharded; read shards only
    # The rollback's mirror image of MIGRATING: write legacy; read the shards FIRST, then
    # legacy; de-duplicate. Rows move shard -> legacy, so the source is read first.
    ROLLING_BACK = "rolling-back"

    @classmethod
    def parse(cls, value: object) -> Phase:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            allowed = ", ".join(p.value for p in cls)
            raise InvalidInputError(f"phase must be one of {allowed}; got {value!r}") from None

    @property
    def writes_sharded(self) -> bool:
        return self in (Phase.MIGRATING, Phase.SHARDED)

    @property
    def reads_legacy(self) -> bool:
        return self is not Phase.SHARDED

    @property
    def reads_shards(self) -> bool:
        return self is not Phase.LEGACY

    @property
    def reads_legacy_first(self) -> bool:
        """Dual reads read the key rows are moving AWAY from first (see repository.py)."""
        return self is not Phase.ROLLING_BACK


OPEN_STATES: tuple[str, ...] = (
    "OPENED",
    "PREPARING",
    "PREPARE_FAILED",
    "OFFER_SENT",
    "NEGOTIATING",
    "AWAITING_SIGNATURE",
)
TERMINAL_STATES: tuple[str, ...] = ("SIGNED", "DECLINED", "EXPIRED", "CANCELLED")
ALL_STATES: tuple[str, ...] = OPEN_STATES + TERMINAL_STATES


def validate_state(state: object) -> str:
    if state not in ALL_STATES:
        raise InvalidInputError(f"state must be one of {', '.join(ALL_STATES)}; got {state!r}")
    return str(state)
