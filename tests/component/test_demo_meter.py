"""The capacity meter on a real server: it prices what the requests really read and wrote."""

from __future__ import annotations

from typing import Any

import pytest

from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.capacity.units import read_units, write_units
from devkit.seed import SagaRecord, saga_item
from saga_index.index import keys, names
from saga_index.index.shard import DEFAULT_SHARD_COUNT
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.routing import Routing
from saga_index.store.dynamo.sizing import item_size
from saga_index.store.repository import SagaRepository
from tests.support.backends import Backend, make_backend
from tests.support.faults import ThrottleInjector

pytestmark = pytest.mark.conformance


@pytest.fixture
def backend(synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
    return make_backend("meter", synthesized_template, dynalite_endpoint)


def _record(n: int, state: str, size: int) -> SagaRecord:
    return SagaRecord(
        saga_id=f"rs_meter_{n:03d}",
        person_id=f"person_{n % 7:02d}",
        lease_id=f"lease_{n:03d}",
        manager_id="PM000",
        opened_at=f"2026-01-01T00:00:{n % 60:02d}.000Z",
        state=state,
        size=size,
        salt=n,
    )


def _metered(backend: Backend, template: dict[str, Any]) -> tuple[CapacityMeter, Any]:
    schema = TableSchema.from_template(template, backend.table_name)
    meter = CapacityMeter(schema, reader=backend.new_client(), clock=lambda: 3.0)
    return meter, meter.attach(backend.new_client())


def test_given_a_legacy_partition_when_the_open_sagas_are_enumerated_then_every_row_read_is_charged(
    backend: Backend, synthesized_template: dict[str, Any]
) -> None:
    # 30 rows on the legacy key, 10 of them open: the filter drops 20, DynamoDB charges all 30.
    items = [
        saga_item(_record(n, "OPENED" if n % 3 == 0 else "SIGNED", 1000 + 37 * n))
        for n in range(30)
    ]
    for item in items:
        backend.client.put_item(TableName=backend.table_name, Item=item)
    meter, client = _metered(backend, synthesized_template)

    result = SagaRepository(
        client, backend.table_name, plan=Routing.for_phase(Phase.LEGACY, DEFAULT_SHARD_COUNT)
    ).get_all_open_sagas()

    assert len(result) == 10
    (load,) = meter.summary(names.INDEX_NAME).partitions
    expected = read_units(sum(item_size(i) for i in items), consistent=False)
    assert load.partition_key == keys.LEGACY_GSI4PK
    assert load.total_rcu == expected
    assert load.peak_rcu_second == 3
    assert meter.shadow_reads == 1
    assert meter.shadow_mismatches == 0


def test_given_a_legacy_row_when_it_is_restamped_then_the_legacy_and_shard_keys_each_take_a_write(
    backend: Backend, synthesized_template: dict[str, Any]
) -> None:
    item = saga_item(_record(1, "OPENED", 1500))
    backend.client.put_item(TableName=backend.table_name, Item=item)
    shard_key = keys.shard_gsi4pk_for_person("person_01", 16)
    meter, client = _metered(backend, synthesized_template)

    client.update_item(
        TableName=backend.table_name,
        Key={"PK": item["PK"], "SK": item["SK"]},
        UpdateExpression="SET #g = :target",
        ExpressionAttributeNames={"#g": "GSI4PK"},
        ExpressionAttributeValues={":target": {"S": shard_key}},
    )

    index = {p.partition_key: p.total_wcu for p in meter.summary(names.INDEX_NAME).partitions}
    assert index == {keys.LEGACY_GSI4PK: 2, shard_key: 2}
    moved = dict(item, GSI4PK={"S": shard_key})
    assert meter.summary(backend.table_name).total_wcu == write_units(
        max(item_size(item), item_size(moved))
    )


def test_given_an_existing_row_when_a_conditional_create_fails_then_only_the_base_table_pays(
    backend: Backend, synthesized_template: dict[str, Any]
) -> None:
    item = saga_item(_record(2, "OPENED", 2048))
    backend.client.put_item(TableName=backend.table_name, Item=item)
    meter, client = _metered(backend, synthesized_template)

    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(
            TableName=backend.table_name, Item=item, ConditionExpression="attribute_not_exists(PK)"
        )

    assert meter.summary(backend.table_name).total_wcu == 2
    assert meter.summary(names.INDEX_NAME).partitions == ()


def test_given_throttled_attempts_when_botocore_retries_then_the_request_is_charged_once(
    backend: Backend, synthesized_template: dict[str, Any]
) -> None:
    item = saga_item(_record(3, "OPENED", 1200))
    backend.client.put_item(TableName=backend.table_name, Item=item)
    meter, client = _metered(backend, synthesized_template)
    injector = ThrottleInjector(client, "Query", times=2)

    SagaRepository(
        client, backend.table_name, plan=Routing.for_phase(Phase.LEGACY, DEFAULT_SHARD_COUNT)
    ).get_sagas_by_person("person_03")

    assert injector.injected == 2
    (load,) = meter.summary(names.INDEX_NAME).partitions
    assert (load.requests, load.total_rcu) == (1, 0.5)


def test_given_a_transaction_the_server_refuses_then_it_costs_nothing_and_reaches_the_caller(
    backend: Backend, synthesized_template: dict[str, Any]
) -> None:
    # dynalite has no transactions: the backfill's fence sends one, hears UnknownOperation and
    # falls back to its clock check; the metered demo must let that refusal through, unpriced.
    meter, client = _metered(backend, synthesized_template)
    condition = {
        "ConditionCheck": {
            "TableName": backend.table_name,
            "Key": {"PK": {"S": names.CONTROL_PK}, "SK": {"S": "STATE"}},
            "ConditionExpression": "attribute_exists(PK)",
        }
    }
    with pytest.raises(client.exceptions.ClientError, match="UnknownOperation"):
        client.transact_write_items(TransactItems=[condition])
    assert meter.requests == 0
    assert meter.summary().partitions == ()
