"""DynamoDB client plumbing shared by every adapter.

Retries are botocore's (standard or adaptive retry mode), never hand-written loops. This module
only adds what botocore does not: it recognises both throttle error codes, counts them, and logs
DynamoDB's ThrottlingReasons so on-call can tell a hot key from a table-level limit.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

# On-demand tables throttle with ThrottlingException, provisioned ones with
# ProvisionedThroughputExceededException: the same event for our purposes.
THROTTLE_CODES = frozenset({"ThrottlingException", "ProvisionedThroughputExceededException"})


def retry_config(max_attempts: int = 10, mode: str = "standard") -> Config:
    """botocore retry policy: exponential backoff with jitter, throttles included.

    max_attempts counts every attempt, the first included (botocore's total_max_attempts; its
    legacy `max_attempts` key would count retries only, one more request than asked for).
    """
    return Config(retries={"total_max_attempts": max_attempts, "mode": mode})


class ThrottleCounter:
    """Counts throttled attempts seen by a client (thread-safe); read by metrics and tests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.reasons: dict[str, int] = {}
        # Each thread's own throttled attempts since it last took them: botocore emits
        # needs-retry in the thread that sent the request, so a caller learns the reasons of
        # its own requests (a local run's segments share one client).
        self._mine = threading.local()

    def record(self, operation: str, code: str, reasons: list[Mapping[str, Any]]) -> None:
        names = [str(reason.get("reason", "unknown")) for reason in reasons]
        with self._lock:
            self.count += 1
            for name in names:
                self.reasons[name] = self.reasons.get(name, 0) + 1
        mine: list[list[str]] | None = getattr(self._mine, "attempts", None)
        if mine is None:
            mine = self._mine.attempts = []
        mine.append(names)
        log.warning(
            "dynamodb throttled: %s %s %s",
            operation,
            code,
            [dict(r) for r in reasons],
            extra={
                "operation": operation,
                "errorCode": code,
                "throttlingReasons": [dict(r) for r in reasons],
            },
        )

    def take_mine(self) -> list[list[str]]:
        """The ThrottlingReasons of each throttled attempt this thread made since it last
        took them (an attempt with none listed: an empty list), oldest first."""
        mine: list[list[str]] = getattr(self._mine, "attempts", None) or []
        self._mine.attempts = []
        return mine


_observed: weakref.WeakKeyDictionary[Any, ThrottleCounter] = weakref.WeakKeyDictionary()


def attach_throttle_observer(client: DynamoDBClient) -> ThrottleCounter:
    """Observe every throttled attempt of `client` (before botocore decides to retry it).

    Idempotent: a client has at most one observer, and this returns its counter.
    """
    existing = _observed.get(client)
    if existing is not None:
        return existing
    counter = ThrottleCounter()
    _observed[client] = counter

    def observe(response: Any = None, operation: Any = None, **_: Any) -> None:
        if not response or len(response) < 2 or not isinstance(response[1], Mapping):
            return
        error = response[1].get("Error") or {}
        code = error.get("Code")
        if code in THROTTLE_CODES:
            # The service model spells it throttlingReasons on ThrottlingException and
            # ThrottlingReasons on ProvisionedThroughputExceededException.
            parsed = response[1]
            reasons = parsed.get("ThrottlingReasons") or parsed.get("throttlingReasons") or []
            counter.record(getattr(operation, "name", "?"), str(code), list(reasons))

    # register_first: the retry handler answers needs-retry and stops the chain; observe first.
    client.meta.events.register_first("needs-retry.dynamodb", observe)
    return counter


def make_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    max_attempts: int = 10,
    retry_mode: str = "standard",
    max_pool_connections: int = 32,
    connect_timeout: float = 5.0,
    read_timeout: float = 30.0,
) -> DynamoDBClient:
    """A low-level DynamoDB client (thread-safe, unlike boto3 resources) with botocore retries
    and the throttle observer attached (its counter: attach_throttle_observer(client)).

    endpoint_url None lets boto3 honour AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_DYNAMODB itself.
    """
    # botocore's default 60 s read timeout could outlast a Lambda's safety margin; a timed-out
    # attempt is retried by the retry mode like any other transient error.
    config = retry_config(max_attempts, retry_mode).merge(
        Config(
            max_pool_connections=max_pool_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )
    )
    client: DynamoDBClient = boto3.client(
        "dynamodb", region_name=region, endpoint_url=endpoint_url, config=config
    )
    attach_throttle_observer(client)
    return client


def is_throttle(err: BaseException) -> bool:
    response = getattr(err, "response", None)
    return isinstance(response, Mapping) and response.get("Error", {}).get("Code") in THROTTLE_CODES


def error_code(err: BaseException) -> str | None:
    response = getattr(err, "response", None)
    if isinstance(response, Mapping):
        code = response.get("Error", {}).get("Code")
        return str(code) if code is not None else None
    return None
