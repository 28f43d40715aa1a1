"""The capacity meter against the worked examples of AWS's DynamoDB documentation.

Sources (Amazon DynamoDB Developer Guide):
  [SIZES] "DynamoDB item sizes and formats",
          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
  [RW]    "DynamoDB read and write operations" / "Capacity unit consumption for reads / writes",
          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
          (earlier editions: ProvisionedThroughput.html#ItemSizeCalculations.Reads/.Writes)
  [GSI]   "Global secondary indexes", Provisioned throughput considerations,
          https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.ThroughputConsiderations
"""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from devkit.capacity.errors import MeterError
from devkit.capacity.ledger import LoadLedger
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.pricing import (
    Charge,
    query_charge,
    query_partition_key,
    scan_charges,
    write_charges,
)
from devkit.capacity.table_schema import IndexSchema, TableSchema
from devkit.capacity.units import (
    PARTITION_RCU_CEILING,
    item_read_units,
    read_units,
    write_units,
)
from saga_index.store.dynamo.sizing import item_size, number_size, value_size

KB = 1024
INDEX = "renewal-saga-person-index"
SCHEMA = TableSchema(
    name="sagas",
    hash_key="PK",
    range_key="SK",
    indexes=(IndexSchema(name=INDEX, hash_key="GSI4PK", range_key="GSI4SK"),),
)


def item_of_size(size: int, **keys: str) -> dict[str, Any]:
    """An item of exactly `size` bytes by the documented rules, with the given string keys."""
    item: dict[str, Any] = {name: {"S": value} for name, value in keys.items()}
    padding = size - item_size(item) - len("pad")
    assert padding >= 0, f"{size} bytes cannot hold the keys {keys}"
    item["pad"] = {"S": "x" * padding}
    assert item_size(item) == size
    return item


def saga(size: int, *, pk: str = "RSAGA#1", gsi4pk: str | None = "RenewalSaga") -> dict[str, Any]:
    keys = {"PK": pk, "SK": "META"}
    if gsi4pk is not None:
        keys.update(GSI4PK=gsi4pk, GSI4SK="p-1#2026-01-01T00:00:00.000Z")
    return item_of_size(size, **keys)


# ---- item sizes [SIZES] ---------------------------------------------------------------------


def test_string_size_is_name_bytes_plus_utf8_value_bytes() -> None:
    assert item_size({"name": {"S": "abc"}}) == 4 + 3
    # UTF-8, not characters: "é" is 2 bytes, "😀" is 4.
    assert item_size({"né": {"S": "😀"}}) == 3 + 4


def test_number_size_is_one_byte_per_two_significant_digits_plus_one() -> None:
    assert number_size("123.45") == 3 + 1  # five significant digits
    assert number_size("1000") == 1 + 1  # trailing zeroes trimmed: one digit
    assert number_size("0.001") == 1 + 1  # leading zeroes trimmed
    assert number_size("12") == 1 + 1
    assert number_size("0") == 1 + 1


def test_binary_counts_raw_bytes_not_base64_text() -> None:
    assert value_size({"B": b"\x00\x01\x02"}) == 3
    assert value_size({"B": "AAEC"}) == 3  # the same three bytes, base64 on the wire


def test_null_and_boolean_are_one_byte() -> None:
    assert item_size({"a": {"NULL": True}, "b": {"BOOL": False}}) == (1 + 1) + (1 + 1)


def test_list_and_map_cost_three_bytes_plus_one_per_element() -> None:
    assert item_size({"l": {"L": []}}) == 1 + 3
    assert item_size({"m": {"M": {}}}) == 1 + 3
    # [ "ab", 12 ]: 3 + (1 + 2) + (1 + 2)
    assert item_size({"l": {"L": [{"S": "ab"}, {"N": "12"}]}}) == 1 + 3 + 3 + 3
    # {"k": "v"}: nested names count too: 3 + (1 + 1 + 1)
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + 3


def test_unknown_attribute_type_is_an_error_that_names_it() -> None:
    with pytest.raises(ValueError, match="'X'"):
        value_size({"X": "?"})


# ---- reads [RW], [GSI] ------------------------------------------------------------------------


