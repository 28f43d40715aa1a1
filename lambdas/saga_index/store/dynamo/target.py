"""What a reader or checker of the saga index points at: one value instead of four arguments."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from saga_index.index import DEFAULT_SHARD_COUNT, InvalidInputError, names, validate_shard_count

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class IndexTarget:
    """The client, the table, its renewal-saga index and the shard count N that routes rows.

    Built once at the edge (a handler's settings, the CLI's options) and handed to
    SagaRepository, DriftChecker and ParityVerifier (`from_target`). The table name is required
    and N is checked by the shard rule when the value is made.
    """

    client: DynamoDBClient
    table_name: str
    index_name: str = names.INDEX_NAME
    shard_count: int = DEFAULT_SHARD_COUNT

    def __post_init__(self) -> None:
        if not self.table_name:
            raise InvalidInputError("table_name is required")
        validate_shard_count(self.shard_count)
