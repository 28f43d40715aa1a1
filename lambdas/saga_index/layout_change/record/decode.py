"""The control items as read: deserialised items back into states and transitions, strictly
(docs/control-contract.md: a reader refuses what does not parse); anything malformed is
ControlRecordInvalidError.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import LEGACY_KIND, SHARDED_KIND, Layout
from saga_index.index.names import CONTROL_PK, TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.errors import ControlRecordInvalidError
from saga_index.layout_change.record.items import (
    BACKFILL_MAX_WRITES_PER_SECOND,
    BACKFILL_PAUSED,
    CHANGED_AT,
    CHANGED_BY,
    CHECKS_FORCED,
    CHECKS_PASSED,
    EFFECTIVE_AT,
    ENTITY_HISTORY,
    ENTITY_STATE,
    ENTITY_TYPE,
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
    PREVIOUS_SHARD_COUNT,
    PRIOR_WRITE_LAYOUT,
    PRIOR_WRITE_SHARD_COUNT,
    REASON,
    SHARD_COUNT,
    VERSION,
    history_sk,
)
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    RecordCondition,
    Transition,
)
from saga_index.layout_change.record.times import parse_time


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
            # Absent on items written before writers switched at effectiveAt: then writers
            # stamped the source (moving) or the current layout, which is the default.
            prior_write=_layout(item, PRIOR_WRITE_LAYOUT, PRIOR_WRITE_SHARD_COUNT),
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
