"""devkit.semantics.hooks on moto: real botocore clients see DynamoDB's answers, raised as the
SDK raises them, and a refused request never reaches the table.

No thread is needed to be "during" a transaction: the hooks' in-flight sleep is injected, and
the other client's requests are made inside it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devkit.capacity.table_schema import TableSchema
from devkit.semantics.hooks import SemanticsHooks
from devkit.semantics.model import DynamoSemantics
from saga_index.index import Layout
from saga_index.store import SagaWriter
from saga_index.store.dynamo import RetryPolicy
from tests.support.backends import Backend, make_backend

STATE = {"PK": {"S": "RSAGA_INDEX#CONTROL"}, "SK": {"S": "STATE"}}
ROW = {"PK": {"S": "RSAGA#a"}, "SK": {"S": "META"}}


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("semantics-hooks", synthesized_template, endpoint_url=None)
        backend.client.put_item(TableName=backend.table_name, Item={**STATE, "v": {"N": "1"}})
        backend.client.put_item(TableName=backend.table_name, Item={**ROW, "v": {"N": "1"}})
        yield backend


def _schema(dynamo: Backend, template: dict[str, Any]) -> TableSchema:
    return TableSchema.from_template(template, dynamo.table_name)


def _set(dynamo: Backend, key: dict[str, Any], value: str) -> dict[str, Any]:
    return {
        "TableName": dynamo.table_name,
        "Key": key,
        "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"N": value}},
    }


def _code(call: Any) -> tuple[str | None, dict[str, Any]]:
    try:
        call()
    except ClientError as err:
        return err.response["Error"]["Code"], dict(err.response)
    return None, {}


def test_requests_during_a_transaction_meet_its_items(
    dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    semantics = DynamoSemantics(dynamo.table_name, clock=lambda: 5.0)
    schema = _schema(dynamo, synthesized_template)
    seen: dict[str, Any] = {}
    other = SemanticsHooks(semantics, schema, reader=dynamo.new_client()).attach(
        dynamo.new_client(max_attempts=1)
    )

    def during(seconds: float) -> None:
        seen["held for"] = seconds
        seen["update"] = _code(lambda: other.update_item(**_set(dynamo, STATE, "9")))
        seen["transaction"] = _code(
            lambda: other.transact_write_items(
                TransactItems=[
                    {"Update": _set(dynamo, {"PK": {"S": "RSAGA#b"}, "SK": {"S": "META"}}, "9")},
                    {"Update": _set(dynamo, ROW, "9")},
                ]
            )
        )
        seen["read"] = other.get_item(TableName=dynamo.table_name, Key=STATE, ConsistentRead=True)

    fenced = SemanticsHooks(semantics, schema, reader=dynamo.new_client(), sleep=during).attach(
        dynamo.new_client(max_attempts=1)
    )
    fenced.transact_write_items(
        TransactItems=[
            {
                "ConditionCheck": {
                    "TableName": dynamo.table_name,
                    "Key": STATE,
                    "ConditionExpression": "attribute_exists(v)",
                }
            },
            {"Update": _set(dynamo, ROW, "2")},
        ]
    )

    assert seen["held for"] == pytest.approx(semantics.in_flight)
    assert seen["update"][0] == "TransactionConflictException"
    code, response = seen["transaction"]
    assert code == "TransactionCanceledException"
    assert [r["Code"] for r in response["CancellationReasons"]] == ["None", "TransactionConflict"]
    assert seen["read"]["Item"]["v"] == {"N": "1"}, "reads are not affected"
    # Nothing refused reached moto; the transaction's own write did, and its items are free.
    assert dynamo.get(STATE["PK"]["S"], "STATE")["v"] == {"N": "1"}
    assert dynamo.get("RSAGA#a", "META")["v"] == {"N": "2"}
    assert dynamo.get("RSAGA#b", "META") is None
    other.update_item(**_set(dynamo, STATE, "3"))
    assert dynamo.get(STATE["PK"]["S"], "STATE")["v"] == {"N": "3"}


def test_a_saga_write_that_meets_a_backfills_transaction_is_sent_again_once_it_ends(
    dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    """A re-stamp's transaction holds the saga row; the writer's transition is refused with
    TransactionConflictException (botocore does not resend it), waits, and lands once the
    transaction has ended, on top of what the transaction wrote."""
    semantics = DynamoSemantics(dynamo.table_name, clock=lambda: 5.0)
    schema = _schema(dynamo, synthesized_template)
    dynamo.put_saga("a", "p-1", state="OPENED")
    in_flight, release = threading.Event(), threading.Event()

    def hold(_seconds: float) -> None:
        in_flight.set()
        release.wait(10)

    fenced = SemanticsHooks(semantics, schema, reader=dynamo.new_client(), sleep=hold).attach(
        dynamo.new_client(max_attempts=1)
    )
    restamp = threading.Thread(
        target=lambda: fenced.transact_write_items(
            TransactItems=[{"Update": _set(dynamo, ROW, "2")}]
        )
    )
    restamp.start()
    assert in_flight.wait(10)
    waits: list[float] = []

    def back_off(seconds: float) -> None:
        # The first attempt was refused: let the transaction end before the second.
        waits.append(seconds)
        release.set()
        restamp.join(10)

    other = SemanticsHooks(semantics, schema, reader=dynamo.new_client()).attach(
        dynamo.new_client()
    )
    writer = SagaWriter(
        other, dynamo.table_name, plan=Layout.sharded(16), retry=RetryPolicy(), sleep=back_off
    )
    try:
        row = writer.transition(
            saga_id="a", person_id="p-1", to_state="SIGNED", updated_at="2026-01-02T00:00:00Z"
        )
    finally:
        release.set()
        restamp.join(10)

    assert len(waits) == 1, "one refusal, then the write landed"
    assert row["state"] == "SIGNED"
    assert row["v"] == 2, "on top of the transaction's write"


@pytest.mark.parametrize(
    ("throttle_code", "field"),
    [
        ("ThrottlingException", "throttlingReasons"),
        ("ProvisionedThroughputExceededException", "ThrottlingReasons"),
    ],
)
def test_a_key_past_its_ceiling_is_throttled_before_the_call(
    dynamo: Backend, synthesized_template: dict[str, Any], throttle_code: Any, field: str
) -> None:
    now = [10.2]
    semantics = DynamoSemantics(
        dynamo.table_name, clock=lambda: now[0], wcu_ceiling=2.0, throttle_code=throttle_code
    )
    client = SemanticsHooks(
        semantics, _schema(dynamo, synthesized_template), reader=dynamo.new_client()
    ).attach(dynamo.new_client(max_attempts=1))

    client.update_item(**_set(dynamo, ROW, "2"))
    client.update_item(**_set(dynamo, ROW, "3"))
    code, response = _code(lambda: client.update_item(**_set(dynamo, ROW, "4")))

    assert code == throttle_code
    assert response[field] == [
        {
            "reason": "TableWriteKeyRangeThroughputExceeded",
            "resource": f"arn:aws:dynamodb:us-east-1:123456789012:table/{dynamo.table_name}",
        }
    ]
    assert dynamo.get("RSAGA#a", "META")["v"] == {"N": "3"}, "the throttled write never ran"
    assert semantics.used(dynamo.table_name, "RSAGA#a", "w", 10) == 2.0
    now[0] = 11.0
    client.update_item(**_set(dynamo, ROW, "5"))
