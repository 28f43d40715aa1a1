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

from saga_index.index import (
    CONTROL_PK,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    InvalidInputError,
    Layout,
)
from saga_index.layout_change.record.items import (
    CHANGED_AT,
    CHANGED_BY,
    ENTITY_EVENT,
    ENTITY_HISTORY,
    ENTITY_STATE,
    ENTITY_TYPE,
    EVENT,
    EVENT_ID,
    LEASE_KIND,
    REASON,
    STATE_VERSION,
    event_sk,
    history_key,
    state_key,
)
from saga_index.layout_change.record.open_index import OpenIndex
from saga_index.layout_change.record.schema import (
    COMPLETION,
    CONTROLS,
    LEASE,
    TRANSITION,
    Attribute,
    Part,
    Value,
)
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillKind,
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


def open_index_attributes(index: OpenIndex, kind_name: str, count_name: str) -> dict[str, Any]:
    """The open index's two attributes; `off` is written as absent (which reads as `off`), so
    an item of a table that never used the open index is the item it was before it existed."""
    if index.is_off:
        return {kind_name: None, count_name: None}
    return {kind_name: index.state.value, count_name: index.shard_count}


def part_attributes(part: Part, source: object) -> dict[str, Any]:
    """Every attribute of `part` as written from `source` (its dataclass), in the table's order;
    None means absent."""
    written: dict[str, Any] = {}
    for attribute in part.attributes:
        if attribute.value is Value.SHARD_COUNT:
            continue  # written with its layout
        assert attribute.source is not None
        value = getattr(source, attribute.source)
        if attribute.value is Value.LAYOUT:
            assert attribute.count is not None
            written.update(layout_attributes(value, attribute.name, attribute.count))
        elif attribute.value is Value.OPEN_INDEX:
            assert attribute.count is not None
            written.update(open_index_attributes(value, attribute.name, attribute.count))
        else:
            written[attribute.name] = _encoded(attribute, value)
    return written


def _encoded(attribute: Attribute, value: Any) -> Any:
    if value is None:
        return None
    if attribute.value is Value.TIME:
        return format_time(value)
    if attribute.value is Value.STRINGS:
        return list(value)
    if attribute.value in (Value.PHASE, Value.DIRECTION):
        return value.value
    return value


def transition_attributes(transition: Transition) -> dict[str, Any]:
    """Every attribute a transition writes, on the STATE item and on its HISTORY item."""
    return part_attributes(TRANSITION, transition)


def lease_attributes(lease: Lease) -> dict[str, Any]:
    written = part_attributes(LEASE, lease)
    # A layout run's lease is the item it was before runs had kinds (absent reads as layout).
    written[LEASE_KIND] = None if lease.kind is BackfillKind.LAYOUT else lease.kind.value
    return written


def completion_attributes(completion: BackfillCompletion) -> dict[str, Any]:
    return part_attributes(COMPLETION, completion)


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
        **part_attributes(CONTROLS, state),
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
