"""The layout lab on a server: tables seeded in each layout, and a reader and a writer that
follow it, so that the ADR traffic mix can be replayed through the capacity meter.

Every layout reads and writes through the product's SagaRepository and SagaWriter on its key
plan (bench.layouts_keys: the product's Layout; for the sparse open-saga index the product's
routing with the open index in use, so its enumeration is the repository's read of the open
index and its writes the writer's stamp and removal of OpenSagaPK; or the lab's plan for a key
rule the product lacks). LabReader adds only what no key plan can say: the person-key layout's
Scan; LabWriter only picks state-split's closed plan for a write that closes a saga. Every
request is a plain Query, Scan, PutItem or UpdateItem, so the meter prices it as it prices
production's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.layouts_keys import (
    OPEN_INDEX_NAME,
    OPEN_INDEX_PK,
    LabLayout,
    index_attributes,
    key_plan,
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
from saga_index.store import ReadResult, SagaRepository, SagaWriter
from saga_index.store.dynamo import deserialize, make_client, serialize

_OPEN_FILTER_VALUES = {f":s{n}": {"S": state} for n, state in enumerate(OPEN_STATES)}
_OPEN_FILTER = f"#state IN ({', '.join(_OPEN_FILTER_VALUES)})"


def create_kwargs(
    template: Mapping[str, Any], table_name: str, layout: LabLayout
) -> dict[str, Any]:
    """The synthesised table's create_table kwargs: with the sparse open-saga index when the
    layout has one (the template carries it, as infra/open_index.py adds it: same sort key as
    GSI4, projection ALL), without it when the layout has none."""
    kwargs = table_create_kwargs(template, table_name)
    indexes = [i["IndexName"] for i in kwargs["GlobalSecondaryIndexes"]]
    if OPEN_INDEX_NAME not in indexes:
        raise ValueError(
            f"the synthesised table has no {OPEN_INDEX_NAME} (its indexes: {indexes}): "
            "the lab meters the table that deploys"
        )
    if not layout.open_index:
        kwargs["GlobalSecondaryIndexes"] = [
            i for i in kwargs["GlobalSecondaryIndexes"] if i["IndexName"] != OPEN_INDEX_NAME
        ]
        # DynamoDB refuses an attribute definition no key uses.
        kwargs["AttributeDefinitions"] = [
            d for d in kwargs["AttributeDefinitions"] if d["AttributeName"] != OPEN_INDEX_PK
        ]
    return kwargs


def create_layout_table(
    client: Any, template: Mapping[str, Any], table_name: str, layout: LabLayout
) -> TableSchema:
    kwargs = create_kwargs(template, table_name, layout)
    client.create_table(**kwargs)
    client.get_waiter("table_exists").wait(
        TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )
    return TableSchema.from_create_kwargs(kwargs)


def layout_items(dataset: Dataset, layout: LabLayout, shard_count: int) -> list[dict[str, Any]]:
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
    client: Any, table_name: str, dataset: Dataset, layout: LabLayout, shard_count: int
) -> int:
    # The other entities carry no index attribute: only a Scan reads them.
    others = list(dataset.other_items()) if layout.scan else []
    items = layout_items(dataset, layout, shard_count) + others
    write_items(client, table_name, items)
    return len(items)


class LabReader:
    """By-person reads and all-open enumerations in a lab layout: the product's SagaRepository
    on the layout's key plan (for the sparse layout it reads the open index's keys), but for the
    one enumeration the product has no form of, the parallel Scan of the person-key layout."""

    def __init__(
        self, client: Any, table_name: str, layout: LabLayout, *, shard_count: int, segments: int
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.layout = layout
        self.shard_count = shard_count
        self.segments = segments
        self.repository = SagaRepository(client, table_name, plan=key_plan(layout, shard_count))

    def get_sagas_by_person(self, person_id: str | Person) -> ReadResult:
        return self.repository.get_sagas_by_person(person_id)

    def get_all_open_sagas(self) -> ReadResult:
        if self.layout.scan:
            return self._scan_open()
        return self.repository.get_all_open_sagas()

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
        return self._parallel(requests, "scan")

    def _parallel(self, requests: Sequence[dict[str, Any]], operation: str) -> ReadResult:
        def read(request: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
            items: list[dict[str, Any]] = []
            pages = 0
            for page in self.client.get_paginator(operation).paginate(**request):
                pages += 1
                items.extend(deserialize(raw) for raw in page.get("Items", []))
            return items, pages

        with ThreadPoolExecutor(max_workers=min(16, len(requests))) as pool:
            results = list(pool.map(read, requests))
        items = [item for found, _ in results for item in found]
        return ReadResult(items=items, requests=sum(pages for _, pages in results), partitions=())


class LabWriter:
    """Creates and transitions saga rows in a lab layout with the product's SagaWriter on the
    layout's key plan: state-split writes a terminal transition with its closed plan (the row
    moves to the closed family); the sparse layout's writer stamps OpenSagaPK on an open saga and
    removes it in the write that closes it, as production's does."""

    def __init__(
        self, client: Any, table_name: str, layout: LabLayout, *, shard_count: int
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.layout = layout
        self.shard_count = shard_count
        self._open = SagaWriter(client, table_name, plan=key_plan(layout, shard_count))
        self._closed = SagaWriter(
            client, table_name, plan=key_plan(layout, shard_count, is_open=False)
        )

    def create_saga(
        self,
        *,
        saga_id: str,
        person_id: str,
        lease_id: str,
        opened_at: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._open.create_saga(
            saga_id=saga_id,
            person_id=person_id,
            lease_id=lease_id,
            opened_at=opened_at,
            extra=extra,
        )

    def transition(
        self, *, saga_id: str, person_id: str, to_state: str, updated_at: str
    ) -> dict[str, Any]:
        writer = self._open if to_state in OPEN_STATES else self._closed
        return writer.transition(
            saga_id=saga_id, person_id=person_id, to_state=to_state, updated_at=updated_at
        )


class MeteredLayout:
    """One seeded layout table with a metered reader and writer on a virtual clock."""

    def __init__(
        self,
        endpoint_url: str,
        table_name: str,
        schema: TableSchema,
        layout: LabLayout,
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
        self.repository = LabReader(
            client, table_name, layout, shard_count=shard_count, segments=segments
        )
        self.writer = LabWriter(client, table_name, layout, shard_count=shard_count)
        self._lock = threading.Lock()

    def fresh_meter(self) -> None:
        """Start a new ledger (the probes and the replay are priced apart)."""
        self.meter.ledger = LoadLedger()

    def index_targets(self) -> list[str]:
        return [INDEX_NAME, OPEN_INDEX_NAME] if self.layout.open_index else [INDEX_NAME]

    def replay(self, plan: Plan, run_label: str) -> ReplayStats:
        return Replayer(self.repository, self.writer, self.clock, run_label=run_label).run(plan)
