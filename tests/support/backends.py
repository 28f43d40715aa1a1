"""A DynamoDB backend for one test: a fresh table created from the synthesised template."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

from devkit.schema import create_table
from saga_index.index import keys
from saga_index.store.dynamo.client import make_client
from saga_index.store.dynamo.codec import serialize

_table_numbers = itertools.count()
# Under pytest-xdist each worker counts from 0: its name keeps the tables of two workers apart
# even on one server (each worker starts its own dynalite, so this is only a second fence).
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@dataclass
class Backend:
    name: str
    client: Any
    table_name: str
    endpoint_url: str | None

    def new_client(self, max_attempts: int = 3) -> Any:
        """A separate client (own event hooks), e.g. a concurrent writer."""
        return make_client(
            region="us-east-1", endpoint_url=self.endpoint_url, max_attempts=max_attempts
        )

    def put_saga(
        self,
        saga_id: str,
        person_id: Any,
        *,
        gsi4pk: str | None = None,
        state: str = "OPENED",
        opened_at: str = "2026-01-01T00:00:00.000Z",
        shard_count: int = 16,
        **extra: Any,
    ) -> dict[str, Any]:
        """Write a saga row exactly as given (raw put: lets tests plant legacy or odd rows)."""
        item: dict[str, Any] = {
            **keys.saga_table_key(saga_id),
            "entityType": keys.ENTITY_TYPE,
            "sagaId": saga_id,
            "leaseId": f"lease-{saga_id}",
            "openedAt": opened_at,
            "state": state,
            "updatedAt": opened_at,
            **extra,
        }
        if person_id is not None:
            item["personId"] = person_id
        if gsi4pk is None:
            gsi4pk = keys.LEGACY_GSI4PK
        elif gsi4pk == "shard":
            gsi4pk = keys.shard_gsi4pk_for_person(person_id, shard_count)
        item["GSI4PK"] = gsi4pk
        sort_person = person_id if isinstance(person_id, str) and person_id else "?"
        item.setdefault("GSI4SK", f"{sort_person}#{opened_at}")
        item = {k: v for k, v in item.items() if v is not None}
        self.client.put_item(TableName=self.table_name, Item=serialize(item))
        return item

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key={"PK": {"S": pk}, "SK": {"S": sk}},
            ConsistentRead=True,
        )
        return response.get("Item")

    def scan_all(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": self.table_name, "ConsistentRead": True}
        while True:
            page = self.client.scan(**request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def make_backend(name: str, template: dict[str, Any], endpoint_url: str | None) -> Backend:
    table_name = f"sagas-{name}-{_WORKER}-{next(_table_numbers)}"
    client = make_client(region="us-east-1", endpoint_url=endpoint_url, max_attempts=3)
    create_table(client, table_name, template)
    return Backend(name=name, client=client, table_name=table_name, endpoint_url=endpoint_url)
