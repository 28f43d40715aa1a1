"""Running a handler in the test process: a fake Lambda context, the Powertools metrics set up as
the function's own, and the EMF documents it prints parsed back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from handlers import runtime
from saga_index.index import names
from saga_index.layout_change.record.provider import ControlProvider

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass
class FakeLambdaContext:
    """The attributes Powertools and the handlers read from Lambda's context object. Each call
    of get_remaining_time_in_millis first spends `step_ms` (a clock that moves per check)."""

    function_name: str = "function"
    remaining_ms: int = 300_000
    step_ms: int = 0
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        self.remaining_ms -= self.step_ms
        return self.remaining_ms


@contextmanager
def as_function(
    monkeypatch: pytest.MonkeyPatch,
    service: str | None,
    *,
    dynamodb: Any = None,
    events: Any = None,
    control: ControlProvider | None = None,
) -> Iterator[None]:
    """The handlers' runtime set up as one function's execution environment, for the block.

    In Lambda, Powertools reads the service and namespace from the environment once, when the
    runtime is imported; a test session imports it once for every function, so each test names
    its function's service here. The cached clients become `dynamodb`/`events` (None: made on
    first use, inside the test's moto world) and are dropped when the block ends; so is the
    control-record provider (`control`: one with an injected clock; None: made on first use).
    """
    monkeypatch.setattr(runtime.metrics, "service", service)
    monkeypatch.setattr(runtime.metrics, "namespace", names.METRICS_NAMESPACE)
    runtime.clients.use(dynamodb=dynamodb, events=events)
    runtime.control.use(control)
    try:
        yield
    finally:
        runtime.clients.use()
        runtime.control.use()


# ---- EMF (CloudWatch embedded metric format) documents ---------------------------------------


def emf_documents(output: str | Iterable[str]) -> list[dict[str, Any]]:
    """Every EMF document among the lines printed (stdout text, or its lines)."""
    lines = output.splitlines() if isinstance(output, str) else output
    documents = []
    for line in lines:
        try:
            document = json.loads(line.strip())
        except ValueError:
            continue
        if isinstance(document, dict) and "_aws" in document:
            documents.append(document)
    return documents


def metric(docs: list[dict[str, Any]], name: str, **dimensions: str) -> list[Any]:
    """Values of the metric `name` in EMF documents carrying all the given dimension values."""
    values = []
    for doc in docs:
        declared = {m["Name"] for d in doc["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}
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


@dataclass(frozen=True)
class Datapoint:
    namespace: str
    name: str
    values: tuple[float, ...]
    unit: str
    dimensions: dict[str, str]

    @property
    def value(self) -> float:
        """The one value of this run (EMF allows a list; each is published once per run)."""
        (only,) = self.values
        return only


def emf_datapoints(output: str | Iterable[str]) -> list[Datapoint]:
    """Every metric datapoint of the EMF documents printed (each with one dimension set)."""
    points: list[Datapoint] = []
    for document in emf_documents(output):
        for directive in document["_aws"]["CloudWatchMetrics"]:
            (dimension_names,) = directive["Dimensions"]
            dimensions = {name: document[name] for name in dimension_names}
            for m in directive["Metrics"]:
                raw = document[m["Name"]]
                points.append(
                    Datapoint(
                        namespace=directive["Namespace"],
                        name=m["Name"],
                        values=tuple(raw) if isinstance(raw, list) else (raw,),
                        unit=m["Unit"],
                        dimensions=dimensions,
                    )
                )
    return points
