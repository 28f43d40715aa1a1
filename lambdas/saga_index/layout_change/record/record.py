"""The control items and their attributes (docs/control-contract.md, "The record").

  STATE    PK = "RSAGA_INDEX#CONTROL", SK = "STATE": the state every process follows
  HISTORY  PK = "RSAGA_INDEX#CONTROL", SK = "HISTORY#" + version (10 digits): one per transition
  EVENT    PK = "RSAGA_INDEX#CONTROL", SK = "EVENT#" + time + "#" + id: backfill control changes

The PK does not start with "RSAGA#", so nothing that looks for sagas sees these items. Every
attribute is flat (strings, numbers, booleans, lists of strings) so any language reads it
without a schema library; times are UTC ISO-8601 with milliseconds and a "Z", fixed width, so
they compare as strings in a ConditionExpression exactly as they compare as times.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Final

from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import LEGACY_KIND, SHARDED_KIND, Layout
from saga_index.index.names import CONTROL_PK, TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.errors import ControlRecordInvalidError
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    RecordCondition,
    Transition,
)

STATE_SK: Final = "STATE"
HISTORY_SK_PREFIX: Final = "HISTORY#"
EVENT_SK_PREFIX: Final = "EVENT#"
HISTORY_VERSION_DIGITS: Final = 10
ENTITY_STATE: Final = "RenewalSagaIndexControl"
ENTITY_HISTORY: Final = "RenewalSagaIndexControlHistory"
ENTITY_EVENT: Final = "RenewalSagaIndexControlEvent"

# ---- attribute names -------------------------------------------------------------------------
ENTITY_TYPE: Final = "entityType"
VERSION: Final = "version"
PHASE: Final = "phase"
LAYOUT: Final = "layout"
SHARD_COUNT: Final = "shardCount"
MOVING_TO_LAYOUT: Final = "movingToLayout"
MOVING_TO_SHARD_COUNT: Final = "movingToShardCount"
PREVIOUS_PHASE: Final = "previousPhase"
PREVIOUS_LAYOUT: Final = "previousLayout"
PREVIOUS_SHARD_COUNT: Final = "previousShardCount"
PREVIOUS_MOVING_TO_LAYOUT: Final = "previousMovingToLayout"
PREVIOUS_MOVING_TO_SHARD_COUNT: Final = "previousMovingToShardCount"
CHANGED_AT: Final = "changedAt"
CHANGED_BY: Final = "changedBy"
REASON: Final = "reason"
EFFECTIVE_AT: Final = "effectiveAt"
CHECKS_PASSED: Final = "checksPassed"
CHECKS_FORCED: Final = "checksForced"

LEASE_HOLDER: Final = "leaseHolder"
LEASE_TOKEN: Final = "leaseToken"  # noqa: S105 (an attribute name, not a secret)
LEASE_DIRECTION: Final = "leaseDirection"
LEASE_ACQUIRED_AT: Final = "leaseAcquiredAt"
LEASE_HEARTBEAT_AT: Final = "leaseHeartbeatAt"
LEASE_EXPIRES_AT: Final = "leaseExpiresAt"
LEASE_STATE_VERSION: Final = "leaseStateVersion"
LEASE_ATTRIBUTES: Final = (
    LEASE_HOLDER,
    LEASE_TOKEN,
    LEASE_DIRECTION,
    LEASE_ACQUIRED_AT,
    LEASE_HEARTBEAT_AT,
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
)

BACKFILL_MAX_WRITES_PER_SECOND: Final = "backfillMaxWritesPerSecond"
BACKFILL_PAUSED: Final = "backfillPaused"

LAST_BACKFILL_DIRECTION: Final = "lastBackfillDirection"
LAST_BACKFILL_SOURCE_LAYOUT: Final = "lastBackfillSourceLayout"
LAST_BACKFILL_SOURCE_SHARD_COUNT: Final = "lastBackfillSourceShardCount"
LAST_BACKFILL_TARGET_LAYOUT: Final = "lastBackfillTargetLayout"
LAST_BACKFILL_TARGET_SHARD_COUNT: Final = "lastBackfillTargetShardCount"
LAST_BACKFILL_STATE_VERSION: Final = "lastBackfillStateVersion"
LAST_BACKFILL_STARTED_AT: Final = "lastBackfillStartedAt"
LAST_BACKFILL_COMPLETED_AT: Final = "lastBackfillCompletedAt"
LAST_BACKFILL_SCANNED: Final = "lastBackfillScanned"
LAST_BACKFILL_RESTAMPED: Final = "lastBackfillRestamped"
LAST_BACKFILL_ANOMALIES: Final = "lastBackfillAnomalies"
LAST_BACKFILL_COMPLETE: Final = "lastBackfillComplete"
LAST_BACKFILL_VERIFIED: Final = "lastBackfillVerified"
LAST_BACKFILL_HOLDER: Final = "lastBackfillHolder"
LAST_BACKFILL_LEASE_TOKEN: Final = "lastBackfillLeaseToken"  # noqa: S105 (attribute name)

EVENT: Final = "event"
STATE_VERSION: Final = "stateVersion"
EVENT_ID: Final = "eventId"

_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


# ---- keys and times --------------------------------------------------------------------------


def state_key() -> dict[str, str]:
    return {TABLE_PARTITION_KEY: CONTROL_PK, TABLE_SORT_KEY: STATE_SK}


def history_sk(version: int) -> str:
    if version < 1 or version >= 10**HISTORY_VERSION_DIGITS:
        raise InvalidInputError(f"history version out of range: {version}")
    return f"{HISTORY_SK_PREFIX}{version:0{HISTORY_VERSION_DIGITS}d}"


def history_key(version: int) -> dict[str, str]:
    return {TABLE_PARTITION_KEY: CONTROL_PK, TABLE_SORT_KEY: history_sk(version)}


def event_sk(at: datetime, event_id: str) -> str:
    return f"{EVENT_SK_PREFIX}{format_time(at)}#{event_id}"


def to_millis(at: datetime) -> datetime:
    """`at` in UTC truncated to the millisecond: what a record can hold, so values round-trip."""
    if at.tzinfo is None:
        raise InvalidInputError(f"times must be timezone-aware, got {at!r}")
    at = at.astimezone(UTC)
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def format_time(at: datetime) -> str:
    at = to_millis(at)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def parse_time(value: object, attribute: str = "time") -> datetime:
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        raise ControlRecordInvalidError(
            f"{attribute} must be UTC ISO-8601 'YYYY-MM-DDTHH:MM:SS.mmmZ', got {value!r}"
        )
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    except ValueError as err:
        raise ControlRecordInvalidError(f"{attribute} is not a time: {value!r}") from err


# ---- encoding (Python values; store.dynamo.codec.serialize makes them wire values) --------


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


# ---- decoding (deserialised items; anything malformed is ControlRecordInvalidError) -----------


def parse_state_item(item: Mapping[str, Any]) -> ControlState:
    _expect_entity(item, ENTITY_STATE)
    return ControlState(
        transition=parse_transition(item),
        condition=RecordCondition.PRESENT,
        lease=_parse_lease(item),
        backfill_max_writes_per_second=_optional_rate(item),
        backfill_paused=_bool(item, BACKFILL_PAUSED, default=False),
        last_backfill=_parse_completion(item),
    )


def parse_history_item(item: Mapping[str, Any]) -> Transition:
    _expect_entity(item, ENTITY_HISTORY)
    transition = parse_transition(item)
    if item.get(TABLE_SORT_KEY) != history_sk(transition.version):
        raise ControlRecordInvalidError(
            f"history item {item.get(TABLE_SORT_KEY)!r} holds version {transition.version}"
        )
    return transition


def parse_transition(item: Mapping[str, Any]) -> Transition:
    try:
        layout = _layout(item, LAYOUT, SHARD_COUNT)
        if layout is None:
            raise ControlRecordInvalidError(f"{LAYOUT} is missing")
        previous = _layout(item, PREVIOUS_LAYOUT, PREVIOUS_SHARD_COUNT)
        if previous is None:
            raise ControlRecordInvalidError(f"{PREVIOUS_LAYOUT} is missing")
        transition = Transition(
            version=_int(item, VERSION),
            layout=layout,
            moving_to=_layout(item, MOVING_TO_LAYOUT, MOVING_TO_SHARD_COUNT),
            previous_layout=previous,
            previous_moving_to=_layout(
                item, PREVIOUS_MOVING_TO_LAYOUT, PREVIOUS_MOVING_TO_SHARD_COUNT
            ),
            changed_at=parse_time(item.get(CHANGED_AT), CHANGED_AT),
            changed_by=_str(item, CHANGED_BY),
            reason=_str(item, REASON),
            effective_at=parse_time(item.get(EFFECTIVE_AT), EFFECTIVE_AT),
            checks_passed=_str_list(item, CHECKS_PASSED),
            checks_forced=_str_list(item, CHECKS_FORCED),
        )
    except ControlRecordInvalidError:
        raise
    except InvalidInputError as err:
        raise ControlRecordInvalidError(f"control item does not parse: {err}") from err
    stored_phase = item.get(PHASE)
    if stored_phase != transition.phase.value:
        raise ControlRecordInvalidError(
            f"{PHASE} {stored_phase!r} disagrees with its layouts ({transition.phase.value!r})"
        )
    return transition


def _parse_lease(item: Mapping[str, Any]) -> Lease | None:
    if item.get(LEASE_TOKEN) is None:
        return None
    try:
        direction = BackfillDirection.parse(item.get(LEASE_DIRECTION))
    except InvalidInputError as err:
        raise ControlRecordInvalidError(f"{LEASE_DIRECTION}: {err}") from err
    return Lease(
        holder=_str(item, LEASE_HOLDER),
        token=_str(item, LEASE_TOKEN),
        direction=direction,
        acquired_at=parse_time(item.get(LEASE_ACQUIRED_AT), LEASE_ACQUIRED_AT),
        heartbeat_at=parse_time(item.get(LEASE_HEARTBEAT_AT), LEASE_HEARTBEAT_AT),
        expires_at=parse_time(item.get(LEASE_EXPIRES_AT), LEASE_EXPIRES_AT),
        state_version=_int(item, LEASE_STATE_VERSION),
    )


def _parse_completion(item: Mapping[str, Any]) -> BackfillCompletion | None:
    if item.get(LAST_BACKFILL_DIRECTION) is None:
        return None
    try:
        direction = BackfillDirection.parse(item.get(LAST_BACKFILL_DIRECTION))
        source = _layout(item, LAST_BACKFILL_SOURCE_LAYOUT, LAST_BACKFILL_SOURCE_SHARD_COUNT)
        target = _layout(item, LAST_BACKFILL_TARGET_LAYOUT, LAST_BACKFILL_TARGET_SHARD_COUNT)
    except InvalidInputError as err:
        raise ControlRecordInvalidError(f"last backfill does not parse: {err}") from err
    if source is None or target is None:
        raise ControlRecordInvalidError("last backfill lacks its source or target layout")
    return BackfillCompletion(
        direction=direction,
        source=source,
        target=target,
        state_version=_int(item, LAST_BACKFILL_STATE_VERSION),
        started_at=parse_time(item.get(LAST_BACKFILL_STARTED_AT), LAST_BACKFILL_STARTED_AT),
        completed_at=parse_time(item.get(LAST_BACKFILL_COMPLETED_AT), LAST_BACKFILL_COMPLETED_AT),
        scanned=_int(item, LAST_BACKFILL_SCANNED),
        restamped=_int(item, LAST_BACKFILL_RESTAMPED),
        anomalies=_int(item, LAST_BACKFILL_ANOMALIES),
        complete=_bool(item, LAST_BACKFILL_COMPLETE),
        verified=_bool(item, LAST_BACKFILL_VERIFIED),
        holder=_str(item, LAST_BACKFILL_HOLDER),
        lease_token=_str(item, LAST_BACKFILL_LEASE_TOKEN),
    )


def _expect_entity(item: Mapping[str, Any], entity: str) -> None:
    if item.get(TABLE_PARTITION_KEY) != CONTROL_PK or item.get(ENTITY_TYPE) != entity:
        raise ControlRecordInvalidError(
            f"not a {entity} item: PK={item.get(TABLE_PARTITION_KEY)!r}, "
            f"{ENTITY_TYPE}={item.get(ENTITY_TYPE)!r}"
        )


def _layout(item: Mapping[str, Any], kind_name: str, count_name: str) -> Layout | None:
    kind = item.get(kind_name)
    if kind is None:
        if item.get(count_name) is not None:
            raise ControlRecordInvalidError(f"{count_name} is set but {kind_name} is not")
        return None
    if kind == LEGACY_KIND:
        if item.get(count_name) is not None:
            raise ControlRecordInvalidError(f"{count_name} must be absent for a legacy layout")
        return Layout.legacy()
    if kind == SHARDED_KIND:
        try:
            return Layout.sharded(_int(item, count_name))
        except InvalidInputError as err:
            raise ControlRecordInvalidError(f"{count_name}: {err}") from err
    raise ControlRecordInvalidError(f"{kind_name} must be 'legacy' or 'sharded', got {kind!r}")


def _int(item: Mapping[str, Any], name: str) -> int:
    value = item.get(name)
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ControlRecordInvalidError(f"{name} must be a number, got {value!r}")
    if isinstance(value, Decimal) and value != value.to_integral_value():
        raise ControlRecordInvalidError(f"{name} must be an integer, got {value}")
    return int(value)


def _optional_rate(item: Mapping[str, Any]) -> float | None:
    value = item.get(BACKFILL_MAX_WRITES_PER_SECOND)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ControlRecordInvalidError(
            f"{BACKFILL_MAX_WRITES_PER_SECOND} must be a number, got {value!r}"
        )
    return float(value)


def _str(item: Mapping[str, Any], name: str) -> str:
    value = item.get(name)
    if not isinstance(value, str):
        raise ControlRecordInvalidError(f"{name} must be a string, got {value!r}")
    return value


def _bool(item: Mapping[str, Any], name: str, *, default: bool | None = None) -> bool:
    value = item.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, bool):
        raise ControlRecordInvalidError(f"{name} must be a boolean, got {value!r}")
    return value


def _str_list(item: Mapping[str, Any], name: str) -> tuple[str, ...]:
    value = item.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ControlRecordInvalidError(f"{name} must be a list of strings, got {value!r}")
    return tuple(value)
