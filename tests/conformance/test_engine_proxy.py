"""The fast engine (devkit.engine: dynalite behind the semantics proxy) as boto3 meets it: the
conflict rules, the per-key ceilings and transactions, each answered with the exact error shape
DynamoDB sends (HTTP 400, x-amzn-ErrorType, the JSON body botocore parses into
CancellationReasons / throttlingReasons / ThrottlingReasons).

Each engine is a real pair of processes, started once for the tests of the same figures (the
defaults, a long in-flight time, a small ceiling), each of which gets its table afresh."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devkit.dynalite import DynaliteServer
from devkit.engine import Engine, PortInUseError, ProxyOptions
from devkit.schema import delete_table
from saga_index.store.dynamo import make_client

pytestmark = pytest.mark.conformance

TABLE = "engine-proxy"
ARN = f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}"


def _client(endpoint_url: str) -> Any:
    # One attempt: a refusal is what the test looks at, not botocore's retries of it.
    return make_client(region="us-east-1", endpoint_url=endpoint_url, max_attempts=1)


def _create(client: Any) -> None:
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
            {"AttributeName": "GPK", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "PK", "KeyType": "HASH"},
            {"AttributeName": "SK", "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "GSI",
                "KeySchema": [{"AttributeName": "GPK", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )


def _key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "META"}}


# The figures a test's engine runs with. Tests of the same figures share one engine (seconds to
# start): each gets the table afresh, and with it the proxy's model and counts of the table.
DEFAULT = ProxyOptions()
LONG_IN_FLIGHT = ProxyOptions(in_flight=1.5)
SMALL_CEILING = ProxyOptions(wcu_ceiling=3)
SMALL_PROVISIONED_CEILING = ProxyOptions(
    wcu_ceiling=3, throttle_code="ProvisionedThroughputExceededException"
)


@pytest.fixture(scope="module")
def shared_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    options = getattr(request, "param", DEFAULT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "local")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "local")
        with Engine(options=options) as running:
            yield running
    # Stopped (SIGTERM), the proxy shuts down cleanly: not an abort a second later for want of
    # the stdin lock its exit-with-stdin watch held.
    assert running.proxy_exit_code == 0


@pytest.fixture
def engine(shared_engine: Engine, local_aws_env: None) -> Engine:
    """The engine with the test's table created afresh (deleting a table drops the proxy's
    model of it, its counts included)."""
    client = _client(shared_engine.endpoint_url)
    if TABLE in client.list_tables()["TableNames"]:
        delete_table(client, TABLE)
    _create(client)
    return shared_engine


@pytest.fixture
def local_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")


def _update(key: str, value: int, *, expect: int | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {
        "TableName": TABLE,
        "Key": _key(key),
        "UpdateExpression": "SET n = :v",
        "ExpressionAttributeValues": {":v": {"N": str(value)}},
    }
    if expect is not None:
        update["ConditionExpression"] = "n = :old"
        update["ExpressionAttributeValues"][":old"] = {"N": str(expect)}
    return update


# ---- transactions ------------------------------------------------------------------------


def test_a_transaction_applies_every_write_or_none(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    client.put_item(TableName=TABLE, Item={**_key("a"), "n": {"N": "1"}})

    # The second action's condition fails: the first action's put is undone
    with pytest.raises(ClientError) as cancelled:
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("b"), "n": {"N": "7"}}}},
                {
                    "Update": {
                        **_update("a", 2, expect=99),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        )
    error = cancelled.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == (
        "TransactionCanceledException"
    )
    assert error["CancellationReasons"] == [
        {"Code": "None"},
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {**_key("a"), "n": {"N": "1"}},
        },
    ]
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key("b"))
    assert client.get_item(TableName=TABLE, Key=_key("a"))["Item"]["n"] == {"N": "1"}

    # A ConditionCheck on an item that does not exist (and must not), and a conditional update:
    # both applied, and the check wrote nothing
    client.transact_write_items(
        TransactItems=[
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": _key("absent"),
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            },
            {"Update": _update("a", 2, expect=1)},
        ]
    )
    assert client.get_item(TableName=TABLE, Key=_key("a"))["Item"]["n"] == {"N": "2"}
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key("absent"))

    # A failing ConditionCheck cancels the transaction and names itself
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("a"),
                        "ConditionExpression": "n = :three",
                        "ExpressionAttributeValues": {":three": {"N": "3"}},
                    }
                },
                {"Put": {"TableName": TABLE, "Item": {**_key("c"), "n": {"N": "1"}}}},
            ]
        )
    assert [r["Code"] for r in refused.value.response["CancellationReasons"]] == [
        "ConditionalCheckFailed",
        "None",
    ]
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key("c"))


def test_a_repeated_client_request_token_is_applied_once(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    client.put_item(TableName=TABLE, Item={**_key("t"), "n": {"N": "1"}})
    request = {"TransactItems": [{"Update": _update("t", 2, expect=1)}], "ClientRequestToken": "x1"}

    client.transact_write_items(**request)
    # The same request again (a lost answer, retried): success, nothing applied twice
    client.transact_write_items(**request)
    with pytest.raises(ClientError) as mismatch:
        client.transact_write_items(
            TransactItems=[{"Update": _update("t", 3, expect=2)}], ClientRequestToken="x1"
        )

    assert mismatch.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    assert client.get_item(TableName=TABLE, Key=_key("t"))["Item"]["n"] == {"N": "2"}


def test_a_transaction_naming_one_item_twice_is_refused(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(
            TransactItems=[{"Update": _update("d", 1)}, {"Update": _update("d", 2)}]
        )
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "multiple operations on one item" in refused.value.response["Error"]["Message"]


def test_concurrent_transactions_keep_two_items_equal(engine: Engine) -> None:
    # Each transaction moves both counters from n to n+1 under a condition on both; run from 8
    # threads, a conflict or a condition failure is retried: if any transaction were applied
    # in part, or two interleaved, the counters would part.
    client = _client(engine.endpoint_url)
    for pk in ("x", "y"):
        client.put_item(TableName=TABLE, Item={**_key(pk), "n": {"N": "0"}})
    applied: list[int] = []

    def worker() -> None:
        mine = _client(engine.endpoint_url)
        for _ in range(5):
            while True:
                n = int(
                    mine.get_item(TableName=TABLE, Key=_key("x"), ConsistentRead=True)["Item"]["n"][
                        "N"
                    ]
                )
                try:
                    mine.transact_write_items(
                        TransactItems=[
                            {"Update": _update("x", n + 1, expect=n)},
                            {"Update": _update("y", n + 1, expect=n)},
                        ]
                    )
                except mine.exceptions.TransactionCanceledException:
                    continue
                applied.append(n + 1)
                break

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    x = client.get_item(TableName=TABLE, Key=_key("x"))["Item"]["n"]["N"]
    y = client.get_item(TableName=TABLE, Key=_key("y"))["Item"]["n"]["N"]
    assert x == y == "40"
    assert sorted(applied) == list(range(1, 41))


# ---- the conflict rules ------------------------------------------------------------------


@pytest.mark.parametrize("shared_engine", [LONG_IN_FLIGHT], indirect=True)
def test_writes_meet_an_ongoing_transaction_as_on_dynamodb(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    client.put_item(TableName=TABLE, Item={**_key("held"), "n": {"N": "0"}})
    holder = threading.Thread(
        target=lambda: _client(engine.endpoint_url).transact_write_items(
            TransactItems=[{"Update": _update("held", 1)}]
        )
    )
    holder.start()
    time.sleep(0.5)  # the transaction holds its item for 1.5 s

    with pytest.raises(ClientError) as plain:
        client.put_item(TableName=TABLE, Item={**_key("held"), "n": {"N": "5"}})
    with pytest.raises(ClientError) as other:
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {**_key("free"), "n": {"N": "1"}}}},
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": _key("held"),
                        "ConditionExpression": "attribute_exists(PK)",
                    }
                },
            ]
        )
    read = client.get_item(TableName=TABLE, Key=_key("held"))  # reads are not affected
    holder.join(timeout=30)

    assert plain.value.response["Error"]["Code"] == "TransactionConflictException"
    assert plain.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert other.value.response["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
    ]
    assert "Item" in read
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key("free"))
    assert client.get_item(TableName=TABLE, Key=_key("held"))["Item"]["n"] == {"N": "1"}
    counts = engine.table_stats(TABLE)
    assert counts.conflicts == {"PutItem": 1, "TransactWriteItems": 1}
    assert counts.cancelled_transactions == 1


# ---- the per-key ceilings ----------------------------------------------------------------


def _hammer(client: Any, item: Callable[[int], dict[str, Any]], times: int = 20) -> ClientError:
    """Write item(n) for n = 0, 1, ... until the engine throttles; its error."""
    for n in range(times):
        try:
            client.put_item(TableName=TABLE, Item={"SK": {"S": f"s{n}"}, **item(n)})
        except ClientError as err:
            return err
    raise AssertionError(f"{times} writes were never throttled")


@pytest.mark.parametrize("shared_engine", [SMALL_CEILING], indirect=True)
def test_a_key_past_its_write_ceiling_is_throttled_with_its_reason(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    pad = {"pad": {"S": "x" * 900}}  # 1 WCU an item

    table = _hammer(client, lambda n: {"PK": {"S": "hot"}, **pad}).response
    index = _hammer(client, lambda n: {"PK": {"S": f"cold{n}"}, "GPK": {"S": "hot-gsi"}, **pad})

    assert table["Error"]["Code"] == "ThrottlingException"
    assert table["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert table["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == "ThrottlingException"
    assert table["throttlingReasons"] == [
        {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": ARN}
    ]
    # Each item has its own table key but shares the index's: the index's ceiling throttles
    assert index.response["throttlingReasons"] == [
        {"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": f"{ARN}/index/GSI"}
    ]
    assert engine.stats()["throttledKeys"][0]["refused"] >= 1


@pytest.mark.parametrize("shared_engine", [SMALL_CEILING], indirect=True)
def test_the_writes_a_key_admitted_are_counted_in_its_own_seconds(engine: Engine) -> None:
    """What a bench judges a pace by: the writes the proxy charged, per second of the clock its
    ceiling counts in, by operation (a client's own clock places some in the next second)."""
    client = _client(engine.endpoint_url)
    pad = {"pad": {"S": "x" * 900}}  # 1 WCU an item, all on the table key "hot"
    start = engine.clock()
    accepted, refused = 0, []
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        try:
            item = {"PK": {"S": "hot"}, "SK": {"S": f"s{accepted + len(refused)}"}, **pad}
            client.put_item(TableName=TABLE, Item=item)
            accepted += 1
        except ClientError as err:
            refused.append(err.response["Error"]["Code"])
        time.sleep(0.02)
    client.transact_write_items(
        TransactItems=[{"Put": {"TableName": TABLE, "Item": {**_key("tx"), "n": {"N": "1"}}}}]
    )
    end = engine.clock()

    writes = engine.table_stats(TABLE).writes
    puts = {second: count for (op, second), count in writes.items() if op == "PutItem"}
    assert refused
    assert set(refused) == {"ThrottlingException"}
    assert sum(puts.values()) == accepted
    # every second of the key's full, none over its ceiling of 3
    assert max(puts.values()) == 3
    assert all(int(start) <= second <= end for second in puts)
    assert sum(c for (op, _), c in writes.items() if op == "TransactWriteItems") == 1


@pytest.mark.parametrize("shared_engine", [SMALL_CEILING], indirect=True)
def test_a_transaction_moving_items_off_an_index_key_is_throttled_on_that_key(
    engine: Engine,
) -> None:
    # A GSI key change is a delete under the old key: the transaction's estimate must see it
    # (the update's SET of the index key), as a single UpdateItem's does, or the old key's
    # ceiling would be charged but never enforced.
    client = _client(engine.endpoint_url)
    client.batch_write_item(
        RequestItems={
            TABLE: [
                {"PutRequest": {"Item": {**_key(f"m{n}"), "GPK": {"S": "leaving"}}}}
                for n in range(10)
            ]
        }
    )
    cancelled = []
    for n in range(10):
        move = {
            "TableName": TABLE,
            "Key": _key(f"m{n}"),
            "UpdateExpression": "SET GPK = :new",
            "ExpressionAttributeValues": {":new": {"S": f"arrived{n}"}},
        }
        try:
            client.transact_write_items(TransactItems=[{"Update": move}])
        except client.exceptions.TransactionCanceledException as err:
            cancelled.append(err.response)
    assert cancelled, "the old index key's ceiling was never enforced"
    assert [r["Code"] for r in cancelled[0]["CancellationReasons"]] == ["ThrottlingError"]
    assert {"target": "GSI", "key": "leaving", "refused": len(cancelled)} in (
        engine.stats()["throttledKeys"]
    )


@pytest.mark.parametrize("shared_engine", [SMALL_PROVISIONED_CEILING], indirect=True)
def test_a_provisioned_table_is_throttled_with_its_own_error(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    error = _hammer(client, lambda n: {"PK": {"S": "hot"}, "pad": {"S": "x" * 900}}).response
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error["ThrottlingReasons"] == [
        {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": ARN}
    ]


@pytest.mark.parametrize("shared_engine", [SMALL_CEILING], indirect=True)
def test_a_transaction_past_a_ceiling_is_cancelled_with_throttling_error(engine: Engine) -> None:
    client = _client(engine.endpoint_url)
    pad = {"pad": {"S": "x" * 900}}
    cancelled: list[tuple[int, dict[str, Any]]] = []
    for n in range(20):
        try:
            client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": {**_key(f"k{n}"), "n": {"N": "1"}}}},
                    {
                        "Put": {
                            "TableName": TABLE,
                            "Item": {**_key("tx-hot"), "n": {"N": str(n)}, **pad},
                        }
                    },
                ]
            )
        except client.exceptions.TransactionCanceledException as err:
            cancelled.append((n, err.response))
            break
    assert cancelled, "the transactions were never throttled"
    ((n, error),) = cancelled
    assert [r["Code"] for r in error["CancellationReasons"]] == ["None", "ThrottlingError"]
    # Nothing of it was written
    assert "Item" not in client.get_item(TableName=TABLE, Key=_key(f"k{n}"))


# ---- bad input ---------------------------------------------------------------------------


def test_a_port_in_use_is_refused_naming_it_and_nothing_starts(local_aws_env: None) -> None:
    started: list[DynaliteServer] = []

    def recording(**kwargs: Any) -> DynaliteServer:
        server = DynaliteServer(**kwargs)
        started.append(server)
        return server

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for raw in (False, True):
            with pytest.raises(PortInUseError, match=f"port {port} is in use"):
                Engine(port=port, raw=raw, server_factory=recording).start()
    assert all("not running" in server.status() for server in started)