def test_query_of_10_items_totalling_40_8_kb_is_rounded_to_44_kb() -> None:
    """[RW] Query: "suppose your query returns 10 items whose combined size is 40.8 KB.
    DynamoDB rounds the item size for the operation to 44 KB": 11 units strongly consistent."""
    items = [item_of_size(4178) for _ in range(10)]  # 41,780 bytes = 40.8 KB
    assert sum(item_size(i) for i in items) / KB == pytest.approx(40.8, abs=0.01)
    assert query_charge("t", "k", items, consistent=True).rcu == 11
    assert query_charge("t", "k", items, consistent=False).rcu == 5.5


def test_query_of_1500_items_of_64_bytes_is_96_kb() -> None:
    """[RW] "If a query returns 1500 items of 64 bytes each, the cumulative size is 96 KB"."""
    items = [item_of_size(64) for _ in range(1500)]
    assert query_charge("t", "k", items, consistent=True).rcu == 96 / 4
    assert query_charge("t", "k", items, consistent=False).rcu == 96 / 8


def test_get_item_rounds_each_item_up_to_4_kb() -> None:
    """[RW] GetItem: "if you read an item that is 3.5 KB, DynamoDB rounds the item size to 4 KB.
    If you read an item of 10 KB, DynamoDB rounds the item size to 12 KB"; an eventually
    consistent read (the default) divides by two."""
    assert read_units(int(3.5 * KB), consistent=True) == 1
    assert read_units(10 * KB, consistent=True) == 3
    assert read_units(10 * KB, consistent=False) == 1.5


def test_batch_get_item_rounds_per_item_before_summing() -> None:
    """[RW] BatchGetItem: "a 1.5 KB item and a 6.5 KB item ... 12 KB (4 KB + 8 KB), not 8 KB"."""
    assert item_read_units([int(1.5 * KB), int(6.5 * KB)], consistent=True) == 12 / 4


def test_eventually_consistent_read_of_80_kb_consumes_10_units() -> None:
    """[RW] "For an eventually consistent read, if the total item size is 80 KB, the operation
    consumes only 10 capacity units"."""
    assert read_units(80 * KB, consistent=False) == 10


def test_reading_a_missing_item_still_costs_one_unit_or_half() -> None:
    """[RW] "If you perform a read operation on an item that does not exist, DynamoDB still
    consumes provisioned read throughput: a strongly consistent read request consumes one read
    capacity unit, while an eventually consistent read request consumes 0.5"."""
    assert read_units(0, consistent=True) == 1
    assert read_units(0, consistent=False) == 0.5


def test_gsi_query_of_8_items_of_2000_bytes_costs_2_units() -> None:
    """[GSI] "each item contains 2000 bytes ... the query returns 8 items ... 16,000 bytes ...
    rounded up to the nearest 4 KB boundary ... 0.5 x (16 KB / 4 KB), or 2 read capacity
    units" (GSI queries are eventually consistent)."""
    items = [item_of_size(2000) for _ in range(8)]
    assert query_charge(INDEX, "RenewalSaga", items, consistent=False).rcu == 2


def test_scan_page_is_rounded_once_and_shared_by_bytes_among_keys() -> None:
    items = [item_of_size(3000, PK="a"), item_of_size(1000, PK="b"), item_of_size(4192, PK="a")]
    charges = {c.partition_key: c.rcu for c in scan_charges("t", "PK", items, consistent=True)}
    # 8,192 bytes = 2 units; "a" read 7,192 of them.
    assert sum(charges.values()) == pytest.approx(2)
    assert charges["a"] == pytest.approx(2 * 7192 / 8192)


def test_the_queried_partition_key_is_read_from_the_key_condition() -> None:
    params = {
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
        "ExpressionAttributeNames": {"#pk": "GSI4PK", "#sk": "GSI4SK"},
        "ExpressionAttributeValues": {":pk": {"S": "RenewalSaga#3"}, ":prefix": {"S": "p#"}},
    }
    assert query_partition_key(params, "GSI4PK") == "RenewalSaga#3"
    reversed_params = {
        "KeyConditionExpression": ":v = GSI4PK",
        "ExpressionAttributeValues": {":v": {"S": "RenewalSaga"}},
    }
    assert query_partition_key(reversed_params, "GSI4PK") == "RenewalSaga"


