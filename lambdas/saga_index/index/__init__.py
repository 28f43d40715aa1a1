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
    InvalidInputError,
    InvalidKeyError,
    RetryLaterError,
    SagaIndexError,
)
from saga_index.index.jobs import DRIFT_GUARD, JOBS_BY_NAME, SCHEDULED_JOBS, SWEEP_NAMES
from saga_index.index.keys import Person
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.model import ALL_STATES, OPEN_STATES, TERMINAL_STATES
from saga_index.index.names import (
    BACKFILL_THROTTLED_ERROR,
    CONTROL_PK,
    FENCE_PK_PREFIX,
    INDEX_NAME,
    MAX_CONCURRENT_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    MIN_WRITES_PER_SECOND,
    STACK_NAME,
)
from saga_index.index.shard import DEFAULT_SHARD_COUNT, MAX_SHARD_COUNT, shard, validate_shard_count

__all__ = [
    "ALL_STATES",
    "BACKFILL_THROTTLED_ERROR",
    "CONTROL_PK",
    "DEFAULT_SHARD_COUNT",
    "DRIFT_GUARD",
    "FENCE_PK_PREFIX",
    "INDEX_NAME",
    "JOBS_BY_NAME",
    "LEGACY",
    "MAX_CONCURRENT_SEGMENTS",
    "MAX_SHARD_COUNT",
    "MAX_WRITES_PER_SECOND",
    "MIN_WRITES_PER_SECOND",
    "OPEN_STATES",
    "SCHEDULED_JOBS",
    "STACK_NAME",
    "SWEEP_NAMES",
    "TERMINAL_STATES",
    "InvalidInputError",
    "InvalidKeyError",
    "Layout",
    "Person",
    "RetryLaterError",
    "SagaIndexError",
    "jobs",
    "keys",
    "names",
    "shard",
    "validate_shard_count",
]
