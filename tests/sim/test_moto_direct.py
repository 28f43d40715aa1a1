"""tests/sim/moto_direct.py answers as moto does over its HTTP detour: the same requests sent
both ways give the same answers and the same errors (modelled fields included), and its parser
reads every answer as botocore's own does, on generated items."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import create_parser
from hypothesis import given, settings
from hypothesis import strategies as st
from moto.core.utils import get_service_model

from tests.sim import moto_direct
from tests.sim.harness import simulated_aws

pytestmark = pytest.mark.simulation

KEY = {"PK": {"S": "RSAGA#a"}, "SK": {"S": "META"}}


def _client() -> Any:
    return boto3.client(
        "dynamodb", region_name="us-east-1", config=Config(retries={"max_attempts": 1})
    )


@pytest.fixture
def clients() -> Iterator[tuple[Any, Any]]:
    """Two tables made alike, one served over moto's HTTP detour, the other directly."""
    with simulated_aws():
        over_http, direct = _client(), moto_direct.attach(_client())
        for name in ("t-http", "t-direct"):
            over_http.create_table(
                TableName=name,
                BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[
                    {"AttributeName": a, "AttributeType": "S"} for a in ("PK", "SK", "G")
                ],
                KeySchema=[
                    {"AttributeName": "PK", "KeyType": "HASH"},
                    {"AttributeName": "SK", "KeyType": "RANGE"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": "gsi",
                        "KeySchema": [{"AttributeName": "G", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                ],
            )
        yield over_http, direct


def _outcome(client: Any, operation: str, request: dict[str, Any]) -> dict[str, Any]:
    """The answer or the error's response, without what differs by transport or table name."""
    try:
        answer = getattr(client, operation)(**request)
    except ClientError as err:
        answer = err.response
    text = json.dumps(answer, sort_keys=True, default=str).replace("t-direct", "t-http")
    document: dict[str, Any] = json.loads(text)
    metadata = document.pop("ResponseMetadata")
    return {**document, "status": metadata["HTTPStatusCode"]}


def _requests(table: str) -> list[tuple[str, dict[str, Any]]]:
    item = {**KEY, "G": {"S": "g1"}, "n": {"N": "1"}, "m": {"M": {"l": {"L": [{"NULL": True}]}}}}
    update = {
        "TableName": table,
        "Key": KEY,
        "UpdateExpression": "SET n = n + :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
        "ReturnValues": "ALL_NEW",
    }
    return [
        ("put_item", {"TableName": table, "Item": item}),
        ("put_item", {"TableName": table, "Item": {**item, "SK": {"S": "OTHER"}}}),
        ("get_item", {"TableName": table, "Key": KEY, "ConsistentRead": True}),
        ("update_item", update),
        (
            "query",
            {
                "TableName": table,
                "IndexName": "gsi",
                "KeyConditionExpression": "G = :g",
                "ExpressionAttributeValues": {":g": {"S": "g1"}},
                "Limit": 1,
                "ReturnConsumedCapacity": "INDEXES",
            },
        ),
        ("scan", {"TableName": table, "ConsistentRead": True, "Select": "COUNT"}),
        # A failed condition, with the item it failed on
        (
            "put_item",
            {
                "TableName": table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(PK)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            },
        ),
        # A cancelled transaction, with its reasons
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": table, "Item": {**KEY, "SK": {"S": "NEW"}}}},
                    {
                        "ConditionCheck": {
                            "TableName": table,
                            "Key": KEY,
                            "ConditionExpression": "n = :zero",
                            "ExpressionAttributeValues": {":zero": {"N": "0"}},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ]
            },
        ),
        # Refused by moto's validation, and a table that does not exist
        ("query", {"TableName": table, "KeyConditionExpression": "nope = :v"}),
        ("get_item", {"TableName": "missing", "Key": KEY}),
        ("delete_item", {"TableName": table, "Key": KEY, "ReturnValues": "ALL_OLD"}),
    ]


def test_every_answer_and_error_is_the_same_both_ways(clients: tuple[Any, Any]) -> None:
    over_http, direct = clients
    sent = zip(_requests("t-http"), _requests("t-direct"), strict=True)
    outcomes = [
        (_outcome(over_http, op, request), _outcome(direct, op, twin))
        for (op, request), (_, twin) in sent
    ]
    for via_http, via_direct in outcomes:
        assert via_direct == via_http
    codes = [via_http.get("Error", {}).get("Code") for via_http, _ in outcomes]
    assert codes == [None] * 6 + [
        "ConditionalCheckFailedException",
        "TransactionCanceledException",
        "ValidationException",
        "ResourceNotFoundException",
        None,
    ]
    assert outcomes[6][0]["Item"]["n"] == {"N": "2"}
    cancelled = outcomes[7][0]
    assert [r["Code"] for r in cancelled["CancellationReasons"]] == [
        "None",
        "ConditionalCheckFailed",
    ]


_text = st.text(max_size=8)
_leaf = st.one_of(
    _text.map(lambda v: {"S": v}),
    st.integers(-(10**9), 10**9).map(lambda v: {"N": str(v)}),
    st.just({"NULL": True}),
    st.booleans().map(lambda v: {"BOOL": v}),
    st.lists(_text, min_size=1, max_size=3, unique=True).map(lambda v: {"SS": v}),
    # What the copy does not cover, for the walk: binaries (base64 on the wire).
    st.binary(max_size=6).map(lambda v: {"B": base64.b64encode(v).decode()}),
    st.lists(st.binary(max_size=4), min_size=1, max_size=2).map(
        lambda v: {"BS": [base64.b64encode(b).decode() for b in v]}
    ),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.dictionaries(_text, inner, max_size=3).map(lambda v: {"M": v}),
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
    ),
    max_leaves=10,
)


_QUERY = get_service_model("dynamodb").operation_model("Query").output_shape
_BOTOCORE = create_parser("json")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dictionaries(st.text(min_size=1, max_size=6), _value, max_size=5), max_size=3))
def test_the_parser_reads_answers_as_botocores_own(items: list[dict[str, Any]]) -> None:
    body = json.dumps({"Items": items, "Count": len(items)}).encode()
    response = {"headers": {}, "status_code": 200, "body": body}
    assert moto_direct.parse(response, _QUERY) == _BOTOCORE.parse(response, _QUERY)


