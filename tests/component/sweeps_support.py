"""A moto world for the sweep handlers: the saga table (from the synthesised template), an
EventBridge bus with a rule that forwards every saga event to an SQS queue (so tests read back
what was really published), the control record (migrating to 16 shards: the sweeps read legacy
then the shards), and the handlers' environment and clients."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from handlers import sweep_jobs
from saga_index.index.layout import LEGACY, Layout
from saga_index.sweeps.events import SOURCE, EventPublisher, make_events_client
from tests.support.backends import Backend, make_backend
from tests.support.control_seed import seed_state
from tests.support.lambda_harness import as_function

BUS = "renewal-saga-sweeps-test"
# One service for the four sweeps: the tests read metrics by name and dimension, not by service.
SERVICE = "renewal-saga-sweep"
SHARDS = 16


@dataclass
class InvocationClock:
    """The clock the sweep handlers read (sweep_jobs._invocation_time). Scheduler invokes on
    time, so by default it reads the scheduled time of the last payload built, plus `late`;
    `at` pins it; with neither it is the real clock."""

    scheduled: datetime | None = None
    late: timedelta = timedelta(seconds=1)
    at: datetime | None = None

    def now(self) -> datetime:
        if self.at is not None:
            return self.at
        if self.scheduled is None:
            return datetime.now(UTC)
        return self.scheduled + self.late


# One per session, reset by each `world`: `payload()` records what it schedules here.
CLOCK = InvocationClock()


@dataclass
class SweepWorld:
    backend: Backend
    events_client: Any
    sqs: Any
    queue_url: str
    env: dict[str, str]
    clock: InvocationClock
    received: list[dict[str, Any]] = field(default_factory=list)

    def drain(self) -> list[dict[str, Any]]:
        """Every event delivered to the queue so far (accumulated across calls)."""
        while True:
            page = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10)
            messages = page.get("Messages", [])
            if not messages:
                return list(self.received)
            for message in messages:
                self.received.append(json.loads(message["Body"]))
                self.sqs.delete_message(
                    QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                )

    def events_of(self, detail_type: str) -> list[dict[str, Any]]:
        return [e for e in self.drain() if e["detail-type"] == detail_type]

    def saga(self, saga_id: str) -> dict[str, Any]:
        from saga_index.store.dynamo.codec import deserialize

        raw = self.backend.get(f"RSAGA#{saga_id}", "META")
        assert raw is not None, f"saga {saga_id} is gone"
        return deserialize(raw)


@pytest.fixture
def world(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[SweepWorld]:
    with mock_aws():
        backend = make_backend("sweeps", synthesized_template, endpoint_url=None)
        seed_state(backend.client, backend.table_name, LEGACY, Layout.sharded(SHARDS))
        events_client = make_events_client(region="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        events_client.create_event_bus(Name=BUS)
        queue_url = sqs.create_queue(QueueName="saga-events")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        events_client.put_rule(
            Name="all-saga-events",
            EventBusName=BUS,
            EventPattern=json.dumps({"source": [SOURCE]}),
        )
        events_client.put_targets(
            Rule="all-saga-events", EventBusName=BUS, Targets=[{"Id": "queue", "Arn": queue_arn}]
        )
        env = {
            "SAGA_TABLE_NAME": backend.table_name,
            "EVENT_BUS_NAME": BUS,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        CLOCK.scheduled, CLOCK.late, CLOCK.at = None, timedelta(seconds=1), None
        monkeypatch.setattr(sweep_jobs, "_invocation_time", CLOCK.now)
        # The publisher's back-off between its attempts passes at once: the tests count the
        # attempts and what the bus holds, not the seconds between them.
        monkeypatch.setattr(
            sweep_jobs, "EventPublisher", functools.partial(EventPublisher, sleep=lambda _s: None)
        )
        with as_function(monkeypatch, SERVICE, dynamodb=backend.client, events=events_client):
            yield SweepWorld(backend, events_client, sqs, queue_url, env, CLOCK)


def payload(job: str, scheduled: datetime | None, attempt: int = 1) -> dict[str, Any]:
    """What Scheduler sends (attempt arrives as a string: the template quotes it). The invocation
    clock follows: Scheduler sends it at the scheduled time."""
    body: dict[str, Any] = {
        "job": job,
        "executionId": f"exec-{job}-{attempt}",
        "attempt": str(attempt),
    }
    if scheduled is not None:
        CLOCK.scheduled = scheduled
        body["scheduledTime"] = scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return body
