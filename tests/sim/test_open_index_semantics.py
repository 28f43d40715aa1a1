"""The DynamoDB semantics layer (devkit.semantics, on the simulated table) meets the open-saga
index's own writes, asserted on its own (the open-index plans of test_open_index.py run under
it but assert the protocol only):

- the open-index run's fenced stamp of a row (its real STAMP and row condition, inside a
  TransactWriteItems beside a fence ConditionCheck) is in flight when a writer closes the same
  saga (the real SagaWriter: one UpdateItem that removes OpenSagaPK): the close is refused with
  TransactionConflictException, and once the writer sends it again the saga is closed and out of
  the open index: the protocol holds through the conflict;
- writers stamping open sagas onto ONE open index key (`RenewalSagaOpen#0`, the open index's N
  = 1) meet that key's 1,000 WCU ceiling, which the layer prices on the open index as a sparse
  GSI of its own: the refusal names the open index, a throttled create writes nothing, and the
  next second's resend lands with its stamp. Spread over N = 16 keys, the same writes pass.

Each fails if the layer did not see those writes: no conflict, no throttle on the open index.
The writers here send each write once (`SagaWriter(retry=ONCE)`), so that what the layer answers
one request is what the test sees; a SagaWriter sends a refused write again on its own
(tests/component/test_dynamo_semantics_hooks.py shows a transition landing after a re-stamp).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from saga_index.index import Layout, Person, RetryLaterError, names
from saga_index.layout_change.backfill.open_row import STAMP, unchanged_since_read
from saga_index.layout_change.record import OpenIndex, Routing
from saga_index.store.dynamo import RetryPolicy, request_expressions, serialize
from saga_index.store.writer import SagaWriter
from tests.sim.clock import VirtualTime
from tests.sim.harness import simulated_aws
from tests.sim.requests import TABLE
from tests.sim.scheduler import Task
from tests.sim.table import SimTable

pytestmark = pytest.mark.simulation

N = 16
OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
OPENED_AT = "2026-01-01T00:00:00.000Z"
SLOT = {"PK": {"S": "RSAGA_INDEX#FENCE#0"}, "SK": {"S": "SLOT"}}
ONCE = RetryPolicy(attempts=1)


def _refusal(err: ClientError | RetryLaterError) -> dict[str, Any]:
    """DynamoDB's answer to the refused request (a SagaWriter's RetryLaterError chains it)."""
    cause = err if isinstance(err, ClientError) else err.__cause__
    assert isinstance(cause, ClientError), err
    return dict(cause.response)


def plan(open_shards: int) -> Routing:
    index = OpenIndex.of("open", open_shards)
    return Routing.between(Layout.sharded(N), open_writes=index, open_reads=index)


@pytest.fixture
def table() -> Iterator[SimTable]:
    with simulated_aws():
        sim = SimTable(VirtualTime(), random.Random(7))
        sim.seed({**SLOT, "epoch": {"N": "1"}})
        yield sim


def _task(table: SimTable, name: str, call: Any, seen: dict[str, Any]) -> Task:
    client = table.client_for(name, faulty=False)

    def body() -> None:
        try:
            call(client)
            seen[name] = "ok"
        except (ClientError, RetryLaterError) as err:
            seen[name] = _refusal(err)["Error"]["Code"]

    task = Task(name, body, table.time)
    task.start()
    return task


def _row(table: SimTable, saga_id: str) -> dict[str, Any] | None:
    return table.mirror.get((f"RSAGA#{saga_id}", "META"))


def test_a_close_meets_the_open_index_runs_stamp_in_flight_and_the_protocol_holds(
    table: SimTable,
) -> None:
    # Given an open saga the open-index run is about to stamp
    person = "p-1"
    stamp = Person.of(person).open_index_pk(N)
    row = serialize(
        {
            "PK": "RSAGA#r",
            "SK": "META",
            "entityType": "RenewalSaga",
            "sagaId": "r",
            "personId": person,
            "state": "OPENED",
            "openedAt": OPENED_AT,
            "GSI4PK": Person.of(person).shard_gsi4pk(N),
            "GSI4SK": f"{person}#{OPENED_AT}",
        }
    )
    table.seed(row)
    fenced_stamp = {
        "TransactItems": [
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": SLOT,
                    "ConditionExpression": "attribute_exists(PK)",
                }
            },
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": {"PK": row["PK"], "SK": row["SK"]},
                    **request_expressions(
                        update=STAMP.given({":key": {"S": stamp}}),
                        condition=unchanged_since_read(row),
                    ),
                }
            },
        ]
    }

    def close(client: Any) -> None:
        SagaWriter(client, TABLE, plan=plan(N), retry=ONCE).transition(
            saga_id="r", person_id=person, to_state="SIGNED", updated_at=OPENED_AT
        )

    seen: dict[str, Any] = {}
    stamper = _task(table, "stamper", lambda c: c.transact_write_items(**fenced_stamp), seen)
    stamper.resume()  # to its request
    stamper.resume()  # admitted: in flight, its items held
    assert stamper.label.startswith("in flight: TransactWriteItems")

    # When a writer closes the saga meanwhile, then DynamoDB refuses the close
    writer = _task(table, "writer", close, seen)
    writer.resume()
    writer.resume()
    assert seen["writer"] == "TransactionConflictException"
    assert table.semantics.stats.conflicts["UpdateItem"] == 1

    # And once the stamp has run and the writer sends the close again, the saga is closed and
    # carries no OpenSagaPK: no closed saga stays in the open index
    table.time.advance(table.semantics.in_flight)
    stamper.resume()
    assert seen["stamper"] == "ok"
    assert (_row(table, "r") or {})[OPEN_KEY] == {"S": stamp}
    again = _task(table, "writer-again", close, seen)
    again.resume()
    again.resume()
    assert seen["writer-again"] == "ok"
    closed = _row(table, "r") or {}
    assert closed["state"] == {"S": "SIGNED"}
    assert OPEN_KEY not in closed
    table.settle()
    assert not [e for e in table.visible(names.OPEN_INDEX_NAME) if e[2] == "RSAGA#r"]


def _create_until_throttled(table: SimTable, open_shards: int, count: int) -> list[str]:
    """`count` writers' creates of 40 KB open sagas in one second; the ones refused, each
    throttled on the open index."""
    writer = SagaWriter(
        table.client_for("writers", faulty=False), TABLE, plan=plan(open_shards), retry=ONCE
    )
    refused: dict[str, dict[str, Any]] = {}
    for n in range(count):
        try:
            writer.create_saga(
                saga_id=f"s{n}",
                person_id=f"p-{n}",
                lease_id=f"l-{n}",
                opened_at=OPENED_AT,
                extra={"payload": "x" * 40_000},
            )
        except RetryLaterError as err:
            refused[f"s{n}"] = _refusal(err)
    for response in refused.values():
        assert response["Error"]["Code"] == "ThrottlingException"
        [reason] = response["throttlingReasons"]
        assert reason["resource"].endswith(f"/index/{names.OPEN_INDEX_NAME}"), reason
    return list(refused)


def test_writers_stamping_one_open_index_key_meet_its_ceiling_and_a_resend_lands(
    table: SimTable,
) -> None:
    # Given the open index's N = 1: every open saga's OpenSagaPK is RenewalSagaOpen#0
    refused = _create_until_throttled(table, open_shards=1, count=30)

    # Then that one key's 1,000 WCU in a second throttles the creates past it (40 units each on
    # the open index; on GSI4 they spread over 16 keys), naming the open index
    assert refused == [f"s{n}" for n in range(25, 30)]
    assert _row(table, "s25") is None, "a throttled create wrote nothing"
    # And the next second the resend lands, stamped
    table.time.advance(1.0)
    writer = SagaWriter(table.client_for("writers", faulty=False), TABLE, plan=plan(1), retry=ONCE)
    writer.create_saga(saga_id="s25", person_id="p-25", lease_id="l-25", opened_at=OPENED_AT)
    assert (_row(table, "s25") or {})[OPEN_KEY] == {"S": "RenewalSagaOpen#0"}


def test_the_same_writes_spread_over_sixteen_open_index_keys_pass(table: SimTable) -> None:
    assert _create_until_throttled(table, open_shards=N, count=30) == []
