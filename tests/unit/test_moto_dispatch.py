"""tests/support/moto_dispatch.py answers as moto's own path does: the same calls, made on two
identical tables, once handed to DynamoHandler directly and once through moto's URL matching and
web request, give the same answers and the same errors (codes, messages, modelled fields)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.support import moto_dispatch

KEYS = {"PK": {"S": "a"}, "SK": {"S": "1"}}


def _table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": "S"} for key in ("PK", "SK", "G", "GS")
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "gix",
                "KeySchema": [
                    {"AttributeName": "G", "KeyType": "HASH"},
                    {"AttributeName": "GS", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _calls(table: str) -> list[tuple[str, dict[str, Any]]]:
    """Every operation the product and the tests send, answered and refused."""
    item = {
        **KEYS,
        "G": {"S": "g"},
        "GS": {"S": "x"},
        "n": {"N": "1"},
        "m": {"M": {"k": {"L": []}}},
    }
    return [
        ("describe_table", {"TableName": table}),
        ("put_item", {"TableName": table, "Item": item}),
        (
            "put_item",
            {
                "TableName": table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(PK)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        ("get_item", {"TableName": table, "Key": KEYS, "ConsistentRead": True}),
        (
            "get_item",
            {
                "TableName": table,
                "Key": KEYS,
                "ProjectionExpression": "#n",
                "ExpressionAttributeNames": {"#n": "n"},
            },
        ),
        (
            "update_item",
            {
                "TableName": table,
                "Key": KEYS,
                "UpdateExpression": "SET n = n + :one, s = :s REMOVE m",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":s": {"SS": ["p", "q"]}},
                "ReturnValues": "ALL_NEW",
            },
        ),
        (
            "update_item",
            {
                "TableName": table,
                "Key": KEYS,
                "UpdateExpression": "SET n = :v",
                "ConditionExpression": "n = :other",
                "ExpressionAttributeValues": {":v": {"N": "9"}, ":other": {"N": "7"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        (
            "update_item",
            {
                "TableName": table,
                "Key": KEYS,
                "UpdateExpression": "SET n = :v, n = :v",
                "ExpressionAttributeValues": {":v": {"N": "9"}},
            },
        ),
        (
            "update_item",
            {
                "TableName": table,
                "Key": KEYS,
                "UpdateExpression": "SET PK = :v",
                "ExpressionAttributeValues": {":v": {"S": "b"}},
            },
        ),
        (
            "query",
            {
                "TableName": table,
                "KeyConditionExpression": "PK = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
                "ReturnConsumedCapacity": "TOTAL",
            },
        ),
        (
            "query",
            {
                "TableName": table,
                "IndexName": "gix",
                "KeyConditionExpression": "G = :g AND begins_with(GS, :x)",
                "ExpressionAttributeValues": {":g": {"S": "g"}, ":x": {"S": "x"}},
                "Limit": 1,
            },
        ),
        (
            "query",
            {
                "TableName": table,
                "KeyConditionExpression": "n = :p",
                "ExpressionAttributeValues": {":p": {"S": "a"}},
            },
        ),
        ("scan", {"TableName": table, "Segment": 0, "TotalSegments": 2}),
        (
            "scan",
            {
                "TableName": table,
                "Segment": 1,
                "TotalSegments": 2,
                "FilterExpression": "attribute_exists(n)",
            },
        ),
        (
            "batch_write_item",
            {
                "RequestItems": {
                    table: [
                        {"PutRequest": {"Item": {"PK": {"S": "b"}, "SK": {"S": str(n)}}}}
                        for n in range(3)
                    ]
                }
            },
        ),
        (
            "batch_get_item",
            {"RequestItems": {table: {"Keys": [KEYS, {"PK": {"S": "b"}, "SK": {"S": "0"}}]}}},
        ),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "ConditionCheck": {
                            "TableName": table,
                            "Key": KEYS,
                            "ConditionExpression": "n = :n",
                            "ExpressionAttributeValues": {":n": {"N": "0"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {"Put": {"TableName": table, "Item": {"PK": {"S": "c"}, "SK": {"S": "1"}}}},
                ]
            },
        ),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "Update": {
                            "TableName": table,
                            "Key": KEYS,
                            "UpdateExpression": "SET t = :t",
                            "ExpressionAttributeValues": {":t": {"BOOL": True}},
                        }
                    },
                    {"Delete": {"TableName": table, "Key": {"PK": {"S": "b"}, "SK": {"S": "2"}}}},
                ]
            },
        ),
        ("transact_get_items", {"TransactItems": [{"Get": {"TableName": table, "Key": KEYS}}]}),
        (
            "delete_item",
            {
                "TableName": table,
                "Key": {"PK": {"S": "b"}, "SK": {"S": "1"}},
                "ReturnValues": "ALL_OLD",
            },
        ),
        ("describe_time_to_live", {"TableName": table}),
        ("describe_continuous_backups", {"TableName": table}),
        ("get_item", {"TableName": f"{table}-missing", "Key": KEYS}),
    ]


def _answers(client: Any, table: str) -> list[Any]:
    """What each call answered, or the error it met, with what names its table left out."""
    seen: list[Any] = []
    for operation, params in _calls(table):
        try:
            answer: Any = getattr(client, operation)(**copy.deepcopy(params))
        except ClientError as err:
            answer = {
                "error": err.response["Error"],
                **{k: v for k, v in err.response.items() if k not in ("Error", "ResponseMetadata")},
            }
        answer.pop("ResponseMetadata", None)
        seen.append((operation, _anonymous(answer, table)))
    return seen


def _anonymous(value: Any, table: str) -> Any:
    """`value` with the table's name and the moments it was created at taken out."""
    if isinstance(value, dict):
        return {
            _anonymous(k, table): _anonymous(v, table)
            for k, v in value.items()
            if k
            not in (
                "CreationDateTime",
                "EarliestRestorableDateTime",
                "LatestRestorableDateTime",
                "TableId",
            )
        }
    if isinstance(value, list):
        return [_anonymous(v, table) for v in value]
    if isinstance(value, str):
        return value.replace(table, "TABLE")
    return value


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], list[int]]:
    """Switches the direct path on or off, counting the requests it answered."""
    direct = moto_dispatch.direct_answer
    answered = [0]

    def switch(on: bool) -> list[int]:
        def maybe(request: Any) -> Any:
            if not on:
                return None
            result = direct(request)
            answered[0] += result is not None
            return result

        monkeypatch.setattr(moto_dispatch, "direct_answer", maybe)
        return answered

    return switch


