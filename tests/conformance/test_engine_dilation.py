"""The fast engine with its time dilated (ProxyOptions.time_scale, devkit.semantics.dilation):
the proxy judges a key's budget per ENGINE second and holds a transaction's items for its
in-flight time in engine seconds, so a rate this machine can send in real seconds meets the
ceilings as the production rate would.

The same requests go to two engines that differ only in their time scale (0.1 and 1): the
figures are small (a ceiling of 5 WCU, an in-flight time of 0.1 s) so each test takes seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from devkit.engine import Engine, ProxyOptions
from devkit.schema import delete_table
from saga_index.store.dynamo import make_client

pytestmark = pytest.mark.conformance

TABLE = "engine-dilation"
ARN = f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}"
CEILING = 5.0  # WCU per key per second of the engine's clock
IN_FLIGHT = 0.1  # seconds of the engine's clock
DILATED = 0.1  # engine seconds per real second: one engine second lasts 10 real seconds
WRITES_PER_REAL_SECOND = 4.0  # under CEILING per real second; 40 per engine second when dilated
# Any split of these writes across two of the engine's seconds puts more than CEILING in one.
WRITES = 12


def _options(time_scale: float) -> ProxyOptions:
    return ProxyOptions(
        wcu_ceiling=CEILING,
        in_flight=IN_FLIGHT,
        throttle_code="ProvisionedThroughputExceededException",
        time_scale=time_scale,
    )


@pytest.fixture(scope="module", params=[DILATED, 1.0], ids=["dilated", "real-time"])
def shared_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "local")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "local")
        with Engine(options=_options(request.param)) as running:
            yield running


@pytest.fixture
def engine(shared_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    client = _client(shared_engine)
    if TABLE in client.list_tables()["TableNames"]:
        delete_table(client, TABLE)
    client.create_table(
        TableName=TABLE,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
    )
    return shared_engine


def _client(engine: Engine) -> Any:
    # One attempt: the refusal is what the test looks at, not botocore's retries of it.
    return make_client(region="us-east-1", endpoint_url=engine.endpoint_url, max_attempts=1)


def test_the_engine_says_its_time_scale(engine: Engine) -> None:
    options = engine.stats()["options"]
    assert options["timeScale"] == engine.options.time_scale
    if engine.options.time_scale == DILATED:
        assert options["time"] == "engine time at 0.1x real time: 1 engine second = 10 real seconds"
        assert "1 engine second = 10 real seconds" in engine.describe()


def test_a_key_budget_is_judged_per_engine_second(engine: Engine) -> None:
    client = _client(engine)
    refused: list[dict[str, Any]] = []
    started = time.monotonic()
    for n in range(WRITES):
        # On a schedule, not after each answer: the real rate stays under the ceiling.
        time.sleep(max(0.0, started + n / WRITES_PER_REAL_SECOND - time.monotonic()))
        try:
            client.put_item(TableName=TABLE, Item={"PK": {"S": "hot"}, "n": {"N": str(n)}})
        except ClientError as err:
            refused.append(err.response)

    if engine.options.time_scale == 1.0:
        assert refused == []
        return
    # 4 writes a real second are 40 an engine second: past the 5 WCU ceiling in every second.
    assert refused
    error = refused[0]
    assert error["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert error["ThrottlingReasons"] == [
        {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": ARN}
    ]
    assert len(refused) >= WRITES - 2 * CEILING
    assert engine.stats()["throttledKeys"] == [
        {"target": TABLE, "key": "hot", "refused": len(refused)}
    ]


def test_a_transaction_holds_its_items_for_its_in_flight_time_in_engine_seconds(
    engine: Engine,
) -> None:
    client = _client(engine)
    client.put_item(TableName=TABLE, Item={"PK": {"S": "held"}, "n": {"N": "0"}})
    took: list[float] = []

    def transact() -> None:
        begun = time.monotonic()
        _client(engine).transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"PK": {"S": "held"}},
                        "UpdateExpression": "SET n = :v",
                        "ExpressionAttributeValues": {":v": {"N": "1"}},
                    }
                }
            ]
        )
        took.append(time.monotonic() - begun)

    holder = threading.Thread(target=transact)
    holder.start()
    # 0.5 real seconds in: past the 0.1 s hold in real time, inside it in engine time (1 s).
    time.sleep(0.5)
    try:
        client.put_item(TableName=TABLE, Item={"PK": {"S": "held"}, "n": {"N": "5"}})
        outcome = "written"
    except ClientError as err:
        outcome = err.response["Error"]["Code"]
    holder.join(timeout=30)

    real_hold = IN_FLIGHT / engine.options.time_scale
    assert took
    assert took[0] >= real_hold
    if engine.options.time_scale == 1.0:
        assert outcome == "written"
    else:
        assert outcome == "TransactionConflictException"
        assert engine.table_stats(TABLE).conflicts == {"PutItem": 1}
