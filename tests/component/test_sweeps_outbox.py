"""retry-failed-prepare on moto when PutEvents gives no answer: the claim stays pending and the
next firing publishes the SAME (sagaId, attempt) again; only an entry the bus answered as failed
releases its claim.

Two kinds of lost answer, because they differ in what the bus holds and both must end the same:
- the request reached the bus and the answer was lost (a read timeout, a connection reset or
  closed after sending): moto's bus takes the events, then the hook raises, so the consumers'
  queue already holds the event and the re-publication is a duplicate they drop;
- the request never left (the endpoint could not be reached): the hook raises before moto sees
  it, so the re-publication is the only copy the consumers ever get.
The sweep cannot tell the two apart, so it must neither release the claim (in the first case
the next run would claim the same attempt number again for a new retry, which consumers drop as
a duplicate) nor mark it published (in the second case the retry would never go out).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    BotoCoreError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from handlers import runtime
from handlers import sweeps as handlers
from saga_index.sweeps.runner import SweepIncompleteError
from tests.component.sweeps_support import SweepWorld, payload, world
from tests.support.lambda_harness import FakeLambdaContext

__all__ = ["world"]

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

T0 = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)  # a retry-failed-prepare firing (minute 2 mod 10)
CTX = FakeLambdaContext()
JOB = "retry-failed-prepare"
RETRY = "SagaPrepareRetryRequested"
PUT_EVENTS_SEND = "before-send.eventbridge.PutEvents"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def failed_prepare(world: SweepWorld, saga_id: str) -> None:
    world.backend.put_saga(
        saga_id,
        f"p-{saga_id}",
        state="PREPARE_FAILED",
        updatedAt=iso(T0 - timedelta(minutes=11)),
    )


def sweep(at: datetime) -> dict[str, Any]:
    return handlers.retry_failed_prepare(payload(JOB, at), CTX)


def _entries(request: Any) -> list[dict[str, Any]]:
    body = request.body
    return list(json.loads(body.decode() if isinstance(body, bytes) else body)["Entries"])


def _lose_answers(
    client: Any, error: type[BotoCoreError], *, after_send: bool, only_batches: bool = False
) -> list[int]:
    """Every PutEvents send (of more than one entry, with `only_batches`) ends in `error`: after
    moto's bus has taken the request (`after_send`) or before it gets there. Returns the size of
    each send that failed. botocore handles these as it would a real socket failure (they are
    raised where the HTTP send is), and it gives up after the client's attempts."""
    lost: list[int] = []

    def hook(request: Any, **_: Any) -> None:
        entries = _entries(request)
        if only_batches and len(entries) == 1:
            return
        lost.append(len(entries))
        raise error(endpoint_url=request.url)

    if after_send:
        _after_the_bus_answered(client, hook)
    else:
        client.meta.events.register_first(PUT_EVENTS_SEND, hook)
    return lost


def _after_the_bus_answered(client: Any, hook: Any) -> None:
    """Run `hook` on each PutEvents send once moto's bus has handled it. botocore calls the
    handlers of a more specific event name first, so the hook goes on the same name as moto's
    ("before-send"), after it, and picks PutEvents out itself."""

    def on_send(event_name: str, **kwargs: Any) -> None:
        if event_name == PUT_EVENTS_SEND:
            hook(**kwargs)

    client.meta.events.register("before-send", on_send)


def _refuse_single_entries(client: Any, *, after_calls: int = 0) -> list[str]:
    """A PutEvents of one entry, past the first `after_calls` calls, is answered by the bus:
    that entry failed (the bus has not got it)."""
    refused: list[str] = []
    calls: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        sent = json.loads(params["body"])["Entries"]
        calls.append(len(sent))
        if len(sent) != 1 or len(calls) <= after_calls:
            return None
        refused.append(json.loads(sent[0]["Detail"])["sagaId"])
        entry = {"ErrorCode": "InternalFailure", "ErrorMessage": "injected"}
        return AWSResponse(None, 200, {}, None), {"FailedEntryCount": 1, "Entries": [entry]}

    client.meta.events.register("before-call.events.PutEvents", hook)
    return refused


def _broken_events(world: SweepWorld) -> Any:
    # One botocore attempt per send: the error is what botocore raises once its retries are
    # spent, without waiting out its backoff; the publisher's own re-sends still happen.
    from saga_index.sweeps.events import make_events_client

    client = make_events_client(region="us-east-1", max_attempts=1)
    runtime.clients.use(dynamodb=world.backend.client, events=client)
    return client


def _healthy_events(world: SweepWorld) -> None:
    runtime.clients.use(dynamodb=world.backend.client, events=world.events_client)


def _retries(world: SweepWorld) -> list[tuple[str, int]]:
    return [(e["detail"]["sagaId"], e["detail"]["attempt"]) for e in world.events_of(RETRY)]


