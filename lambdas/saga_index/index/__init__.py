"""The permanent key scheme of the renewal-saga index: what every service needs forever.

  names    every name more than one layer spells (no dependencies: infra imports it)
  errors   the domain errors
  shard    the shard contract: SHA-256(personId)[0:4] mod N
  keys     every key string of a saga row, built and parsed
  layout   a layout: where a row's GSI4PK points (legacy, or sharded(N))
  model    saga states

Nothing here knows that layouts change: that is saga_index.layout_change.
"""

from saga_index.index import jobs, keys, names
from saga_index.index.errors import (
    EnumerationError,
    InvalidInputError,
    InvalidKeyError,
    InvalidPersonIdError,
    RetryLaterError,
    SagaAlreadyExistsError,
    SagaConflictError,
    SagaIndexError,
)
from saga_index.index.jobs import DRIFT_GUARD, JOBS_BY_NAME, SCHEDULED_JOBS, SWEEP_NAMES
from saga_index.index.keys import (
    Person,
    all_open_index_pks,
    open_index_pk,
    sharded_gsi4pk,
    validate_person_id,
)
from saga_index.index.layout import LEGACY, LEGACY_KIND, SHARDED_KIND, Layout, LayoutKind
from saga_index.index.model import OPEN_STATES, TERMINAL_STATES, validate_state
from saga_index.index.names import (
    BACKFILL_SEGMENT_TEMPLATE_FIELDS,
    BACKFILL_THROTTLED_ERROR,
    CONTROL_PK,
    FENCE_PK_PREFIX,
    INDEX_NAME,
    INDEX_PARTITION_KEY,
    MAX_CONCURRENT_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    METRIC_ANOMALIES,
    METRIC_PACE_PAUSES,
    METRIC_RESTAMPED,
    METRIC_SCANNED,
    METRIC_SKIPPED,
    METRIC_SOURCE_KEY_ROWS,
    METRIC_THROTTLES,
    METRIC_UNEXPECTED_SOURCE_KEY_ROWS,
    METRIC_WOULD_RESTAMP,
    MIN_WRITES_PER_SECOND,
    OPEN_INDEX_KEY_PREFIX,
    OPEN_INDEX_NAME,
    OPEN_INDEX_PARTITION_KEY,
    OPEN_INDEX_SORT_KEY,
    STACK_NAME,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
)
from saga_index.index.shard import DEFAULT_SHARD_COUNT, MAX_SHARD_COUNT, shard, validate_shard_count

__all__ = [
    "BACKFILL_SEGMENT_TEMPLATE_FIELDS",
    "BACKFILL_THROTTLED_ERROR",
    "CONTROL_PK",
    "DEFAULT_SHARD_COUNT",
    "DRIFT_GUARD",
    "FENCE_PK_PREFIX",
    "INDEX_NAME",
    "INDEX_PARTITION_KEY",
    "JOBS_BY_NAME",
    "LEGACY",
    "LEGACY_KIND",
    "MAX_CONCURRENT_SEGMENTS",
    "MAX_SHARD_COUNT",
    "MAX_WRITES_PER_SECOND",
    "METRIC_ANOMALIES",
    "METRIC_PACE_PAUSES",
    "METRIC_RESTAMPED",
    "METRIC_SCANNED",
    "METRIC_SKIPPED",
    "METRIC_SOURCE_KEY_ROWS",
    "METRIC_THROTTLES",
    "METRIC_UNEXPECTED_SOURCE_KEY_ROWS",
    "METRIC_WOULD_RESTAMP",
    "MIN_WRITES_PER_SECOND",
    "OPEN_INDEX_KEY_PREFIX",
    "OPEN_INDEX_NAME",
    "OPEN_INDEX_PARTITION_KEY",
    "OPEN_INDEX_SORT_KEY",
    "OPEN_STATES",
    "SCHEDULED_JOBS",
    "SHARDED_KIND",
    "STACK_NAME",
    "SWEEP_NAMES",
    "TABLE_PARTITION_KEY",
    "TABLE_SORT_KEY",
    "TERMINAL_STATES",
    "EnumerationError",
    "InvalidInputError",
    "InvalidKeyError",
    "InvalidPersonIdError",
    "Layout",
    "LayoutKind",
    "Person",
    "RetryLaterError",
    "SagaAlreadyExistsError",
    "SagaConflictError",
    "SagaIndexError",
    "all_open_index_pks",
    "jobs",
    "keys",
    "names",
    "open_index_pk",
    "shard",
    "sharded_gsi4pk",
    "validate_person_id",
    "validate_shard_count",
    "validate_state",
]
