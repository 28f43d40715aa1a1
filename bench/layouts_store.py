"""The layout lab on a server: tables seeded in each layout, and a reader and a writer that
follow it, so that the ADR traffic mix can be replayed through the capacity meter.

The production repository and writer know two layouts (legacy and sharded). The four others
exist only here: LayoutRepository and LayoutWriter override the reads and writes the replay
(devkit.traffic.replay.Replayer) calls, keyed by bench.layouts_model's rules. Every request is
a plain Query, Scan, PutItem or UpdateItem, so the meter prices it as it prices production's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.layouts_model import (
    OPEN_INDEX_NAME,
    OPEN_INDEX_PK,
    OPEN_KEY_PREFIX,
    Layout,
    gsi4pk,
    index_attributes,
    open_index_pk,
)
from devkit.capacity.clock import VirtualClock
from devkit.capacity.ledger import LoadLedger
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.schema import table_create_kwargs
from devkit.seed import PAD_ATTRIBUTE, Dataset, pad_to_size, saga_item, write_items
from devkit.traffic.plan import Plan
from devkit.traffic.replay import Replayer, ReplayStats
from saga_index.index import INDEX_NAME, OPEN_STATES, Person, keys
from saga_index.index import Layout as IndexLayout
from saga_index.store import ReadResult, SagaRepository, SagaWriter
from saga_index.store.dynamo import deserialize, make_client, serialize

_OPEN_FILTER_VALUES = {f":s{n}": {"S": state} for n, state in enumerate(OPEN_STATES)}
_OPEN_FILTER = f"#state IN ({', '.join(_OPEN_FILTER_VALUES)})"


def create_kwargs(template: Mapping[str, Any], table_name: str, layout: Layout) -> dict[str, Any]:
    """The synthesised table's create_table kwargs, plus the sparse open-saga index when the
    layout has one (same sort key as GSI4, projection ALL)."""
    kwargs = table_create_kwargs(template, table_name)
    if layout.open_index:
        kwargs["AttributeDefinitions"].append(
            {"AttributeName": OPEN_INDEX_PK, "AttributeType": "S"}
        )
        kwargs["GlobalSecondaryIndexes"].append(
            {
                "IndexName": OPEN_INDEX_NAME,
                "KeySchema": [
                    {"AttributeName": OPEN_INDEX_PK, "KeyType": "HASH"},
                    {"AttributeName": "GSI4SK", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        )
    return kwargs


def create_layout_table(
    client: Any, template: Mapping[str, Any], table_name: str, layout: Layout
) -> TableSchema:
    kwargs = create_kwargs(template, table_name, layout)
    client.create_table(**kwargs)
    client.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )
    return TableSchema.from_create_kwargs(kwargs)


def layout_items(dataset: Dataset, layout: Layout, shard_count: int) -> list[dict[str, Any]]:
    """The dataset's saga rows keyed for `layout`, each re-padded to its record's size (every
    layout stores rows of the same sizes)."""
    items = []
    for record in dataset.sagas:
        assert record.person_id is not None, "the lab's datasets have no anomalies"
        item = saga_item(record, None)
        del item[PAD_ATTRIBUTE]
        item.update(
            serialize(index_attributes(layout, record.person_id, record.state, shard_count))
        )
        items.append(pad_to_size(item, record.size))
    return items


def seed_layout(
    client: Any, table_name: str, dataset: Dataset, layout: Layout, shard_count: int
) -> int:
    # The other entities carry no index attribute: only a Scan reads them.
    others = list(dataset.other_items()) if layout.scan else []
    items = layout_items(dataset, layout, shard_count) + others
    write_items(client, table_name, items)
    return len(items)


class LayoutRepository(SagaRepository):
    """By-person reads and all-open enumerations in a lab layout."""

    def __init__(
        self, client: Any, table_name: str, layout: Layout, *, shard_count: int, segments: int
    ) -> None:
        super().__init__(client, table_name, plan=IndexLayout.sharded(shard_count))
        self.layout = layout
        self.shard_count = shard_count
        self.segments = segments

    def _keys(self, person_id: str) -> list[str]:
        """Open rows' key first; state-split adds the closed family's (full history)."""
        found = [gsi4pk(self.layout, person_id, True, self.shard_count)]
        if self.layout.gsi4 == "state-split":
            found.append(gsi4pk(self.layout, person_id, False, self.shard_count))
        return found

    def get_sagas_by_person(self, person_id: str | Person) -> ReadResult:
        person_id = Person.of(person_id).id
        items: list[dict[str, Any]] = []
        requests = 0
        partitions = tuple(self._keys(person_id))
        for partition in partitions:
            request = {
                "TableName": self.table_name,
                "IndexName": INDEX_NAME,
                "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
                "ExpressionAttributeNames": {"#pk": "GSI4PK", "#sk": "GSI4SK"},
                "ExpressionAttributeValues": {
                    ":pk": {"S": partition},
                    ":prefix": {"S": keys.person_prefix(person_id)},
                },
            }
            page_items, pages = _query_all(self.client, request)
            items.extend(page_items)
            requests += pages
        return ReadResult(items=items, requests=requests, partitions=partitions)

    def get_all_open_sagas(self) -> ReadResult:
        if self.layout.scan:
            return self._scan_open()
        requests: list[dict[str, Any]] = []
        for partition in self._enumeration_keys():
            index, attribute = (
                (OPEN_INDEX_NAME, OPEN_INDEX_PK)
                if self.layout.open_index
                else (INDEX_NAME, "GSI4PK")
            )
            requests.append(
                {
                    "TableName": self.table_name,
                    "IndexName": index,
                    "KeyConditionExpression": "#pk = :pk",
                    "FilterExpression": _OPEN_FILTER,
                    "ExpressionAttributeNames": {"#pk": attribute, "#state": "state"},
                    "ExpressionAttributeValues": {":pk": {"S": partition}, **_OPEN_FILTER_VALUES},
                }
            )
        return self._parallel(requests, self._query)

    def _enumeration_keys(self) -> list[str]:
        if self.layout.gsi4 == "legacy":
            return [keys.LEGACY_GSI4PK]
        if self.layout.open_index:
            return [f"{OPEN_KEY_PREFIX}{n}" for n in range(self.shard_count)]
        return keys.all_shard_gsi4pks(self.shard_count)

    def _scan_open(self) -> ReadResult:
        requests = [
            {
                "TableName": self.table_name,
                "Segment": segment,
                "TotalSegments": self.segments,
                "FilterExpression": f"#type = :type AND {_OPEN_FILTER}",
                "ExpressionAttributeNames": {"#type": "entityType", "#state": "state"},
                "ExpressionAttributeValues": {
                    ":type": {"S": keys.ENTITY_TYPE},
                    **_OPEN_FILTER_VALUES,
                },
            }
            for segment in range(self.segments)
        ]
        return self._parallel(requests, self._scan)

    def _query(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        return _query_all(self.client, request)

    def _scan(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        items: list[dict[str, Any]] = []
        pages = 0
        for page in self.client.get_paginator("scan").paginate(**request):
            pages += 1
            items.extend(deserialize(raw) for raw in page.get("Items", []))
        return items, pages

    def _parallel(self, requests: Sequence[dict[str, Any]], read: Any) -> ReadResult:
        with ThreadPoolExecutor(max_workers=min(16, len(requests))) as pool:
            results = list(pool.map(read, requests))
        items = [item for found, _ in results for item in found]
        return ReadResult(items=items, requests=sum(pages for _, pages in results), partitions=())


def _query_all(client: Any, request: Mapping[str, Any]) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    pages = 0
    for page in client.get_paginator("query").paginate(**request):
        pages += 1
        items.extend(deserialize(raw) for raw in page.get("Items", []))
    return items, pages


class LayoutWriter(SagaWriter):
    """Creates and transitions saga rows with the layout's index attributes: re-stamped on
    every transition (state-split moves a terminal saga to the closed family; the sparse index's
    attribute is removed when the saga leaves the open states)."""

    def __init__(self, client: Any, table_name: str, layout: Layout, *, shard_count: int) -> None:
        super().__init__(client, table_name, plan=IndexLayout.sharded(shard_count))
        self.layout = layout
        self.shard_count = shard_count

    def create_saga(
        self,
        *,
        saga_id: str,
        person_id: str,
        lease_id: str,
        opened_at: str,
        state: str = "OPENED",
        updated_at: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        item: dict[str, Any] = {
            **keys.saga_table_key(saga_id),
            "entityType": keys.ENTITY_TYPE,
            "sagaId": saga_id,
            "personId": person_id,
            "leaseId": lease_id,
            "openedAt": opened_at,
            "state": state,
            "updatedAt": updated_at or opened_at,
            "GSI4SK": keys.gsi4sk(person_id, opened_at),
            **index_attributes(self.layout, person_id, state, self.shard_count),
            **(extra or {}),
        }
        self.client.put_item(TableName=self.table_name, Item=serialize(item))
        return item

    def transition(
        self,
        *,
        saga_id: str,
        person_id: str,
        to_state: str,
        updated_at: str,
        expected_state: str | None = None,
    ) -> dict[str, Any]:
        attributes = index_attributes(self.layout, person_id, to_state, self.shard_count)
        names = {"#state": "state", "#updatedAt": "updatedAt", "#gsi4pk": "GSI4PK"}
        values: dict[str, Any] = {
            ":to": to_state,
            ":now": updated_at,
            ":gsi4pk": attributes["GSI4PK"],
        }
        update = "SET #state = :to, #updatedAt = :now, #gsi4pk = :gsi4pk"
        if self.layout.open_index:
            names["#open"] = OPEN_INDEX_PK
            open_pk = open_index_pk(
                self.layout, person_id, to_state in OPEN_STATES, self.shard_count
            )
            if open_pk is None:
                update += " REMOVE #open"
            else:
                values[":open"] = open_pk
                update += ", #open = :open"
        response = self.client.update_item(
            TableName=self.table_name,
            Key=serialize(keys.saga_table_key(saga_id)),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=serialize(values),
            ReturnValues="ALL_NEW",
        )
        return deserialize(response["Attributes"])


class MeteredLayout:
    """One seeded layout table with a metered reader and writer on a virtual clock."""

    def __init__(
        self,
        endpoint_url: str,
        table_name: str,
        schema: TableSchema,
        layout: Layout,
        *,
        shard_count: int,
        segments: int,
    ) -> None:
        self.schema = schema
        self.layout = layout
        self.clock = VirtualClock()
        self.meter = CapacityMeter(
            schema, reader=make_client(endpoint_url=endpoint_url), clock=self.clock.now
        )
        client = self.meter.attach(make_client(endpoint_url=endpoint_url))
        self.repository = LayoutRepository(
            client, table_name, layout, shard_count=shard_count, segments=segments
        )
        self.writer = LayoutWriter(client, table_name, layout, shard_count=shard_count)
        self._lock = threading.Lock()

    def fresh_meter(self) -> None:
        """Start a new ledger (the probes and the replay are priced apart)."""
        self.meter.ledger = LoadLedger()

    def index_targets(self) -> list[str]:
        return [INDEX_NAME, OPEN_INDEX_NAME] if self.layout.open_index else [INDEX_NAME]

    def replay(self, plan: Plan, run_label: str) -> ReplayStats:
        return Replayer(self.repository, self.writer, self.clock, run_label=run_label).run(plan)