@pytest.mark.parametrize(
    ("error", "after_send"),
    [
        pytest.param(ReadTimeoutError, True, id="read timeout after the bus took it"),
        pytest.param(ConnectionClosedError, True, id="connection closed after the bus took it"),
        pytest.param(EndpointConnectionError, False, id="endpoint unreachable before sending"),
    ],
)
def test_given_putevents_gives_no_answer_then_the_claim_stays_pending_and_the_next_firing_republishes_the_same_attempt(  # noqa: E501
    world: SweepWorld, error: type[BotoCoreError], after_send: bool
) -> None:
    failed_prepare(world, "s1")
    lost = _lose_answers(_broken_events(world), error, after_send=after_send)

    with pytest.raises(SweepIncompleteError, match=r"no answer.*s1.*stay pending"):
        sweep(T0)

    assert lost == [1, 1, 1]  # the publisher's three sends, none answered
    claimed = world.saga("s1")
    assert claimed["prepareAttempts"] == 1  # not released: the retry may be out there
    assert claimed["lastPrepareRetryAt"] == iso(T0)
    assert claimed["prepareClaimToken"]
    assert "prepareClaimPublishedAt" not in claimed  # not known to be published either
    # What the consumers hold depends on where the send broke; the sweep cannot know which.
    first = _retries(world)
    assert first == ([("s1", 1)] * 3 if after_send else [])

    _healthy_events(world)
    result = sweep(T0 + timedelta(minutes=10))

    assert (result["republished"], result["findings"][RETRY]) == (1, 0)  # no attempt 2 claimed
    republished = world.saga("s1")
    assert republished["prepareAttempts"] == 1
    assert republished["prepareClaimToken"] == claimed["prepareClaimToken"]
    assert "prepareClaimPublishedAt" in republished
    events = world.events_of(RETRY)
    assert _retries(world) == [*first, ("s1", 1)]
    # Every copy is the claimed event itself: de-duplicating on (sagaId, attempt) leaves one.
    assert {json.dumps(e["detail"], sort_keys=True) for e in events} == {
        json.dumps(events[-1]["detail"], sort_keys=True)
    }
    assert events[-1]["detail"]["scheduledTime"] == iso(T0)

    # The backoff counts from the claim at T0: attempt 2 is due strictly after 20 minutes.
    later = [sweep(T0 + timedelta(minutes=m))["findings"][RETRY] for m in (20, 30)]
    assert later == [0, 1]
    assert _retries(world)[len(first) + 1 :] == [("s1", 2)]
    assert world.saga("s1")["prepareAttempts"] == 2


def test_given_a_send_without_answer_then_re_sends_answered_as_failed_then_the_claim_is_kept(
    world: SweepWorld,
) -> None:
    # The first send reached the bus and its answer was lost; the re-sends were refused. The
    # bus has the event from the first send, so the claim must not be released.
    failed_prepare(world, "s1")
    client = _broken_events(world)
    refused = _refuse_single_entries(client, after_calls=1)
    lost: list[int] = []

    def lose_first(request: Any, **_: Any) -> None:
        if not lost:
            lost.append(len(_entries(request)))
            raise ConnectionClosedError(endpoint_url=request.url)

    _after_the_bus_answered(client, lose_first)

    with pytest.raises(SweepIncompleteError, match=r"InternalFailure.*no answer"):
        sweep(T0)

    assert (lost, refused) == ([1], ["s1", "s1"])
    saga = world.saga("s1")
    assert (saga["prepareAttempts"], "prepareClaimPublishedAt" in saga) == (1, False)
    assert _retries(world) == [("s1", 1)]

    _healthy_events(world)
    result = sweep(T0 + timedelta(minutes=10))
    assert (result["republished"], result["findings"][RETRY]) == (1, 0)
    assert _retries(world) == [("s1", 1), ("s1", 1)]


def test_given_one_entry_answered_as_failed_and_a_batch_without_answer_then_only_the_answered_one_is_released(  # noqa: E501
    world: SweepWorld,
) -> None:
    # Eleven retries: a batch of ten whose answer is lost after the bus took it, and a batch of
    # one that the bus answers as failed on every send.
    sagas = [f"s{i:02d}" for i in range(11)]
    for saga_id in sagas:
        failed_prepare(world, saga_id)
    client = _broken_events(world)
    refused = _refuse_single_entries(client)
    lost = _lose_answers(client, ReadTimeoutError, after_send=True, only_batches=True)

    with pytest.raises(SweepIncompleteError, match=r"(?s)(?=.*refused by the bus)(?=.*no answer)"):
        sweep(T0)

    assert lost == [10, 10, 10]
    (alone,) = set(refused)
    assert refused == [alone] * 3
    released = world.saga(alone)
    for attribute in ("prepareAttempts", "lastPrepareRetryAt", "prepareClaimToken"):
        assert attribute not in released, attribute  # put back as it was read
    for saga_id in sagas:
        if saga_id != alone:
            kept = world.saga(saga_id)
            assert (kept["prepareAttempts"], "prepareClaimPublishedAt" in kept) == (1, False)

    _healthy_events(world)
    result = sweep(T0 + timedelta(minutes=10))

    # The ten go out again as claimed; the released one is claimed afresh, as attempt 1 again
    # (no consumer has seen it: the bus refused it).
    assert (result["republished"], result["findings"][RETRY]) == (10, 1)
    assert sorted(set(_retries(world))) == [(saga_id, 1) for saga_id in sagas]
    assert all(world.saga(saga_id)["prepareAttempts"] == 1 for saga_id in sagas)
    assert all("prepareClaimPublishedAt" in world.saga(saga_id) for saga_id in sagas)
