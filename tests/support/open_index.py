"""What the open-saga index's tests share: the index on a test table (added as the owning stack
or the AWS CLI command adds it, when the synthesised template does not have it yet) and
readiness verdicts standing for DescribeTable's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from saga_index.index import names


@dataclass(frozen=True)
class Verdict:
    """A readiness verdict as saga_index.store's open_index_readiness gives one."""

    ready: bool
    exists: bool
    problem: str | None
    index_status: str | None = "ACTIVE"
    backfilling: bool | None = False
    keys_as_expected: bool | None = True
    projection_as_expected: bool | None = True


READY = Verdict(True, True, None)
MISSING = Verdict(
    False,
    False,
    f"the table has no index {names.OPEN_INDEX_NAME}: add it (docs/deploy.md)",
    index_status=None,
    backfilling=None,
    keys_as_expected=None,
    projection_as_expected=None,
)
BUILDING = Verdict(
    False,
    True,
    f"{names.OPEN_INDEX_NAME} is CREATING (Backfilling): wait until it is ACTIVE",
    index_status="CREATING",
    backfilling=True,
)
MISBUILT = Verdict(
    False,
    True,
    f"{names.OPEN_INDEX_NAME} projects KEYS_ONLY: delete it and add it again",
    projection_as_expected=False,
)


def readiness_of(verdict: Verdict) -> Any:
    """A readiness callable that answers `verdict` and counts its calls."""
    calls: list[str] = []

    def readiness(_client: Any, table_name: str) -> Verdict:
        calls.append(table_name)
        return verdict

    readiness.calls = calls  # type: ignore[attr-defined]
    return readiness


def add_open_index(client: Any, table_name: str) -> None:
    """Add the open index to the table unless it has it (moto builds it ACTIVE at once)."""
    table = client.describe_table(TableName=table_name)["Table"]
    indexes = table.get("GlobalSecondaryIndexes", [])
    if any(i["IndexName"] == names.OPEN_INDEX_NAME for i in indexes):
        return
    client.update_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": names.OPEN_INDEX_SORT_KEY, "AttributeType": "S"},
        ],
        GlobalSecondaryIndexUpdates=[
            {
                "Create": {
                    "IndexName": names.OPEN_INDEX_NAME,
                    "KeySchema": [
                        {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "KeyType": "HASH"},
                        {"AttributeName": names.OPEN_INDEX_SORT_KEY, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            }
        ],
    )


def drop_open_index(client: Any, table_name: str) -> None:
    """Delete the open index from the table (a table whose owner has not added it yet)."""
    client.update_table(
        TableName=table_name,
        GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": names.OPEN_INDEX_NAME}}],
    )