def test_the_direct_path_answers_as_motos_own(counted: Callable[[bool], list[int]]) -> None:
    with mock_aws():
        client = boto3.client(
            "dynamodb", region_name="eu-west-1", config=Config(retries={"max_attempts": 1})
        )
        counted(False)
        _table(client, "own")
        own = _answers(client, "own")
        answered = counted(True)
        _table(client, "direct")
        direct = _answers(client, "direct")
    assert answered[0] == len(_calls("direct")) + 1, "the direct path did not answer every call"
    assert direct == own
    # The calls meant to fail did, both ways: a condition, a duplicate path, a key update, a
    # bad expression, a cancelled transaction, a missing table.
    errors = [answer["error"]["Code"] for _, answer in direct if "error" in answer]
    assert errors == [
        "ConditionalCheckFailedException",
        "ConditionalCheckFailedException",
        "ValidationException",
        "ValidationException",
        "ValidationException",
        "TransactionCanceledException",
        "ResourceNotFoundException",
    ]


def test_a_request_elsewhere_takes_motos_own_path() -> None:
    class Request:
        def __init__(self, url: str, target: str = "DynamoDB_20120810.GetItem") -> None:
            self.url, self.method, self.body = url, "POST", b"{}"
            self.headers = {"X-Amz-Target": target}

    for url in (
        "http://127.0.0.1:8000/",
        "https://dynamodb.us-east-1.amazonaws.com.evil/",
        "https://streams.dynamodb.us-east-1.amazonaws.com/",
    ):
        assert moto_dispatch.direct_answer(Request(url)) is None, url
    streams = Request(
        "https://dynamodb.us-east-1.amazonaws.com/", "DynamoDBStreams_20120810.ListStreams"
    )
    assert moto_dispatch.direct_answer(streams) is None