# ---- writes [RW], [GSI] -----------------------------------------------------------------------


def test_write_units_round_up_to_the_next_kb() -> None:
    """[RW] "writing a 500-byte item consumes the same throughput as writing a 1 KB item";
    "if you put or delete an item of 1.6 KB, DynamoDB rounds the item size up to 2 KB"."""
    assert write_units(500) == 1
    assert write_units(int(1.6 * KB)) == 2


def test_batch_write_item_rounds_per_item() -> None:
    """[RW] BatchWriteItem: "a 500 byte item and a 3.5 KB item ... 5 KB (1 KB + 4 KB)"."""
    assert write_units(500) + write_units(int(3.5 * KB)) == 5


def test_update_is_charged_the_larger_of_before_and_after() -> None:
    """[RW] UpdateItem: "The provisioned throughput consumed reflects the larger of these item
    sizes" (an item without index keys: only the base table is written)."""
    before = saga(int(1.5 * KB), gsi4pk=None)
    after = saga(int(2.5 * KB), gsi4pk=None)
    assert write_charges(SCHEMA, before, after) == [Charge("sagas", "RSAGA#1", wcu=3)]
    assert write_charges(SCHEMA, after, before) == [Charge("sagas", "RSAGA#1", wcu=3)]


def test_failed_conditional_write_costs_the_existing_item_or_one_unit() -> None:
    """[RW] "If the expression evaluates to false, DynamoDB still consumes write capacity units
    from the table": a failed conditional write of a 1 KB item consumes one unit, of an item
    twice that size two; for an item that does not exist, one. No index is touched."""
    one_kb, two_kb = saga(KB), saga(2 * KB)
    assert write_charges(SCHEMA, one_kb, None, condition_failed=True) == [
        Charge("sagas", "RSAGA#1", wcu=1)
    ]
    assert write_charges(SCHEMA, two_kb, None, condition_failed=True) == [
        Charge("sagas", "RSAGA#1", wcu=2)
    ]
    key = {"PK": {"S": "RSAGA#9"}, "SK": {"S": "META"}}
    assert write_charges(SCHEMA, None, None, condition_failed=True, key=key) == [
        Charge("sagas", "RSAGA#9", wcu=1)
    ]


def test_new_item_with_index_keys_costs_one_index_put() -> None:
    """[GSI] "If you write a new item to the table that defines an indexed attribute ... one
    write operation is required to put the item into the index"."""
    new = saga(1500)
    assert write_charges(SCHEMA, None, new) == [
        Charge("sagas", "RSAGA#1", wcu=2),
        Charge(INDEX, "RenewalSaga", wcu=2),
    ]


def test_changing_an_index_key_costs_a_delete_under_the_old_key_and_a_put_under_the_new() -> None:
    """[GSI] "If an update to the table changes the value of an indexed key attribute (from A
    to B), two writes are required, one to delete the previous item from the index and another
    write to put the new item into the index": the backfill's re-stamp."""
    old = saga(1500, gsi4pk="RenewalSaga")
    new = dict(old, GSI4PK={"S": "RenewalSaga#7"})
    charges = write_charges(SCHEMA, old, new)
    assert charges == [
        Charge("sagas", "RSAGA#1", wcu=2),
        Charge(INDEX, "RenewalSaga", wcu=2),  # the delete lands on the hot legacy partition
        Charge(INDEX, "RenewalSaga#7", wcu=2),
    ]


def test_removing_an_index_key_attribute_costs_one_index_delete() -> None:
    """[GSI] "If an item was present in the index, but a write to the table caused the indexed
    attribute to be deleted, one write is required to delete the old item projection"."""
    old = saga(900)
    new = {k: v for k, v in old.items() if k != "GSI4PK"}
    assert write_charges(SCHEMA, old, new) == [
        Charge("sagas", "RSAGA#1", wcu=1),
        Charge(INDEX, "RenewalSaga", wcu=1),
    ]


