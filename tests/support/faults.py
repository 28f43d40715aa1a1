"""Fault injection on a botocore client: throttles returned before the request leaves.

botocore's retry handler sees them exactly as it would see DynamoDB's, so the code under test
exercises its real retry configuration.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.retries.standard import ExponentialBackoff


class _RawBody:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def throttle_response(
    code: str = "ThrottlingException", reasons: list[dict[str, str]] | None = None
) -> AWSResponse:
    body: dict[str, Any] = {
        "__type": f"com.amazonaws.dynamodb.v20120810#{code}",
        "message": "Throughput exceeds the current capacity of your table or index.",
    }
    if reasons:
        # DynamoDB's model: throttlingReasons on ThrottlingException, ThrottlingReasons on PTEE.
        member = "throttlingReasons" if code == "ThrottlingException" else "ThrottlingReasons"
        body[member] = reasons
    return AWSResponse(
        "https://dynamodb.local/",
        400,
        {"x-amzn-ErrorType": code, "Content-Type": "application/x-amz-json-1.0"},
        _RawBody(json.dumps(body).encode()),
    )


class ThrottleInjector:
    """Throttle the first `times` matching calls (times=None: every matching call)."""

    def __init__(
        self,
        client: Any,
        operation: str,
        *,
        times: int | None,
        match: Callable[[dict[str, Any]], bool] = lambda _body: True,
        code: str = "ThrottlingException",
        reasons: list[dict[str, str]] | None = None,
    ) -> None:
        self.operation = operation
        self.remaining = times
        self.match = match
        self.code = code
        self.reasons = reasons
        self.injected = 0
        self._lock = threading.Lock()
        client.meta.events.register(f"before-send.dynamodb.{operation}", self._handler)

    def _handler(self, request: Any, **_: Any) -> AWSResponse | None:
        body = json.loads(request.body or b"{}")
        if not self.match(body):
            return None
        with self._lock:
            if self.remaining is not None:
                if self.remaining <= 0:
                    return None
                self.remaining -= 1
            self.injected += 1
        return throttle_response(self.code, self.reasons)


def queries_partition(gsi4pk: str) -> Callable[[dict[str, Any]], bool]:
    def match(body: dict[str, Any]) -> bool:
        values = body.get("ExpressionAttributeValues", {})
        return values.get(":pk") == {"S": gsi4pk}

    return match


def instant_botocore_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's standard mode waits a random back-off (up to a second at the first retry,
    doubling) between a request's attempts: a test that throttles on purpose proves what the
    attempts do, not how long botocore waits between them. The attempts are still botocore's."""
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda _self, _context: 0.0)
