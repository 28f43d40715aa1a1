"""A moto world for the sweep handlers: the saga table (from the synthesised template), an
EventBridge bus with a rule that forwards every saga event to an SQS queue (so tests read back
what was really published), the handlers' environment, and EMF parsing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from saga_index.sweeps.events import SOURCE, make_events_client
from tests.support.backends import Backend, make_backend

# Logger, Tracer and Metrics read these when the handler module is imported: set them for that
# import only, so the rest of the session sees its own environment. Test modules therefore
# import the handler module from here (`handlers`), never directly.
_IMPORT_ENV = {
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "RenewalSagaIndex",
    "POWERTOOLS_SERVICE_NAME": "renewal-saga-sweep",
}
_saved = {name: os.environ.get(name) for name in _IMPORT_ENV}
os.environ.update(_IMPORT_ENV)
try:
    from handlers import sweeps as handlers
finally:
    for _name, _value in _saved.items():
        if _value is None:
            os.environ.pop(_name, None)
        else:
            os.environ[_name] = _value

BUS = "renewal-saga-sweeps-test"
SHARDS = 16


@dataclass
class FakeLambdaContext:
    function_name: str = "sweep"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:sweep"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"


@dataclass
class SweepWorld:
    backend: Backend
    events_client: Any
    sqs: Any
    queue_url: str
    env: dict[str, str]
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
        from saga_index.dynamo import deserialize

        raw = self.backend.get(f"RSAGA#{saga_id}", "META")
        assert raw is not None, f"saga {saga_id} is gone"
        return deserialize(raw)


@pytest.fixture
def world(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[SweepWorld]:
    with mock_aws():
        backend = make_backend("sweeps", synthesized_template, endpoint_url=None)
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
            "SAGA_INDEX_PHASE": "migrating",
            "SAGA_INDEX_SHARDS": str(SHARDS),
            "EVENT_BUS_NAME": BUS,
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        handlers.use_clients(dynamodb=backend.client, events=events_client)
        try:
            yield SweepWorld(backend, events_client, sqs, queue_url, env)
        finally:
            handlers.use_clients()


def payload(job: str, scheduled: datetime | None, attempt: int = 1) -> dict[str, Any]:
    """What Scheduler sends (attempt arrives as a string: the template quotes it)."""
    body: dict[str, Any] = {
        "job": job,
        "executionId": f"exec-{job}-{attempt}",
        "attempt": str(attempt),
    }
    if scheduled is not None:
        body["scheduledTime"] = scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return body


def emf_documents(stdout: str) -> list[dict[str, Any]]:
    docs = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict) and "_aws" in doc:
            docs.append(doc)
    return docs


def metric(docs: list[dict[str, Any]], name: str, **dimensions: str) -> list[Any]:
    """Values of the metric `name` in EMF documents carrying all the given dimension values."""
    values = []
    for doc in docs:
        declared = {
            m["Name"]: m.get("Unit")
            for directive in doc["_aws"]["CloudWatchMetrics"]
            for m in directive["Metrics"]
        }
        if name in declared and all(doc.get(k) == v for k, v in dimensions.items()):
            value = doc[name]
            values.extend(value if isinstance(value, list) else [value])
    return values


def metric_unit(docs: list[dict[str, Any]], name: str) -> str | None:
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for m in directive["Metrics"]:
                if m["Name"] == name:
                    return str(m.get("Unit"))
    return None


def dimension_sets(docs: list[dict[str, Any]], name: str) -> list[list[str]]:
    return [
        dims
        for doc in docs
        for directive in doc["_aws"]["CloudWatchMetrics"]
        if any(m["Name"] == name for m in directive["Metrics"])
        for dims in directive["Dimensions"]
    ]
