"""Settings at the edge: each handler reads its environment once into a pydantic model.

Plain pydantic (shipped in the Powertools layer) instead of pydantic-settings, which the layer
does not carry: the functions must run with exactly the layer and the asset. Names match
infra/functions.py.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator

from saga_index.dynamo import make_client
from saga_index.keys import INDEX_NAME
from saga_index.model import Phase
from saga_index.repository import SagaRepository
from saga_index.shard import validate_shard_count


class HandlerSettings(BaseModel):
    """What every function needs: the table, the index, the phase and the shard count."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    table_name: str = Field(alias="SAGA_TABLE_NAME", min_length=3)
    index_name: str = Field(default=INDEX_NAME, alias="SAGA_INDEX_NAME")
    phase: Phase = Field(alias="SAGA_INDEX_PHASE")
    shard_count: int = Field(default=16, alias="SAGA_INDEX_SHARDS")
    max_attempts: int = Field(default=10, alias="SAGA_INDEX_MAX_ATTEMPTS", ge=1, le=50)

    @field_validator("shard_count")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        return validate_shard_count(value)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        return cls.model_validate(dict(os.environ if environ is None else environ))

    def dynamodb_client(self) -> Any:
        return make_client(max_attempts=self.max_attempts)

    def repository(self, client: Any) -> SagaRepository:
        return SagaRepository(
            client,
            self.table_name,
            phase=self.phase,
            shard_count=self.shard_count,
            index_name=self.index_name,
        )