@pytest.mark.parametrize(
    ("checked", "refusal"),
    [("c", "TransactionCanceled"), ("a", "multiple operations on one item")],
)
def test_a_refused_transaction_leaves_the_table_as_it_was_with_the_keyed_rollback(
    clients: tuple[Any, Any], checked: str, refusal: str
) -> None:
    # moto_rollback backs up only the items a transaction names: moto runs its actions in
    # order and rolls back when one failed (a condition: after the rest ran; a second action
    # on one item: at once), so what it wrote must come back and what it created must go.
    _, direct = clients
    for sk in ("a", "b", "c"):
        item = {"PK": {"S": "p"}, "SK": {"S": sk}, "v": {"N": "1"}}
        direct.put_item(TableName="t-direct", Item=item)

    def table() -> list[dict[str, Any]]:
        return sorted(direct.scan(TableName="t-direct")["Items"], key=json.dumps)

    def key(sk: str) -> dict[str, Any]:
        return {"PK": {"S": "p"}, "SK": {"S": sk}}

    before = table()
    update = {
        "TableName": "t-direct",
        "Key": key("a"),
        "UpdateExpression": "SET v = :two",
        "ExpressionAttributeValues": {":two": {"N": "2"}},
    }
    with pytest.raises(ClientError, match=refusal):
        direct.transact_write_items(
            TransactItems=[
                {"Update": update},
                {"Put": {"TableName": "t-direct", "Item": key("new")}},
                {"Delete": {"TableName": "t-direct", "Key": key("b")}},
                {
                    "ConditionCheck": {
                        "TableName": "t-direct",
                        "Key": key(checked),
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                },
            ]
        )
    assert table() == before
    direct.transact_write_items(
        TransactItems=[
            {"Update": update},
            {"Put": {"TableName": "t-direct", "Item": key("new")}},
            {"Delete": {"TableName": "t-direct", "Key": key("b")}},
        ]
    )
    after = {item["SK"]["S"]: item.get("v") for item in table()}
    assert after == {"a": {"N": "2"}, "c": {"N": "1"}, "new": None}
