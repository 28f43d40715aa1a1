"""Lost answers: a request that LANDS and whose answer never comes back, then its resends
throttled. What a timeout or a dropped connection does after DynamoDB applied a write, and what
no local engine does by itself.

    lost = LostAnswers(lose=matches("UpdateItem", state_key_body), throttle_resends=None)
    client = lost.attach(make_client(...))

The layer sits in FRONT of the engine, per attempt (botocore's `before-send`, below its retry
handler), so botocore's own retry mode sees what it would see on AWS:

  lose      a matching request is delivered to the engine (it is applied), then its answer is
            replaced by a botocore ReadTimeoutError (or ConnectionClosedError): botocore
            resends the same request, as it does after any connection error
  throttle  the resends of a lost request (the same body, from botocore's retries or from the
            caller's own) are answered ThrottlingException without reaching the engine, up to
            `throttle_resends` of them (None: every one)

The engine behind it is whatever the client talks to: in-process moto (`mock_aws`; its stubber
is taken off the client and called from here, so a throttled resend never reaches it) or a real
endpoint (dynalite, moto's server), reached through the client's own HTTP session.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

from devkit.semantics.model import Refusal
from devkit.semantics.wire import wire_body

# A request as the layer judges it: its operation name and its JSON body.
RequestMatch = Callable[[str, Mapping[str, Any]], bool]

THROTTLE = Refusal(
    "ThrottlingException", "Throughput exceeds the current capacity of your table or index."
)


def matches(
    operation: str, body: Callable[[Mapping[str, Any]], bool] = lambda _b: True
) -> RequestMatch:
    """Requests of `operation` whose JSON body `body` accepts."""

    def match(name: str, request: Mapping[str, Any]) -> bool:
        return name == operation and body(request)

    return match


def keyed(pk: str, sk: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """A single-item request on the item of key (`pk`, `sk`) (any sort key when None)."""

    def match(request: Mapping[str, Any]) -> bool:
        key = request.get("Key") or request.get("Item") or {}
        if key.get("PK") != {"S": pk}:
            return False
        return sk is None or key.get("SK") == {"S": sk}

    return match


class _RawBody:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


@dataclass
class LostStats:
    """What the layer did: requests delivered and answered, delivered with the answer lost,
    and resends refused."""

    delivered: int = 0
    lost: int = 0
    throttled: int = 0
    lost_operations: list[str] = field(default_factory=list)


class LostAnswers:
    """Lose the answers of the first `times` requests `lose` matches (None: every match), and
    throttle up to `throttle_resends` resends of each (None: all of them). `dropped`: a
    dropped connection (ConnectionClosedError) instead of a read timeout."""

    def __init__(
        self,
        *,
        lose: RequestMatch,
        times: int | None = 1,
        throttle_resends: int | None = None,
        dropped: bool = False,
    ) -> None:
        self.lose = lose
        self.remaining = times
        self.throttle_resends = throttle_resends
        self.dropped = dropped
        self.stats = LostStats()
        # The bodies of lost requests, and how many of their resends may still be throttled.
        self._resends: dict[bytes, int | None] = {}
        self._lock = threading.Lock()

    def attach(self, client: Any) -> Any:
        """Put `client`'s requests behind the layer; returns the client."""
        stubber = _take_moto_stubber(client)

        def before_send(request: Any, **kwargs: Any) -> AWSResponse | None:
            operation = _operation(request, kwargs)
            body = bytes(request.body or b"")
            answer = self._throttled(body)
            if answer is not None:
                return answer
            response = stubber(event_name="before-send", request=request) if stubber else None
            if response is None:
                response = client._endpoint.http_session.send(request)
            if self._loses(operation, body):
                error = ConnectionClosedError if self.dropped else ReadTimeoutError
                raise error(endpoint_url=request.url, request=request)
            with self._lock:
                self.stats.delivered += 1
            return response

        client.meta.events.register("before-send.dynamodb", before_send)
        return client

    def _throttled(self, body: bytes) -> AWSResponse | None:
        with self._lock:
            if body not in self._resends:
                return None
            left = self._resends[body]
            if left is not None:
                if left <= 0:
                    return None
                self._resends[body] = left - 1
            self.stats.throttled += 1
        return AWSResponse(
            "https://dynamodb.lost",
            THROTTLE.status,
            {"x-amzn-ErrorType": THROTTLE.code, "Content-Type": "application/x-amz-json-1.0"},
            _RawBody(wire_body(THROTTLE)),
        )

    def _loses(self, operation: str, body: bytes) -> bool:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return False
        if not self.lose(operation, request):
            return False
        with self._lock:
            if self.remaining is not None:
                if self.remaining <= 0:
                    return False
                self.remaining -= 1
            self.stats.lost += 1
            self.stats.lost_operations.append(operation)
            self._resends[body] = self.throttle_resends
        return True


def _operation(request: Any, kwargs: Mapping[str, Any]) -> str:
    target = request.headers.get("X-Amz-Target", b"")
    text = target.decode() if isinstance(target, bytes) else str(target)
    return text.rsplit(".", 1)[-1] or str(kwargs.get("event_name", "")).rsplit(".", 1)[-1]


def _take_moto_stubber(client: Any) -> Callable[..., AWSResponse | None] | None:
    """In-process moto answers from a `before-send` handler of its own, which would run even
    after this layer answered: taken off the client and called from the layer instead."""
    try:
        from moto.core.models import botocore_stubber
    except ImportError:
        return None
    if not botocore_stubber.enabled:
        return None
    client.meta.events.unregister("before-send", botocore_stubber)
    stub: Callable[..., AWSResponse | None] = botocore_stubber
    return stub
