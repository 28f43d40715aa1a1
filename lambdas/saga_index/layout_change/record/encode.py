"""The control items as written: a state, a transition, a lease, a completion and an event as
attributes (docs/control-contract.md, "STATE attributes").

The values are Python values (store.dynamo.codec.serialize makes them wire values); None means
absent (REMOVE in an update).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import Layout
from saga_index.index.names import CONTROL_PK, TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.items import (
    BACKFILL_MAX_WRITES_PER_SECOND,
    BACKFILL_PAUSED,
    CHANGED_AT,
    CHANGED_BY,
    CHECKS_FORCED,
    CHECKS_PASSED,
    EFFECTIVE_AT,
    ENTITY_EVENT,
    ENTITY_HISTORY,
    ENTITY_STATE,
    ENTITY_TYPE,
    EVENT,
    EVENT_ID,
    LAST_BACKFILL_ANOMALIES,
    LAST_BACKFILL_COMPLETE,
    LAST_BACKFILL_COMPLETED_AT,
    LAST_BACKFILL_DIRECTION,
    LAST_BACKFILL_HOLDER,
    LAST_BACKFILL_LEASE_TOKEN,
    LAST_BACKFILL_RESTAMPED,
    LAST_BACKFILL_SCANNED,
    LAST_BACKFILL_SOURCE_LAYOUT,
    LAST_BACKFILL_SOURCE_SHARD_COUNT,
    LAST_BACKFILL_STARTED_AT,
    LAST_BACKFILL_STATE_VERSION,
    LAST_BACKFILL_TARGET_LAYOUT,
    LAST_BACKFILL_TARGET_SHARD_COUNT,
    LAST_BACKFILL_VERIFIED,
    LAYOUT,
    LEASE_ACQUIRED_AT,
    LEASE_DIRECTION,
    LEASE_EXPIRES_AT,
    LEASE_HEARTBEAT_AT,
    LEASE_HOLDER,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    MOVING_TO_LAYOUT,
    MOVING_TO_SHARD_COUNT,
    PHASE,
    PREVIOUS_LAYOUT,
    PREVIOUS_MOVING_TO_LAYOUT,
    PREVIOUS_MOVING_TO_SHARD_COUNT,
    PREVIOUS_PHASE,
    PREVIOUS_SHARD_COUNT,
    PRIOR_WRITE_LAYOUT,
    PRIOR_WRITE_SHARD_COUNT,
    REASON,
    SHARD_COUNT,
    STATE_VERSION,
    VERSION,
    event_sk,
    history_key,
    state_key,
)
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    ControlState,
    Lease,
    Transition,
)
from saga_index.layout_change.record.times import format_time


def layout_attributes(layout: Layout | None, kind_name: str, count_name: str) -> dict[str, Any]:
    """The two attributes of a layout; None values mean "absent" (REMOVE in an update)."""
    if layout is None:
        return {kind_name: None, count_name: None}
    return {kind_name: layout.kind, count_name: layout.shard_count}


def transition_attributes(transition: Transition) -> dict[str, Any]:
    """Every attribute a transition writes, on the STATE item and on its HISTORY item."""
    return {
        VERSION: transition.version,
        PHASE: transition.phase.value,
        **layout_attributes(transition.layout, LAYOUT, SHARD_COUNT),
        **layout_attributes(transition.moving_to, MOVING_TO_LAYOUT, MOVING_TO_SHARD_COUNT),
        PREVIOUS_PHASE: transition.previous_phase.value,
        **layout_attributes(transition.previous_layout, PREVIOUS_LAYOUT, PREVIOUS_SHARD_COUNT),
        **layout_attributes(
            transition.previous_moving_to,
            PREVIOUS_MOVING_TO_LAYOUT,
            PREVIOUS_MOVING_TO_SHARD_COUNT,
        ),
        **layout_attributes(
            transition.prior_write_layout, PRIOR_WRITE_LAYOUT, PRIOR_WRITE_SHARD_COUNT
        ),
        CHANGED_AT: format_time(transition.changed_at),
        CHANGED_BY: transition.changed_by,
        REASON: transition.reason,
        EFFECTIVE_AT: format_time(transition.effective_at),
        CHECKS_PASSED: list(transition.checks_passed),
        CHECKS_FORCED: list(transition.checks_forced),
    }


def lease_attributes(lease: Lease) -> dict[str, Any]:
    return {
        LEASE_HOLDER: lease.holder,
        LEASE_TOKEN: lease.token,
        LEASE_DIRECTION: lease.direction.value,
        LEASE_ACQUIRED_AT: format_time(lease.acquired_at),
        LEASE_HEARTBEAT_AT: format_time(lease.heartbeat_at),
        LEASE_EXPIRES_AT: format_time(lease.expires_at),
        LEASE_STATE_VERSION: lease.state_version,
    }


def completion_attributes(completion: BackfillCompletion) -> dict[str, Any]:
    return {
        LAST_BACKFILL_DIRECTION: completion.direction.value,
        **layout_attributes(
            completion.source, LAST_BACKFILL_SOURCE_LAYOUT, LAST_BACKFILL_SOURCE_SHARD_COUNT
        ),
        **layout_attributes(
            completion.target, LAST_BACKFILL_TARGET_LAYOUT, LAST_BACKFILL_TARGET_SHARD_COUNT
        ),
        LAST_BACKFILL_STATE_VERSION: completion.state_version,
        LAST_BACKFILL_STARTED_AT: format_time(completion.started_at),
        LAST_BACKFILL_COMPLETED_AT: format_time(completion.completed_at),
        LAST_BACKFILL_SCANNED: completion.scanned,
        LAST_BACKFILL_RESTAMPED: completion.restamped,
        LAST_BACKFILL_ANOMALIES: completion.anomalies,
        LAST_BACKFILL_COMPLETE: completion.complete,
        LAST_BACKFILL_VERIFIED: completion.verified,
        LAST_BACKFILL_HOLDER: completion.holder,
        LAST_BACKFILL_LEASE_TOKEN: completion.lease_token,
    }


def wire_value(value: Any) -> Any:
    """A Python value as the codec accepts it (DynamoDB numbers are Decimals)."""
    if isinstance(value, float):
        return Decimal(str(value))
    return value


def present(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes with a value (None means absent)."""
    return {k: wire_value(v) for k, v in attributes.items() if v is not None}


