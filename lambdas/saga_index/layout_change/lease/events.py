"""The EVENT item a lease or control write leaves behind (docs/control-contract.md, "STATE
attributes": an audit trail; nothing routes by it)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Final

from saga_index.layout_change.lease.errors import InvalidBackfillControlError
from saga_index.layout_change.record import EVENT, LEASE_TOKEN, ControlEvent, ControlStore

EVENT_THROTTLE: Final = "throttle"
EVENT_PAUSE: Final = "pause"
EVENT_RESUME: Final = "resume"
EVENT_LEASE_ACQUIRED: Final = "lease-acquired"
EVENT_LEASE_RELEASED: Final = "lease-released"


def record_control_event(
    store: ControlStore,
    event: str,
    changed_by: str,
    at: datetime,
    state_version: int,
    details: dict[str, Any],
    reason: str = "",
) -> None:
    """Leave the audit EVENT item of a lease or control write (`event`, e.g. "lease-acquired")
    beside the STATE item: who made it, when, against which STATE version, and what it set."""
    store.put_event(
        ControlEvent(
            event=event,
            changed_at=at,
            changed_by=changed_by or "-",
            event_id=uuid.uuid4().hex,
            state_version=state_version,
            reason=reason,
            details=details,
        )
    )


def lease_released(store: ControlStore, token: str) -> bool:
    """Did a release of the lease `token` land? Its lease-released EVENT item says so (written
    right after the release): for a run whose release records no completion (an open-index
    run's), the one trace of it in the record."""
    return any(
        event.get(EVENT) == EVENT_LEASE_RELEASED and event.get(LEASE_TOKEN) == token
        for event in store.events()
    )


def nonblank(name: str, value: str) -> str:
    """`value` stripped: a text the lease and its events record (holder, token, changed_by,
    reason), refused when empty or not a string (`name` says which)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidBackfillControlError(f"{name} must be a non-empty string")
    return value.strip()
