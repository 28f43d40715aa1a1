"""Settings at the edge: each function reads its environment once into one of these models.

Plain pydantic (shipped in the Powertools layer) instead of pydantic-settings, which the layer
does not carry: the functions must run with exactly the layer and the asset. The variable names
are saga_index.index.names', which infra/functions.py sets.

No migration state here: the phase and the shard count are the control record's, read at run
time through handlers.runtime's provider (docs/control-contract.md), never the environment's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from saga_index.index import OPEN_STATES, names
from saga_index.layout_change.backfill import DEFAULT_SAFETY_MARGIN_SECONDS
from saga_index.layout_change.checks.drift import DEFAULT_OPEN_RECHECK_SECONDS, DEFAULT_SCAN_EVERY
from saga_index.layout_change.record import Routing
from saga_index.store import SagaRepository
from saga_index.store.dynamo import DEFAULT_KEY_READ_UNITS, PAGE_READ_UNITS, PARTITION_READ_UNITS
from saga_index.sweeps import (
    DEFAULT_HEARTBEAT_THRESHOLD,
    DEFAULT_MAX_PREPARE_ATTEMPTS,
    DEFAULT_PREPARE_BACKOFF,
    DEFAULT_STUCK_THRESHOLD,
    HealthPolicy,
    RetryPolicy,
    StuckPolicy,
)


class HandlerSettings(BaseModel):
    """What every function needs: the table, its index and the client's retry budget."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    table_name: str = Field(alias=names.ENV_TABLE, min_length=3)
    index_name: str = Field(default=names.INDEX_NAME, alias=names.ENV_INDEX)
    max_attempts: int = Field(default=10, alias=names.ENV_MAX_ATTEMPTS, ge=1, le=50)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls.model_validate(dict(os.environ if environ is None else environ))

    def repository(self, client: Any, routing: Routing) -> SagaRepository:
        return SagaRepository(client, self.table_name, plan=routing, index_name=self.index_name)


class WorkerSettings(HandlerSettings):
    # Time kept back from the Lambda timeout: one write with botocore's backoff must fit in it.
    safety_margin_seconds: float = Field(
        default=DEFAULT_SAFETY_MARGIN_SECONDS, alias=names.ENV_BACKFILL_SAFETY_MARGIN, gt=0
    )


class DriftGuardSettings(HandlerSettings):
    scan_every: int = Field(
        default=DEFAULT_SCAN_EVERY, alias=names.ENV_DRIFT_SCAN_EVERY, ge=1, le=names.MAX_SCAN_EVERY
    )
    period_minutes: int = Field(default=5, alias=names.ENV_DRIFT_PERIOD_MINUTES, ge=1, le=60)
    scan_segments: int = Field(default=4, alias=names.ENV_DRIFT_SCAN_SEGMENTS, ge=1, le=64)
    scan_read_units_per_second: float = Field(
        default=400.0, alias=names.ENV_DRIFT_SCAN_RATE, gt=0, le=40_000
    )
    # Read units on any one index key in any second: above one page's cost, at most a
    # partition's ceiling (KeyReadPace checks the same).
    index_read_units_per_key: float = Field(
        default=DEFAULT_KEY_READ_UNITS,
        alias=names.ENV_DRIFT_KEY_READ_UNITS,
        gt=PAGE_READ_UNITS,
        le=PARTITION_READ_UNITS,
    )
    # The wait before the open index's differences are read again (its GSI's lag).
    open_recheck_seconds: float = Field(
        default=DEFAULT_OPEN_RECHECK_SECONDS,
        alias=names.ENV_DRIFT_OPEN_RECHECK_SECONDS,
        ge=0,
        le=60,
    )


def _minutes(duration: timedelta) -> int:
    return int(duration.total_seconds() // 60)


class SweepSettings(HandlerSettings):
    """Thresholds of every sweep, with the issue's defaults; names are environment variables."""

    heartbeat_threshold_minutes: int = Field(
        default=_minutes(DEFAULT_HEARTBEAT_THRESHOLD), alias=names.ENV_HEARTBEAT_THRESHOLD, gt=0
    )
    prepare_max_attempts: int = Field(
        default=DEFAULT_MAX_PREPARE_ATTEMPTS, alias=names.ENV_PREPARE_MAX_ATTEMPTS, ge=1, le=20
    )
    prepare_backoff_minutes: int = Field(
        default=_minutes(DEFAULT_PREPARE_BACKOFF), alias=names.ENV_PREPARE_BACKOFF, gt=0
    )
    stuck_threshold_minutes: int = Field(
        default=_minutes(DEFAULT_STUCK_THRESHOLD), alias=names.ENV_STUCK_THRESHOLD, gt=0
    )
    # JSON object, e.g. {"PREPARING": 120}: per-state overrides of the stuck threshold.
    stuck_state_thresholds_minutes: dict[str, int] = Field(
        default_factory=dict, alias=names.ENV_STUCK_STATE_THRESHOLDS
    )

    @field_validator("stuck_state_thresholds_minutes", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except json.JSONDecodeError as err:
                raise ValueError(
                    f"{names.ENV_STUCK_STATE_THRESHOLDS} must be a JSON object of state to "
                    f"minutes, got {value!r}: {err}"
                ) from None
        return value

    @field_validator("stuck_state_thresholds_minutes")
    @classmethod
    def _open_states(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(OPEN_STATES))
        if unknown:
            raise ValueError(f"not open states: {unknown}; open states: {list(OPEN_STATES)}")
        bad = {state: m for state, m in value.items() if m <= 0}
        if bad:
            raise ValueError(f"thresholds must be positive minutes, got {bad}")
        return value

    def health_policy(self) -> HealthPolicy:
        return HealthPolicy(threshold=timedelta(minutes=self.heartbeat_threshold_minutes))

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.prepare_max_attempts,
            base_backoff=timedelta(minutes=self.prepare_backoff_minutes),
        )

    def stuck_policy(self) -> StuckPolicy:
        return StuckPolicy(
            default_threshold=timedelta(minutes=self.stuck_threshold_minutes),
            per_state={
                state: timedelta(minutes=m)
                for state, m in self.stuck_state_thresholds_minutes.items()
            },
        )


class EventSweepSettings(SweepSettings):
    """The sweeps that emit events also need their bus."""

    event_bus_name: str = Field(alias=names.ENV_EVENT_BUS, min_length=1)