def state_item(state: ControlState) -> dict[str, Any]:
    """The whole STATE item of a state (a restore writes it; updates write parts of it)."""
    if state.transition is None:
        raise InvalidInputError("a never-migrated state has no STATE item")
    attributes: dict[str, Any] = {
        **state_key(),
        ENTITY_TYPE: ENTITY_STATE,
        **transition_attributes(state.transition),
        BACKFILL_PAUSED: state.backfill_paused,
        BACKFILL_MAX_WRITES_PER_SECOND: state.backfill_max_writes_per_second,
    }
    if state.lease is not None:
        attributes.update(lease_attributes(state.lease))
    if state.last_backfill is not None:
        attributes.update(completion_attributes(state.last_backfill))
    return present(attributes)


def history_item(transition: Transition) -> dict[str, Any]:
    return present(
        {
            **history_key(transition.version),
            ENTITY_TYPE: ENTITY_HISTORY,
            **transition_attributes(transition),
        }
    )


@dataclass(frozen=True)
class ControlEvent:
    """A backfill control change (throttle, pause, resume, lease acquired or released)."""

    event: str
    changed_at: datetime
    changed_by: str
    event_id: str
    state_version: int
    reason: str = ""
    details: Mapping[str, Any] | None = None


def event_item(event: ControlEvent) -> dict[str, Any]:
    return present(
        {
            **(dict(event.details) if event.details else {}),
            TABLE_PARTITION_KEY: CONTROL_PK,
            TABLE_SORT_KEY: event_sk(event.changed_at, event.event_id),
            ENTITY_TYPE: ENTITY_EVENT,
            EVENT: event.event,
            EVENT_ID: event.event_id,
            CHANGED_AT: format_time(event.changed_at),
            CHANGED_BY: event.changed_by,
            REASON: event.reason or None,
            STATE_VERSION: event.state_version,
        }
    )
