"""Global options, shared by every subcommand, and the objects they build."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from saga_index.dynamo.client import make_client
from saga_index.dynamo.codec import to_plain_json
from saga_index.model import Phase
from saga_index.repository import SagaRepository


@dataclass
class CliContext:
    table: str | None
    endpoint_url: str | None
    region: str | None
    shards: int
    phase: Phase
    max_attempts: int
    _client: Any = field(default=None, repr=False)

    def require_table(self) -> str:
        if not self.table:
            raise click.UsageError(
                "no table given: pass --table NAME or set SAGA_TABLE_NAME", ctx=None
            )
        return self.table

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(
                region=self.region, endpoint_url=self.endpoint_url, max_attempts=self.max_attempts
            )
        return self._client

    def repository(self) -> SagaRepository:
        table = self.require_table()
        return SagaRepository(self.client, table, phase=self.phase, shard_count=self.shards)


pass_cli = click.make_pass_decorator(CliContext)


def emit(obj: Any) -> None:
    """One JSON value per line on stdout: the data channel, nothing else goes there."""
    sys.stdout.write(json.dumps(to_plain_json(obj), ensure_ascii=False, sort_keys=True) + "\n")
