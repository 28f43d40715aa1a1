"""The backfill paces itself on DynamoDB's signals, on moto under the semantics layer
(devkit.semantics.hooks): a per-key write ceiling on the legacy GSI key, application traffic
writing on that key, and the backfill re-stamping rows off it. The paced run leaves the traffic
its share and uses most of what is left.

In virtual time (as bench.pacing): one timeline moved only by the token bucket's sleeps, on
which the model judges every second's budget and the traffic sends each write when it is due.
The segments run one after the other on one thread (the pacer still paces two segments), so a
run is the same run on any machine under any load and the bounds are exact. The ceiling and
rates are scaled down (a few writes/s: every write is still a moto request) and so are the
pacer's timings (PaceRules): the rules are the production ones, at a faster clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devkit.capacity.table_schema import TableSchema
from devkit.semantics.hooks import SemanticsHooks
from devkit.semantics.model import DynamoSemantics
from saga_index.index import keys
from saga_index.layout_change.backfill import TokenBucket, run_backfill
from saga_index.layout_change.backfill.pace_curve import (
    PACED_START_FRACTION,
    PACED_START_SECONDS,
    PaceRules,
)
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import request, ticket

CEILING = 5.0  # WCU/s on one key (DynamoDB's is 1,000)
TRAFFIC = 2.5  # the application's writes/s on the legacy key
BUDGET = CEILING - TRAFFIC  # what the traffic leaves the backfill
ROWS = 30
# Vitess' timings (40 s / 20 s / 180 s / 60 s) divided by 20, and the run's rise from its
# start too.
FAST_RULES = PaceRules(
    increase_interval=2.0,
    decrease_interval=1.0,
    bad_rate_seconds=9.0,
    pause_seconds=3.0,
    start_fraction=PACED_START_FRACTION,
    start_seconds=PACED_START_SECONDS / 20,
)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("backfill-pacing", synthesized_template, endpoint_url=None)


class Traffic:
    """New sagas on the legacy key at a steady rate, through the same model, counted: the n-th
    is sent at n / rate seconds of the virtual time."""

    def __init__(self, client: Any, table_name: str, rate: float) -> None:
        self.client = client
        self.table_name = table_name
        self.rate = rate
        self.sent = 0
        self.answers: list[tuple[float, bool]] = []  # (when, throttled)

    @property
    def due(self) -> float:
        return self.sent / self.rate

    def send(self, now: float) -> None:
        self.sent += 1
        saga = f"traffic-{self.sent}"
        item = {
            **keys.saga_table_key(saga),
            "entityType": keys.ENTITY_TYPE,
            "sagaId": saga,
            "personId": f"p-{self.sent}",
            "GSI4PK": keys.LEGACY_GSI4PK,
            "GSI4SK": f"p-{self.sent}#2026-01-01T00:00:00.000Z",
        }
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item={name: {"S": value} for name, value in item.items()},
            )
        except ClientError as err:
            if err.response["Error"]["Code"] != "ThrottlingException":
                raise
            self.answers.append((now, True))
        else:
            self.answers.append((now, False))

    def throttled_share(self, since: float) -> tuple[float, int]:
        answers = [throttled for when, throttled in self.answers if when >= since]
        return sum(answers) / max(1, len(answers)), len(answers)


class VirtualTime:
    """The one clock of the model, the bucket and the traffic: sleep() moves it, sending on the
    way every traffic write that falls due, at its time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.traffic: Traffic | None = None

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        until = self.now + seconds
        while self.traffic is not None and self.traffic.due <= until:
            self.now = max(self.now, self.traffic.due)
            self.traffic.send(self.now)
        self.now = until


def test_given_traffic_on_the_hot_key_then_the_paced_run_uses_most_of_the_budget_it_leaves(
    dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    # Given legacy rows to move, a per-key write ceiling, and traffic writing on the legacy key
    for n in range(ROWS):
        dynamo.put_saga(f"r{n:03}", f"person-{n}")
    clock = VirtualTime()
    model = DynamoSemantics(dynamo.table_name, clock=clock, wcu_ceiling=CEILING)
    schema = TableSchema.from_template(synthesized_template, dynamo.table_name)

    def hooked() -> Any:
        return SemanticsHooks(model, schema, reader=dynamo.new_client()).attach(
            dynamo.new_client(max_attempts=1)
        )

    traffic = clock.traffic = Traffic(hooked(), dynamo.table_name, TRAFFIC)
    # and a backfill capped at the whole ceiling (the operator's cap is not the budget)
    bucket = TokenBucket(CEILING, clock=clock, sleep=clock.sleep, rules=FAST_RULES, segments=2)
    clock.sleep(1.0)  # the traffic's load is there before the run starts
    started = clock()
    run = run_backfill(
        hooked(),
        dynamo.table_name,
        request(segments=2, rate=CEILING),
        run=ticket(),
        bucket=bucket,
        # One thread: the virtual time has one sleeper, and the run is the same every time.
        max_concurrency=1,
    )
    seconds = clock() - started

    # Then every row moved (no segment gave up), the pace came down from the cap on
    # DynamoDB's key-range reason
    assert run.complete, run.failures
    moved = sum(r.restamped for r in run.results)
    assert moved >= ROWS  # and the traffic's new sagas the Scan reached
    assert model.stats.throttles["IndexWriteKeyRangeThroughputExceeded"] >= 1
    assert bucket.decreases >= 1
    # and the run used most of the budget the traffic left (78 % in this run)
    used = moved / seconds / BUDGET
    assert used >= 0.7, f"{moved} rows in {seconds:.1f} s: {used:.0%} of {BUDGET:g}/s"
    # while, once the pace settled (the run's second half), the traffic was rarely throttled
    share, answered = traffic.throttled_share(since=started + seconds / 2)
    assert answered >= 5
    # A fixed-cap run throttles about a third of them (bench.pacing).
    assert share <= 0.1, (share, answered, traffic.answers)
