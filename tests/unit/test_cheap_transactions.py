"""devkit.semantics.moto_harness.cheap_transactions (every moto transaction of the test session
and the benches): a cancelled TransactWriteItems leaves the table as it was, items it would have
created, changed and deleted alike, and an accepted one is applied, as with moto's own backup."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devkit.semantics.moto_harness import cheap_transactions


def _table(client: Any) -> None:
    client.create_table(
        TableName="t",
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for pk in ("kept", "changed", "deleted"):
        client.put_item(TableName="t", Item={"PK": {"S": pk}, "SK": {"S": "1"}, "v": {"N": "1"}})


def _items(client: Any) -> list[dict[str, Any]]:
    return sorted(client.scan(TableName="t")["Items"], key=lambda i: i["PK"]["S"])


def _key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "1"}}


def _transaction(check: str) -> list[dict[str, Any]]:
    return [
        {"Put": {"TableName": "t", "Item": {**_key("created"), "v": {"N": "2"}}}},
        {
            "Update": {
                "TableName": "t",
                "Key": _key("changed"),
                "UpdateExpression": "SET v = :v",
                "ExpressionAttributeValues": {":v": {"N": "2"}},
            }
        },
        {"Delete": {"TableName": "t", "Key": _key("deleted")}},
        {
            "ConditionCheck": {
                "TableName": "t",
                "Key": _key("kept"),
                "ConditionExpression": "v = :v",
                "ExpressionAttributeValues": {":v": {"N": check}},
            }
        },
    ]


def test_a_cancelled_transaction_leaves_the_table_as_it_was_and_an_accepted_one_applies() -> None:
    with mock_aws(), cheap_transactions():
        client = boto3.client("dynamodb", region_name="us-east-1")
        _table(client)
        before = _items(client)
        with pytest.raises(ClientError) as cancelled:
            client.transact_write_items(TransactItems=_transaction(check="9"))
        assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
        assert _items(client) == before
        client.transact_write_items(TransactItems=_transaction(check="1"))
        after = {i["PK"]["S"]: i["v"]["N"] for i in _items(client)}
    assert after == {"changed": "2", "created": "2", "kept": "1"}