def test_item_outside_the_index_before_and_after_costs_the_index_nothing() -> None:
    """[GSI] "If an item is not present in the index before or after the item is updated,
    there is no additional write cost for the index" (rows of other entity types)."""
    old = saga(700, pk="PERSON#1", gsi4pk=None)
    new = dict(old, pad={"S": "y" * 900})
    assert write_charges(SCHEMA, old, new) == [Charge("sagas", "PERSON#1", wcu=1)]


def test_projected_attribute_change_costs_one_index_write() -> None:
    """[GSI] "If an update to the table only changes the value of projected attributes ... but
    does not change the value of any indexed key attribute, then one write is required" (a state
    transition that keeps its GSI4 key)."""
    old = saga(1200)
    new = dict(old, state={"S": "OFFER_SENT"})
    assert write_charges(SCHEMA, old, new) == [
        Charge("sagas", "RSAGA#1", wcu=2),
        Charge(INDEX, "RenewalSaga", wcu=2),
    ]


def test_keys_only_projection_prices_the_index_entry_not_the_item() -> None:
    schema = TableSchema(
        "t",
        "PK",
        "SK",
        (IndexSchema("i", "GSI4PK", "GSI4SK", projection_type="KEYS_ONLY"),),
    )
    new = saga(3 * KB)  # the entry holds only PK, SK, GSI4PK, GSI4SK: under 1 KB
    assert write_charges(schema, None, new)[1] == Charge("i", "RenewalSaga", wcu=1)


# ---- per-second attribution ([RW] "Choosing initial throughput settings" examples) -----------


def test_80_strongly_consistent_reads_of_3_kb_in_one_second_are_80_rcu() -> None:
    """[RW]/provisioned example: "read 80 items per second ... 3 KB ... strongly consistent ...
    1 read capacity unit per item x 80 reads per second = 80 read capacity units"; and "write
    100 items per second ... 512 bytes ... 100 write capacity units"."""
    ledger = LoadLedger()
    for _ in range(80):
        ledger.add(5, [Charge("t", "k", rcu=read_units(3 * KB, consistent=True))])
    for _ in range(100):
        ledger.add(5, write_charges(TableSchema("t", "PK", None), None, {"PK": {"S": "k"}}))
        # (the item above is 4 bytes; 512 bytes prices the same)
    assert write_units(512) == 1
    summary = ledger.summary("t")
    assert summary.peak_rcu_per_key == 80
    assert summary.peak_wcu_per_key == 100
    assert summary.headroom == pytest.approx(min(PARTITION_RCU_CEILING / 80, 1000 / 100))


def test_summary_reports_the_hottest_key_share_peaks_and_headroom() -> None:
    ledger = LoadLedger()
    ledger.add(0, [Charge(INDEX, "RenewalSaga#1", rcu=30), Charge(INDEX, "RenewalSaga#2", rcu=10)])
    ledger.add(1, [Charge(INDEX, "RenewalSaga#1", rcu=20, wcu=40)])
    summary = ledger.summary(INDEX)
    assert summary.hottest is not None
    assert summary.hottest.partition_key == "RenewalSaga#1"
    assert summary.hottest_key_share == pytest.approx(90 / 100)
    assert summary.hottest_read_share == pytest.approx(50 / 60)
    assert summary.peak_rcu_per_key == 30
    assert summary.peak_wcu_per_key == 40
    assert summary.headroom == pytest.approx(min(3000 / 30, 1000 / 40))
    document = summary.to_json()
    assert document["hottestKeyShare"] == pytest.approx(0.9)
    assert document["partitions"][0]["peakRcuSecond"] == 0


# ---- the botocore hooks, without a server -----------------------------------------------------


