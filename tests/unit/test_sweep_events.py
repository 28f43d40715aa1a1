"""The EventBridge publisher against a fake client: batches of 10, retries, loud failure, and
which failures the bus answered (refused) and which got no answer (the bus may have them)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

from saga_index.sweeps.events import (
    MAX_ENTRIES_PER_CALL,
    SOURCE,
    EventPublisher,
    EventPublishError,
    SagaEvent,
    event_for,
)
from saga_index.sweeps.findings import Finding, FindingKind, SagaRef


class FakeEvents:
    """Records every PutEvents call; `fail` decides per entry (by sagaId and call number)."""

    def __init__(self, fail: Callable[[str, int], dict[str, Any] | None] | None = None) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.fail = fail or (lambda _saga, _call: None)
        self.raise_on_call: dict[int, Exception] = {}

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(Entries)
        call = len(self.calls)
        if call in self.raise_on_call:
            raise self.raise_on_call[call]
        results = []
        for entry in Entries:
            saga_id = json.loads(entry["Detail"])["sagaId"]
            error = self.fail(saga_id, call)
            results.append(error or {"EventId": f"id-{saga_id}-{call}"})
        return {"FailedEntryCount": sum(1 for r in results if "ErrorCode" in r), "Entries": results}

    def sent(self) -> list[str]:
        return [json.loads(e["Detail"])["sagaId"] for call in self.calls for e in call]


def events(n: int) -> list[SagaEvent]:
    return [
        SagaEvent(detail_type="SagaStuck", detail={"sagaId": f"s{i:02d}", "reason": "r"})
        for i in range(n)
    ]


def publisher(client: FakeEvents, **kwargs: Any) -> tuple[EventPublisher, list[float]]:
    sleeps: list[float] = []
    return EventPublisher(client, "bus", sleep=sleeps.append, **kwargs), sleeps


THROTTLED = {"ErrorCode": "ThrottlingException", "ErrorMessage": "Rate exceeded"}


def test_given_25_events_when_published_then_they_go_in_batches_of_at_most_10() -> None:
    client = FakeEvents()
    pub, _ = publisher(client)

    assert pub.publish(events(25)) == 25

    assert [len(call) for call in client.calls] == [10, 10, 5]
    assert max(len(call) for call in client.calls) <= MAX_ENTRIES_PER_CALL
    assert client.sent() == [f"s{i:02d}" for i in range(25)]


def test_given_an_entry_the_bus_rejects_once_when_published_then_only_it_is_resent() -> None:
    client = FakeEvents(fail=lambda saga, call: THROTTLED if saga == "s03" and call == 1 else None)
    pub, sleeps = publisher(client)

    assert pub.publish(events(5)) == 5

    assert [len(call) for call in client.calls] == [5, 1]
    assert json.loads(client.calls[1][0]["Detail"])["sagaId"] == "s03"
    assert len(sleeps) == 1


def test_given_an_entry_that_keeps_failing_when_published_then_the_rest_go_and_it_raises() -> None:
    client = FakeEvents(fail=lambda saga, _call: THROTTLED if saga == "s12" else None)
    pub, _ = publisher(client, max_attempts=3)

    with pytest.raises(EventPublishError) as raised:
        pub.publish(events(15))

    # The bad entry's batch was sent 3 times in all; the other batch went anyway.
    assert [len(call) for call in client.calls] == [10, 5, 1, 1]
    assert raised.value.published == 14
    assert [f.event.saga_id for f in raised.value.failed] == ["s12"]
    assert "s12" in str(raised.value)
    assert "ThrottlingException" in str(raised.value)
    # Answered as failed on every send: the bus does not have it.
    assert [f.event.saga_id for f in raised.value.refused] == ["s12"]
    assert raised.value.unanswered == []
    assert "refused by the bus" in str(raised.value)


class ShortAnswerEvents(FakeEvents):
    """Answers one entry fewer than it was sent (nothing can be matched by position)."""

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        answer = super().put_events(Entries)
        return {**answer, "Entries": answer["Entries"][:-1]}


URL = "https://events.us-east-1.amazonaws.com/"


@pytest.mark.parametrize(
    "error",
    [
        ReadTimeoutError(endpoint_url=URL),
        ConnectionClosedError(endpoint_url=URL),
        # Even an error answer may come after botocore re-sent a request whose answer was lost.
        ClientError({"Error": {"Code": "InternalException", "Message": "boom"}}, "PutEvents"),
    ],
    ids=["read timeout", "connection closed", "client error"],
)
def test_given_every_call_raises_when_published_then_the_events_are_unanswered_not_refused(
    error: Exception,
) -> None:
    client = FakeEvents()
    client.raise_on_call.update({1: error, 2: error, 3: error})
    pub, _ = publisher(client, max_attempts=3)

    with pytest.raises(EventPublishError) as raised:
        pub.publish(events(2))

    assert [len(call) for call in client.calls] == [2, 2, 2]
    assert [f.event.saga_id for f in raised.value.unanswered] == ["s00", "s01"]
    assert raised.value.refused == []
    assert not any(f.answered for f in raised.value.failed)
    assert str(raised.value).count("no answer: the bus may have it") == 2


def test_given_a_call_without_answer_then_refusals_when_published_then_it_stays_unanswered() -> (
    None
):
    # The first send may have reached the bus; later refusals do not prove it has not got it.
    client = FakeEvents(fail=lambda saga, call: THROTTLED if saga == "s01" else None)
    client.raise_on_call[1] = ConnectionClosedError(endpoint_url=URL)
    pub, _ = publisher(client, max_attempts=3)

    with pytest.raises(EventPublishError) as raised:
        pub.publish(events(2))

    assert [len(call) for call in client.calls] == [2, 2, 1]
    assert raised.value.published == 1
    (failed,) = raised.value.failed
    assert (failed.event.saga_id, failed.error_code, failed.answered) == (
        "s01",
        "ThrottlingException",
        False,
    )


def test_given_an_answer_that_cannot_be_matched_when_published_then_the_events_are_unanswered() -> (
    None
):
    client = ShortAnswerEvents()
    pub, _ = publisher(client, max_attempts=2)

    with pytest.raises(EventPublishError) as raised:
        pub.publish(events(3))

    assert {f.error_code for f in raised.value.failed} == {"UnexpectedResponse"}
    assert [f.event.saga_id for f in raised.value.unanswered] == ["s00", "s01", "s02"]


def test_given_the_call_itself_fails_when_published_then_its_entries_are_retried() -> None:
    client = FakeEvents()
    client.raise_on_call[1] = ClientError(
        {"Error": {"Code": "InternalException", "Message": "boom"}}, "PutEvents"
    )
    pub, _ = publisher(client)

    assert pub.publish(events(3)) == 3
    assert [len(call) for call in client.calls] == [3, 3]


def test_given_no_events_when_published_then_no_call_is_made() -> None:
    client = FakeEvents()
    pub, _ = publisher(client)
    assert pub.publish([]) == 0
    assert client.calls == []


def test_given_an_event_when_sent_then_the_entry_names_source_bus_type_and_detail() -> None:
    client = FakeEvents()
    pub, _ = publisher(client)
    finding = Finding(
        FindingKind.STUCK,
        SagaRef("s1", "p-1", "lease-1", "NEGOTIATING", "RSAGA#s1", "META"),
        "no update for a day",
        {"ageSeconds": 90000},
    )

    pub.publish([event_for(finding, scheduled_time="2026-07-10T12:03:00.000Z")])

    (entry,) = client.calls[0]
    assert entry["Source"] == SOURCE == "propflow.renewal-saga"
    assert entry["DetailType"] == "SagaStuck"
    assert entry["EventBusName"] == "bus"
    assert json.loads(entry["Detail"]) == {
        "sagaId": "s1",
        "personId": "p-1",
        "leaseId": "lease-1",
        "state": "NEGOTIATING",
        "reason": "no update for a day",
        "ageSeconds": 90000,
        "scheduledTime": "2026-07-10T12:03:00.000Z",
    }


@pytest.mark.parametrize(("bus", "attempts"), [("", 3), ("bus", 0)])
def test_given_invalid_settings_when_building_a_publisher_then_it_refuses(
    bus: str, attempts: int
) -> None:
    with pytest.raises(ValueError, match=r"bus_name|max_attempts"):
        EventPublisher(FakeEvents(), bus, max_attempts=attempts)
