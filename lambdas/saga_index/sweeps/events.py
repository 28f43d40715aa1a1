"""Saga events on an EventBridge bus: batches of at most 10, failed entries retried, loud failure.

PutEvents can succeed as a call while failing some of its entries (FailedEntryCount > 0, an
ErrorCode on the entry). Those entries are re-sent, up to `max_attempts` sends in all; whatever
still fails is raised as EventPublishError naming each saga and error, after every other batch
has been sent, so one bad entry never holds back the rest and never passes silently.

A failed event is REFUSED only when every send of it was answered with an ErrorCode on its
entry: then the bus does not have it. A call that raised (a read timeout, a connection reset or
closed, an endpoint that could not be reached, or a ClientError: botocore retries transport
failures before it gives up, so even an error answer may follow a send whose request arrived)
gave no answer for its entries, and the bus may have accepted them; such an event is UNANSWERED,
and whoever published it must treat it as possibly delivered.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import SagaIndexError
from saga_index.store.dynamo import error_code, retry_config, to_plain_json
from saga_index.sweeps.findings import Finding

log = logging.getLogger(__name__)

SOURCE = "propflow.renewal-saga"
# PutEvents accepts at most 10 entries per call.
MAX_ENTRIES_PER_CALL = 10
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF_SECONDS = 0.2


@dataclass(frozen=True)
class SagaEvent:
    detail_type: str
    detail: Mapping[str, Any]
    time: datetime | None = None

    @property
    def saga_id(self) -> str:
        return str(self.detail.get("sagaId"))


def event_for(finding: Finding, *, scheduled_time: str, time: datetime | None = None) -> SagaEvent:
    """The event of a finding: detail-type = the finding kind; the detail names the saga."""
    saga = finding.saga
    detail: dict[str, Any] = {
        **finding.details,
        "sagaId": saga.saga_id,
        "personId": saga.person_id,
        "leaseId": saga.lease_id,
        "state": saga.state,
        "reason": finding.reason,
        # Consumers de-duplicate on (sagaId, detail-type, scheduledTime): Scheduler delivers
        # at least once, and the health and stuck sweeps report a saga on every run.
        "scheduledTime": scheduled_time,
    }
    return SagaEvent(detail_type=str(finding.kind), detail=to_plain_json(detail), time=time)


@dataclass(frozen=True)
class FailedEvent:
    event: SagaEvent
    error_code: str
    error_message: str
    # True: every send was answered with an ErrorCode on this entry, so the bus does not have
    # it. False: at least one send got no answer (the call raised); the bus may have it.
    answered: bool = True

    @property
    def verdict(self) -> str:
        return "refused by the bus" if self.answered else "no answer: the bus may have it"


class EventPublishError(SagaIndexError):
    """Some events could not be published after retries; every other event was sent."""

    def __init__(self, failed: Sequence[FailedEvent], published: int) -> None:
        self.failed = list(failed)
        self.published = published
        detail = "; ".join(
            f"{f.event.detail_type} for saga {f.event.saga_id}: {f.error_code}: "
            f"{f.error_message} ({f.verdict})"
            for f in self.failed
        )
        super().__init__(
            f"{len(self.failed)} event(s) could not be published to EventBridge after retries "
            f"({published} were): {detail}"
        )

    @property
    def refused(self) -> list[FailedEvent]:
        """The events the bus answered as failed on every send: it does not have them."""
        return [f for f in self.failed if f.answered]

    @property
    def unanswered(self) -> list[FailedEvent]:
        """The events some send of which got no answer: the bus may have them."""
        return [f for f in self.failed if not f.answered]


def make_events_client(*, region: str | None = None, max_attempts: int = 5) -> Any:
    """An EventBridge client with botocore's standard retries (throttles included)."""
    return boto3.client("events", region_name=region, config=retry_config(max_attempts))


class EventPublisher:
    """Publishes SagaEvents to one bus. The client is injected."""

    def __init__(
        self,
        client: Any,
        bus_name: str,
        *,
        source: str = SOURCE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff_seconds: float = DEFAULT_BACKOFF_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not bus_name:
            raise ValueError("bus_name is required")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.client = client
        self.bus_name = bus_name
        self.source = source
        self.max_attempts = max_attempts
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep

    def publish(self, events: Sequence[SagaEvent]) -> int:
        """Send every event; return how many were sent, or raise EventPublishError."""
        failed: list[FailedEvent] = []
        published = 0
        for start in range(0, len(events), MAX_ENTRIES_PER_CALL):
            batch = list(events[start : start + MAX_ENTRIES_PER_CALL])
            sent, batch_failed = self._publish_batch(batch)
            published += sent
            failed.extend(batch_failed)
        if failed:
            raise EventPublishError(failed, published)
        return published

    def _entry(self, event: SagaEvent) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "Source": self.source,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail, sort_keys=True, ensure_ascii=False),
            "EventBusName": self.bus_name,
        }
        if event.time is not None:
            entry["Time"] = event.time
        return entry

    def _publish_batch(self, batch: list[SagaEvent]) -> tuple[int, list[FailedEvent]]:
        pending = batch
        sent = 0
        failures: list[FailedEvent] = []
        # Events a send of which raised instead of answering: once unanswered, an event that
        # fails later is still not known to be refused (that first send may have arrived).
        unanswered: set[int] = set()
        for attempt in range(1, self.max_attempts + 1):
            if attempt > 1:
                self.sleep(self.backoff_seconds * 2 ** (attempt - 2))
            failures = []
            try:
                response = self.client.put_events(Entries=[self._entry(e) for e in pending])
            except (ClientError, BotoCoreError) as err:
                # botocore has already retried the call itself; count it as every entry failing,
                # with no answer for any of them.
                code = error_code(err) or type(err).__name__
                unanswered.update(id(e) for e in pending)
                failures = [FailedEvent(e, code, str(err), answered=False) for e in pending]
            else:
                results = response.get("Entries", [])
                if len(results) != len(pending):
                    # Entries are matched to results by position; without that, nothing is known,
                    # not even which entries the bus took.
                    unanswered.update(id(e) for e in pending)
                    results = [
                        {
                            "ErrorCode": "UnexpectedResponse",
                            "ErrorMessage": f"PutEvents answered {len(results)} entries "
                            f"for {len(pending)} sent",
                        }
                    ] * len(pending)
                for event, result in zip(pending, results, strict=True):
                    if result.get("ErrorCode"):
                        failures.append(
                            FailedEvent(
                                event,
                                str(result["ErrorCode"]),
                                str(result.get("ErrorMessage", "")),
                                answered=id(event) not in unanswered,
                            )
                        )
                    else:
                        sent += 1
            if not failures:
                return sent, []
            log.warning(
                "EventBridge entries failed",
                extra={
                    "attempt": attempt,
                    "maxAttempts": self.max_attempts,
                    "failed": [
                        {
                            "sagaId": f.event.saga_id,
                            "errorCode": f.error_code,
                            "answered": f.answered,
                        }
                        for f in failures
                    ],
                },
            )
            pending = [f.event for f in failures]
        return sent, failures