class FakeReader:
    """The un-metered reader: answers from a dict of items and canned shadow pages."""

    def __init__(self, items: dict[str, dict[str, Any]], pages: list[list[dict[str, Any]]]):
        self.items = items
        self.pages = pages
        self.shadow_requests: list[dict[str, Any]] = []

    def get_item(self, *, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> Any:
        assert ConsistentRead
        item = self.items.get(Key["PK"]["S"])
        return {"Item": item} if item else {}

    def query(self, **request: Any) -> dict[str, Any]:
        self.shadow_requests.append(request)
        return {"Items": self.pages.pop(0)}


def stubbed(meter: CapacityMeter) -> tuple[Any, Stubber]:
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    meter.attach(client)
    return client, Stubber(client)


def test_hook_prices_a_filtered_query_from_every_item_it_read_not_from_the_engine() -> None:
    # Three items read (4 KB each), one returned after the filter; the engine claims 999 units.
    read = [saga(4096, pk=f"RSAGA#{n}") for n in range(3)]
    reader = FakeReader({}, [read])
    meter = CapacityMeter(SCHEMA, reader=reader, clock=lambda: 7.0)
    client, stub = stubbed(meter)
    request = {
        "TableName": "sagas",
        "IndexName": INDEX,
        "KeyConditionExpression": "#pk = :pk",
        "FilterExpression": "#state IN (:s0)",
        "ExpressionAttributeNames": {"#pk": "GSI4PK", "#state": "state"},
        "ExpressionAttributeValues": {":pk": {"S": "RenewalSaga"}, ":s0": {"S": "OPENED"}},
    }
    response = {
        "Items": [read[0]],
        "Count": 1,
        "ScannedCount": 3,
        "ConsumedCapacity": {"TableName": "sagas", "CapacityUnits": 999.0},
    }
    stub.add_response("query", response, request)
    with stub:
        client.query(**request)
    # The shadow read dropped the filter and the names/values only it used.
    assert reader.shadow_requests == [
        {
            "TableName": "sagas",
            "IndexName": INDEX,
            "KeyConditionExpression": "#pk = :pk",
            "ExpressionAttributeNames": {"#pk": "GSI4PK"},
            "ExpressionAttributeValues": {":pk": {"S": "RenewalSaga"}},
        }
    ]
    summary = meter.summary(INDEX)
    (load,) = summary.partitions
    # 3 x 4,096 bytes = 3 blocks of 4 KB, eventually consistent: 1.5 units, at second 7.
    assert (load.partition_key, load.total_rcu, load.peak_rcu_second) == ("RenewalSaga", 1.5, 7)


def test_hook_prices_a_restamp_as_two_index_writes_using_the_item_read_before_it() -> None:
    old = saga(1500, gsi4pk="RenewalSaga")
    reader = FakeReader({"RSAGA#1": old}, [])
    meter = CapacityMeter(SCHEMA, reader=reader, clock=lambda: 0.0)
    client, stub = stubbed(meter)
    request = {
        "TableName": "sagas",
        "Key": {"PK": {"S": "RSAGA#1"}, "SK": {"S": "META"}},
        "UpdateExpression": "SET #g = :new",
        "ExpressionAttributeNames": {"#g": "GSI4PK"},
        "ExpressionAttributeValues": {":new": {"S": "RenewalSaga#7"}},
        "ReturnValues": "ALL_NEW",
    }
    stub.add_response(
        "update_item", {"Attributes": dict(old, GSI4PK={"S": "RenewalSaga#7"})}, request
    )
    with stub:
        client.update_item(**request)
    index = {p.partition_key: p.total_wcu for p in meter.summary(INDEX).partitions}
    assert index == {"RenewalSaga": 2, "RenewalSaga#7": 2}
    assert meter.summary("sagas").total_wcu == 2


def test_hook_charges_a_failed_conditional_put_to_the_base_table_only() -> None:
    old = saga(2 * KB)
    meter = CapacityMeter(SCHEMA, reader=FakeReader({"RSAGA#1": old}, []), clock=lambda: 0.0)
    client, stub = stubbed(meter)
    stub.add_client_error("put_item", service_error_code="ConditionalCheckFailedException")
    with stub, pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(
            TableName="sagas", Item=saga(500), ConditionExpression="attribute_not_exists(PK)"
        )
    assert meter.summary("sagas").total_wcu == 2
    assert meter.summary(INDEX).partitions == ()


def test_hook_refuses_operations_it_cannot_price() -> None:
    meter = CapacityMeter(SCHEMA, reader=FakeReader({}, []))
    client, _ = stubbed(meter)  # never sent: the meter refuses before the request is built
    with pytest.raises(MeterError, match="TransactGetItems"):
        client.transact_get_items(TransactItems=[])


def test_hook_prices_an_accepted_transaction_twice_per_item_and_a_refused_one_not_at_all() -> None:
    # The table's items twice; the GSI put the transaction caused once, as a single write's.
    checked = saga(1500)  # 2 WCU as an item
    meter = CapacityMeter(SCHEMA, reader=FakeReader({"RSAGA#1": checked}, []), clock=lambda: 0.0)
    client, stub = stubbed(meter)
    actions = [
        {
            "ConditionCheck": {
                "TableName": "sagas",
                "Key": {"PK": {"S": "RSAGA#1"}, "SK": {"S": "META"}},
                "ConditionExpression": "attribute_exists(PK)",
            }
        },
        {"Put": {"TableName": "sagas", "Item": saga(500, pk="RSAGA#2", gsi4pk="RenewalSaga#3")}},
    ]
    stub.add_client_error("transact_write_items", service_error_code="TransactionCanceledException")
    stub.add_response("transact_write_items", {})
    with stub:
        # Cancelled: nothing written, nothing priced
        with pytest.raises(client.exceptions.TransactionCanceledException):
            client.transact_write_items(TransactItems=actions)
        assert meter.requests == 0
        # Accepted: every item twice (prepare and commit), the ConditionCheck's included
        client.transact_write_items(TransactItems=actions)
    table = {p.partition_key: p.total_wcu for p in meter.summary("sagas").partitions}
    assert table == {"RSAGA#1": 2 * 2, "RSAGA#2": 1 * 2}
    index = {p.partition_key: p.total_wcu for p in meter.summary(INDEX).partitions}
    assert index == {"RenewalSaga#3": 1}


class ChangingReader(FakeReader):
    """A reader that answers each key's reads in turn: the item before the write, then after."""

    def __init__(self, answers: dict[str, list[dict[str, Any] | None]]):
        super().__init__({}, [])
        self.answers = answers

    def get_item(self, *, TableName: str, Key: dict[str, Any], ConsistentRead: bool) -> Any:
        assert ConsistentRead
        item = self.answers[Key["PK"]["S"]].pop(0)
        return {"Item": item} if item else {}


def test_hook_prices_a_fenced_restamp_from_index_key_a_to_b_as_one_wcu_on_each() -> None:
    # The backfill's fenced re-stamp: a ConditionCheck of its fence slot and the row's Update
    # moving it from index key A to B (docs/control-contract.md, "Cost"): the row's partition 2
    # WCU, the slot's 2, A and B 1 each (the index's delete and put as a single write's).
    row = saga(500, gsi4pk="A")
    slot = {"PK": {"S": "RSAGA_INDEX#FENCE#0"}, "SK": {"S": "SLOT"}, "epoch": {"N": "1"}}
    reader = ChangingReader(
        {"RSAGA#1": [row, dict(row, GSI4PK={"S": "B"})], "RSAGA_INDEX#FENCE#0": [slot]}
    )
    meter = CapacityMeter(SCHEMA, reader=reader, clock=lambda: 0.0)
    client, stub = stubbed(meter)
    stub.add_response("transact_write_items", {})
    with stub:
        client.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": "sagas",
                        "Key": {"PK": slot["PK"], "SK": slot["SK"]},
                        "ConditionExpression": "epoch = :e",
                        "ExpressionAttributeValues": {":e": {"N": "1"}},
                    }
                },
                {
                    "Update": {
                        "TableName": "sagas",
                        "Key": {"PK": {"S": "RSAGA#1"}, "SK": {"S": "META"}},
                        "UpdateExpression": "SET GSI4PK = :b",
                        "ExpressionAttributeValues": {":b": {"S": "B"}},
                    }
                },
            ]
        )
    table = {p.partition_key: p.total_wcu for p in meter.summary("sagas").partitions}
    assert table == {"RSAGA#1": 2, "RSAGA_INDEX#FENCE#0": 2}
    index = {p.partition_key: p.total_wcu for p in meter.summary(INDEX).partitions}
    assert index == {"A": 1, "B": 1}
