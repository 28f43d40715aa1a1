"""The simulated table under DynamoDB's conflict rules (devkit.semantics on the virtual clock):
a transaction is in flight across scheduler steps, and what other tasks send meanwhile meets its
items; once its in-flight time has passed it runs and its items are free."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sim.clock import VirtualTime
from tests.sim.harness import simulated_aws
from tests.sim.requests import TABLE
from tests.sim.scheduler import Task
from tests.sim.table import SimTable

pytestmark = pytest.mark.simulation

STATE = {"PK": {"S": "RSAGA_INDEX#CONTROL"}, "SK": {"S": "STATE"}}
ROW = {"PK": {"S": "RSAGA#a"}, "SK": {"S": "META"}}


@pytest.fixture
def table() -> Iterator[SimTable]:
    with simulated_aws():
        time = VirtualTime()
        sim = SimTable(time, random.Random(7))
        sim.seed({**STATE, "v": {"N": "1"}})
        sim.seed({**ROW, "v": {"N": "1"}})
        yield sim


def _set(key: dict[str, Any], value: str) -> dict[str, Any]:
    return {
        "TableName": TABLE,
        "Key": key,
        "UpdateExpression": "SET v = :v",
        "ExpressionAttributeValues": {":v": {"N": value}},
    }


def _task(table: SimTable, name: str, call: Callable[[Any], object], seen: dict[str, Any]) -> Task:
    client = table.client_for(name, faulty=False)

    def body() -> None:
        try:
            call(client)
            seen[name] = "ok"
        except ClientError as err:
            seen[name] = err.response["Error"]["Code"]
            seen[f"{name}.response"] = err.response

    task = Task(name, body, table.time)
    task.start()
    return task


def test_a_transaction_in_flight_holds_its_items_across_steps(table: SimTable) -> None:
    seen: dict[str, Any] = {}
    fenced = _task(
        table,
        "worker",
        lambda c: c.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": STATE,
                        "ConditionExpression": "attribute_exists(v)",
                    }
                },
                {"Update": _set(ROW, "2")},
            ]
        ),
        seen,
    )
    heartbeat = _task(table, "keeper", lambda c: c.update_item(**_set(STATE, "5")), seen)
    other = _task(
        table,
        "other-worker",
        lambda c: c.transact_write_items(
            TransactItems=[
                {
                    "ConditionCheck": {
                        "TableName": TABLE,
                        "Key": STATE,
                        "ConditionExpression": "attribute_exists(v)",
                    }
                }
            ]
        ),
        seen,
    )
    reader = _task(
        table, "reader", lambda c: c.get_item(TableName=TABLE, Key=STATE, ConsistentRead=True), seen
    )

    fenced.resume()  # to its request
    fenced.resume()  # admitted: in flight, parked until its in-flight time has passed
    assert fenced.label.startswith("in flight: TransactWriteItems")
    assert fenced.wake_at == pytest.approx(table.time.now + table.semantics.in_flight)
    for task in (heartbeat, other, reader):
        task.resume()  # to its request
        task.resume()  # answered
    assert seen["keeper"] == "TransactionConflictException"
    assert seen["other-worker"] == "TransactionCanceledException"
    reasons = seen["other-worker.response"]["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["TransactionConflict"]
    assert seen["reader"] == "ok", "reads are not affected"
    assert table.mirror[("RSAGA#a", "META")]["v"] == {"N": "1"}, "not run while in flight"

    table.time.advance(table.semantics.in_flight)
    fenced.resume()  # runs, its items free
    assert seen["worker"] == "ok"
    assert table.mirror[("RSAGA#a", "META")]["v"] == {"N": "2"}
    again = _task(table, "keeper-2", lambda c: c.update_item(**_set(STATE, "6")), seen)
    again.resume()
    again.resume()
    assert seen["keeper-2"] == "ok"
    assert table.mirror[("RSAGA_INDEX#CONTROL", "STATE")]["v"] == {"N": "6"}
