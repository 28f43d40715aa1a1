"""Saga states (docs/data-model.md)."""

from __future__ import annotations

from saga_index.index.errors import InvalidInputError

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
