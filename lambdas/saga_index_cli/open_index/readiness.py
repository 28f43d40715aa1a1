"""Whether the open-saga index is there to move to: one DescribeTable (its IndexStatus and
Backfilling), the verdict `change_open_index` requires before a move that stamps or reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from saga_index.index import names


@dataclass(frozen=True)
class IndexVerdict:
    ready: bool
    exists: bool
    problem: str | None


def describe_open_index(client: Any, table_name: str) -> IndexVerdict:
    """The open index on `table_name`: missing, still being built, or ready."""
    table = client.describe_table(TableName=table_name)["Table"]
    index = next(
        (
            i
            for i in table.get("GlobalSecondaryIndexes", [])
            if i.get("IndexName") == names.OPEN_INDEX_NAME
        ),
        None,
    )
    if index is None:
        return IndexVerdict(
            False,
            False,
            f"table {table_name} has no index {names.OPEN_INDEX_NAME}: add it first (its owning "
            "stack's open index, or the AWS CLI command in docs/deploy.md), then wait until it "
            "is ACTIVE",
        )
    status, backfilling = index.get("IndexStatus"), bool(index.get("Backfilling"))
    if status != "ACTIVE" or backfilling:
        return IndexVerdict(
            False,
            True,
            f"{names.OPEN_INDEX_NAME} on {table_name} is {status}"
            f"{' and still backfilling' if backfilling else ''}: DynamoDB is building it; wait "
            "until it is ACTIVE with its backfill finished",
        )
    return IndexVerdict(True, True, None)
