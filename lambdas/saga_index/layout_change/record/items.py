"""The control items' keys and attribute names (docs/control-contract.md, "The record").

  STATE    PK = "RSAGA_INDEX#CONTROL", SK = "STATE": the state every process follows
  HISTORY  PK = "RSAGA_INDEX#CONTROL", SK = "HISTORY#" + version (10 digits): one per transition
  EVENT    PK = "RSAGA_INDEX#CONTROL", SK = "EVENT#" + time + "#" + id: backfill control changes
  FENCE    PK = "RSAGA_INDEX#FENCE#" + slot, SK = "FENCE": the backfill's fence slots, one
           partition key each (layout_change.backfill.fence), outside the control partition

The PK does not start with "RSAGA#", so nothing that looks for sagas sees these items. Every
attribute is flat (strings, numbers, booleans, lists of strings) so any language reads it
without a schema library; record/schema.py declares what each STATE and HISTORY attribute holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from saga_index.index import (
    CONTROL_PK,
    FENCE_PK_PREFIX,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    InvalidInputError,
)
from saga_index.layout_change.record.times import format_time

STATE_SK: Final = "STATE"
HISTORY_SK_PREFIX: Final = "HISTORY#"
EVENT_SK_PREFIX: Final = "EVENT#"
HISTORY_VERSION_DIGITS: Final = 10
ENTITY_STATE: Final = "RenewalSagaIndexControl"
ENTITY_HISTORY: Final = "RenewalSagaIndexControlHistory"
ENTITY_EVENT: Final = "RenewalSagaIndexControlEvent"
FENCE_SK: Final = "FENCE"
ENTITY_FENCE: Final = "RenewalSagaIndexFence"

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
# The layout writers stamp until effectiveAt (from then on: movingTo, else the current layout).
PRIOR_WRITE_LAYOUT: Final = "priorWriteLayout"
PRIOR_WRITE_SHARD_COUNT: Final = "priorWriteShardCount"
CHANGED_AT: Final = "changedAt"
CHANGED_BY: Final = "changedBy"
REASON: Final = "reason"
EFFECTIVE_AT: Final = "effectiveAt"
CHECKS_PASSED: Final = "checksPassed"
CHECKS_FORCED: Final = "checksForced"
# The sparse open-saga index's state and its N (record/open_index.py), and the state's before.
OPEN_INDEX: Final = "openIndex"
OPEN_INDEX_SHARD_COUNT: Final = "openIndexShardCount"
PREVIOUS_OPEN_INDEX: Final = "previousOpenIndex"
PREVIOUS_OPEN_INDEX_SHARD_COUNT: Final = "previousOpenIndexShardCount"

LEASE_HOLDER: Final = "leaseHolder"
LEASE_TOKEN: Final = "leaseToken"  # noqa: S105 (an attribute name, not a secret)
LEASE_DIRECTION: Final = "leaseDirection"
LEASE_ACQUIRED_AT: Final = "leaseAcquiredAt"
LEASE_HEARTBEAT_AT: Final = "leaseHeartbeatAt"
LEASE_EXPIRES_AT: Final = "leaseExpiresAt"
LEASE_STATE_VERSION: Final = "leaseStateVersion"
# The pace the running backfill chose and why, as of its last heartbeat (`status` shows it).
LEASE_PACE: Final = "leasePace"
# What the run holding the lease changes (record/state.py BackfillKind); absent: the layout.
LEASE_KIND: Final = "leaseKind"
LEASE_ATTRIBUTES: Final = (
    LEASE_HOLDER,
    LEASE_TOKEN,
    LEASE_DIRECTION,
    LEASE_ACQUIRED_AT,
    LEASE_HEARTBEAT_AT,
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
    LEASE_PACE,
    LEASE_KIND,
)

# The fencing epoch of the latest lease taken: strictly increasing, kept after a release.
LEASE_EPOCH: Final = "leaseEpoch"

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

# On HISTORY items (record/history.py): whether the item's STATE write was confirmed, and
# whether its writer saw that write fail.
HISTORY_APPLIED: Final = "applied"
HISTORY_ABANDONED: Final = "abandoned"

EVENT: Final = "event"
STATE_VERSION: Final = "stateVersion"
EVENT_ID: Final = "eventId"

# On FENCE slots (with LEASE_TOKEN and STATE_VERSION): the epoch that armed the slot, when and
# by whom; slot 0 also holds the high-water mark of slots any run armed.
FENCE_EPOCH: Final = "epoch"
FENCE_ARMED_AT: Final = "armedAt"
FENCE_ARMED_BY: Final = "armedBy"
FENCE_SLOTS: Final = "slots"


# ---- keys ----------------------------------------------------------------------------------


def state_key() -> dict[str, str]:
    return {TABLE_PARTITION_KEY: CONTROL_PK, TABLE_SORT_KEY: STATE_SK}


def fence_slot_key(slot: int) -> dict[str, str]:
    """The key of fence slot `slot` (segment `slot` of a run checks it)."""
    if isinstance(slot, bool) or not isinstance(slot, int) or slot < 0:
        raise InvalidInputError(f"a fence slot is a non-negative integer, got {slot!r}")
    return {TABLE_PARTITION_KEY: f"{FENCE_PK_PREFIX}{slot}", TABLE_SORT_KEY: FENCE_SK}


def history_sk(version: int) -> str:
    if version < 1 or version >= 10**HISTORY_VERSION_DIGITS:
        raise InvalidInputError(f"history version out of range: {version}")
    return f"{HISTORY_SK_PREFIX}{version:0{HISTORY_VERSION_DIGITS}d}"


def history_key(version: int) -> dict[str, str]:
    return {TABLE_PARTITION_KEY: CONTROL_PK, TABLE_SORT_KEY: history_sk(version)}


def event_sk(at: datetime, event_id: str) -> str:
    return f"{EVENT_SK_PREFIX}{format_time(at)}#{event_id}"
