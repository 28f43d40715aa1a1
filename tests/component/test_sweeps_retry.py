"""retry-failed-prepare on moto: the conditional claim, duplicate deliveries, sagas changed between
read and claim, exhaustion once, and a publish failure that releases its claim."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from handlers import runtime
from handlers import sweeps as handlers
from saga_index.index import keys
from saga_index.index.shard import DEFAULT_SHARD_COUNT
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.routing import Routing
from saga_index.store.repository import SagaRepository
from saga_index.store.writer import SagaWriter
from saga_index.sweeps import runner
from saga_index.sweeps.claims import RetryClaims
from saga_index.sweeps.events import EventPublisher, EventPublishError, make_events_client
from tests.component.sweeps_support import (
    SHARDS,
    SweepWorld,
    payload,
    world,
)
from tests.support.lambda_harness import (
    FakeLambdaContext,
    emf_documents,
    metric,
)

__all__ = ["world"]

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

T0 = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)  # a retry-failed-prepare firing (minute 2 mod 10)
CTX = FakeLambdaContext()
JOB = "retry-failed-prepare"
RETRY = "SagaPrepareRetryRequested"
EXHAUSTED = "SagaPrepareRetriesExhausted"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def failed_prepare(
    world: SweepWorld, saga_id: str, *, gsi4pk: str | None = None, **extra: Any
) -> None:
    extra.setdefault("updatedAt", iso(T0 - timedelta(minutes=11)))
    world.backend.put_saga(saga_id, f"p-{saga_id}", gsi4pk=gsi4pk, state="PREPARE_FAILED", **extra)


def sweep(at: datetime, attempt: int = 1) -> dict[str, Any]:
    return handlers.retry_failed_prepare(payload(JOB, at, attempt), CTX)


def once_before_update(client: Any, action: Any) -> None:
    """Run `action` once, just before the client's next UpdateItem is sent (after the read)."""
    fired: list[bool] = []

    def hook(**_: Any) -> None:
        if not fired:
            fired.append(True)
            action()

    client.meta.events.register("before-call.dynamodb.UpdateItem", hook)


def test_given_a_due_failed_prepare_when_swept_then_the_retry_is_claimed_then_published(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # On the legacy key while migrating: a claim must not re-stamp it onto its shard.
    failed_prepare(world, "s1")
    before = world.saga("s1")
    updates: list[dict[str, Any]] = []
    world.backend.client.meta.events.register(
        "provide-client-params.dynamodb.UpdateItem",
        lambda params, **_: updates.append(dict(params)),
    )

    result = sweep(T0)

    update, published = updates  # the claim, then its publication recorded
    assert set(update["ExpressionAttributeNames"].values()) == {
        "state",
        "prepareAttempts",
        "updatedAt",
        "lastPrepareRetryAt",
        "prepareClaimToken",
        "prepareClaimedAt",
        "prepareClaimEvent",
        "prepareClaimPublishedAt",
    }
    assert update["UpdateExpression"].startswith("SET ")
    assert update["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
    assert set(published["ExpressionAttributeNames"].values()) == {
        "prepareClaimToken",
        "prepareClaimPublishedAt",
    }
    for write in (update, published):
        assert "GSI4" not in write["UpdateExpression"]
    after = world.saga("s1")
    assert after["prepareAttempts"] == 1
    assert after["lastPrepareRetryAt"] == "2026-07-10T12:02:00.000Z"
    for untouched in ("GSI4PK", "GSI4SK", "state", "updatedAt", "personId", "leaseId"):
        assert after[untouched] == before[untouched], untouched
    assert after["prepareClaimPublishedAt"]
    assert after["GSI4PK"] == keys.LEGACY_GSI4PK
    (event,) = world.events_of(RETRY)
    assert event["detail"]["sagaId"] == "s1"
    assert event["detail"]["state"] == "PREPARE_FAILED"
    assert event["detail"]["attempt"] == 1
    assert event["detail"]["scheduledTime"] == "2026-07-10T12:02:00.000Z"
    assert result["findings"] == {RETRY: 1, EXHAUSTED: 0}
    docs = emf_documents(capsys.readouterr().out)
    assert metric(docs, RETRY) == [1.0]
    assert metric(docs, EXHAUSTED) == [0.0]
    assert metric(docs, "SagaEventsRepublished") == [0.0]


def test_given_the_same_scheduled_time_delivered_twice_when_swept_then_the_saga_is_retried_once(
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1")
    failed_prepare(world, "s2", gsi4pk="shard")

    first = sweep(T0, attempt=1)
    second = sweep(T0, attempt=2)  # Scheduler's at-least-once: the same firing again

    assert first["findings"][RETRY] == 2
    assert second["findings"][RETRY] == 0
    assert sorted(e["detail"]["sagaId"] for e in world.events_of(RETRY)) == ["s1", "s2"]
    assert world.saga("s1")["prepareAttempts"] == 1
    assert world.saga("s2")["prepareAttempts"] == 1


def test_given_two_deliveries_that_both_read_before_either_claims_then_only_one_retries(
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1")
    other_client = world.backend.new_client()
    outcomes: list[runner.SweepReport] = []

    def duplicate_delivery() -> None:
        # The second delivery of the same firing runs entirely between our read and our claim.
        outcomes.append(
            runner.run_retry_failed_prepare(
                SagaRepository(
                    other_client,
                    world.backend.table_name,
                    plan=Routing.for_phase(Phase.MIGRATING, SHARDS),
                ),
                RetryClaims(other_client, world.backend.table_name),
                EventPublisher(world.events_client, world.env["EVENT_BUS_NAME"]),
                now=T0,
            )
        )

    once_before_update(world.backend.client, duplicate_delivery)

    result = sweep(T0)

    assert outcomes[0].findings[RETRY] == 1
    assert result["findings"][RETRY] == 0
    assert result["skipped"] == 1  # our claim's condition saw the other delivery's claim
    assert len(world.events_of(RETRY)) == 1
    assert world.saga("s1")["prepareAttempts"] == 1


@pytest.mark.parametrize("change", ["left PREPARE_FAILED", "failed again"])
def test_given_a_saga_changed_between_read_and_claim_when_swept_then_it_is_skipped(
    world: SweepWorld, change: str
) -> None:
    failed_prepare(world, "s1", gsi4pk="shard")
    writer = SagaWriter(
        world.backend.new_client(),
        world.backend.table_name,
        plan=Routing.for_phase("migrating", DEFAULT_SHARD_COUNT),
    )
    to_state = "PREPARING" if change == "left PREPARE_FAILED" else "PREPARE_FAILED"

    once_before_update(
        world.backend.client,
        lambda: writer.transition(
            saga_id="s1",
            person_id="p-s1",
            to_state=to_state,
            updated_at=iso(T0 - timedelta(seconds=5)),
        ),
    )

    result = sweep(T0)

    assert result["skipped"] == 1
    assert result["findings"][RETRY] == 0
    assert world.events_of(RETRY) == []
    saga = world.saga("s1")
    assert "prepareAttempts" not in saga
    assert "lastPrepareRetryAt" not in saga
    assert saga["state"] == to_state


def test_given_retries_over_time_when_swept_every_ten_minutes_then_backoff_is_kept_and_exhaustion_is_published_once(  # noqa: E501
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1")  # failed 11 min before T0

    retried_at: list[int] = []
    exhausted_at: list[int] = []
    for minutes in range(0, 130, 10):  # every firing of the schedule for two hours
        result = sweep(T0 + timedelta(minutes=minutes))
        retried_at += [minutes] * result["findings"][RETRY]
        exhausted_at += [minutes] * result["findings"][EXHAUSTED]

    # Backoff 10, 20, 40 min after each attempt, strictly older than: due at the next firing
    # after the backoff has passed; then exhausted once at the first firing after the 3rd retry.
    assert retried_at == [0, 30, 80]
    assert exhausted_at == [90]
    assert len(world.events_of(RETRY)) == 3
    (exhausted,) = world.events_of(EXHAUSTED)
    assert exhausted["detail"]["sagaId"] == "s1"
    assert exhausted["detail"]["prepareAttempts"] == 3
    saga = world.saga("s1")
    assert saga["prepareAttempts"] == 3
    assert saga["prepareRetriesExhaustedAt"] == iso(T0 + timedelta(minutes=90))
    assert saga["GSI4PK"] == keys.LEGACY_GSI4PK


def test_given_an_exhausted_saga_when_the_same_time_is_delivered_twice_then_exhaustion_is_published_once(  # noqa: E501
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1", gsi4pk="shard", prepareAttempts=3, lastPrepareRetryAt=iso(T0))

    sweep(T0, attempt=1)
    sweep(T0, attempt=2)

    assert len(world.events_of(EXHAUSTED)) == 1
    assert world.events_of(RETRY) == []


def _fail_every_put_events(client: Any) -> list[int]:
    calls: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        sent = json.loads(params["body"])["Entries"]  # the serialised request
        calls.append(len(sent))
        entries = [{"ErrorCode": "InternalFailure", "ErrorMessage": "injected"}] * len(sent)
        return AWSResponse(None, 200, {}, None), {
            "FailedEntryCount": len(entries),
            "Entries": entries,
        }

    client.meta.events.register("before-call.events.PutEvents", hook)
    return calls


def test_given_the_bus_rejects_the_event_when_swept_then_the_invocation_fails_and_the_claim_is_released(  # noqa: E501
    world: SweepWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed_prepare(world, "s1", prepareAttempts=1, lastPrepareRetryAt=iso(T0 - timedelta(hours=1)))
    broken_events = make_events_client(region="us-east-1")
    calls = _fail_every_put_events(broken_events)
    runtime.clients.use(dynamodb=world.backend.client, events=broken_events)

    with pytest.raises(EventPublishError, match="s1"):
        sweep(T0)

    assert calls == [1, 1, 1]  # sent, and re-sent twice: bounded
    saga = world.saga("s1")
    assert saga["prepareAttempts"] == 1  # released: the retry was not spent
    assert saga["lastPrepareRetryAt"] == iso(T0 - timedelta(hours=1))

    # A retry of the failed invocation (same scheduled time) claims it again: now it goes out.
    runtime.clients.use(dynamodb=world.backend.client, events=world.events_client)
    result = sweep(T0, attempt=2)
    assert result["findings"][RETRY] == 1
    assert [e["detail"]["attempt"] for e in world.events_of(RETRY)] == [2]
    assert world.saga("s1")["prepareAttempts"] == 2


# ---- the claim protocol: a token per run, publishedAt after PutEvents, an outbox ---------------


class ProcessKilled(Exception):
    """The process dies (timeout, out of memory): nothing after this point runs."""


def _die_at_put_events(client: Any) -> None:
    def hook(**_: Any) -> None:
        raise ProcessKilled("killed between the claim and PutEvents")

    client.meta.events.register("before-call.events.PutEvents", hook)


def _lose_the_first_update_answer(client: Any) -> list[bool]:
    """The first UpdateItem is applied by the server, but its answer is treated as lost: botocore
    sends the same write again (as it does after a timeout or a connection reset)."""
    lost: list[bool] = []

    def hook(**_: Any) -> int | None:
        if lost:
            return None  # the standard retry handler decides from here on
        lost.append(True)
        return 0  # retry now

    client.meta.events.register("needs-retry.dynamodb.UpdateItem", hook)
    return lost


def _ignore_return_values_on_condition_check_failure(client: Any) -> None:
    """A server that ignores ReturnValuesOnConditionCheckFailure (dynalite): no Item on the
    ConditionalCheckFailedException."""

    def hook(parsed: dict[str, Any], **_: Any) -> None:
        parsed.pop("Item", None)

    client.meta.events.register("after-call.dynamodb.UpdateItem", hook)


def _count_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    client.meta.events.register(
        f"provide-client-params.dynamodb.{operation}",
        lambda params, **_: calls.append(dict(params)),
    )
    return calls


def _crash_at_publish(world: SweepWorld, at: datetime) -> None:
    dying_events = make_events_client(region="us-east-1")
    _die_at_put_events(dying_events)
    runtime.clients.use(dynamodb=world.backend.client, events=dying_events)
    with pytest.raises(ProcessKilled):
        sweep(at)
    runtime.clients.use(dynamodb=world.backend.client, events=world.events_client)


def test_given_the_process_dies_between_claim_and_publish_then_a_run_after_the_timeout_republishes_it_once(  # noqa: E501
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1")
    _crash_at_publish(world, T0)
    claimed = world.saga("s1")
    assert claimed["prepareAttempts"] == 1
    assert claimed["prepareClaimToken"]
    assert "prepareClaimPublishedAt" not in claimed

    # Lambda's async retry of the same firing, 2 min on: inside the timeout (the claiming run
    # could still be alive), so nothing is re-published, and nothing is claimed again.
    world.clock.late = timedelta(minutes=2)
    early = sweep(T0, attempt=2)
    assert (early["republished"], early["findings"][RETRY]) == (0, 0)
    assert world.events_of(RETRY) == []

    world.clock.late = timedelta(seconds=1)
    retried_at: list[int] = []
    republished_at: list[int] = []
    for minutes in range(10, 60, 10):
        result = sweep(T0 + timedelta(minutes=minutes))
        retried_at += [minutes] * result["findings"][RETRY]
        republished_at += [minutes] * result["republished"]

    assert republished_at == [10]  # the first firing past the timeout, and only that one
    assert retried_at == [30]  # the backoff still counts from the lost run's claim
    events = world.events_of(RETRY)
    assert [(e["detail"]["sagaId"], e["detail"]["attempt"]) for e in events] == [
        ("s1", 1),
        ("s1", 2),
    ]
    # Re-published as claimed: the same detail, so (sagaId, attempt) is the consumers' key.
    assert events[0]["detail"]["scheduledTime"] == iso(T0)
    saga = world.saga("s1")
    assert saga["prepareAttempts"] == 2
    assert "prepareClaimPublishedAt" in saga


def test_given_a_saga_at_its_last_attempt_when_the_process_dies_before_publishing_then_the_exhaustion_is_still_published_once(  # noqa: E501
    world: SweepWorld,
) -> None:
    failed_prepare(world, "s1", prepareAttempts=3, lastPrepareRetryAt=iso(T0 - timedelta(hours=2)))
    _crash_at_publish(world, T0)
    assert "prepareRetriesExhaustedAt" in world.saga("s1")

    results = [sweep(T0 + timedelta(minutes=m)) for m in (10, 20, 30)]

    assert [r["republished"] for r in results] == [1, 0, 0]
    (exhausted,) = world.events_of(EXHAUSTED)
    assert exhausted["detail"]["sagaId"] == "s1"
    assert exhausted["detail"]["prepareAttempts"] == 3
    assert world.events_of(RETRY) == []


@pytest.mark.parametrize("server", ["returns the old item", "ignores ReturnValuesOnCCF"])
def test_given_the_claims_answer_is_lost_when_botocore_resends_it_then_the_claim_counts_as_ours(
    world: SweepWorld, server: str
) -> None:
    failed_prepare(world, "s1")
    lost = _lose_the_first_update_answer(world.backend.client)
    if server == "ignores ReturnValuesOnCCF":
        _ignore_return_values_on_condition_check_failure(world.backend.client)
    get_items = _count_calls(world.backend.client, "GetItem")

    result = sweep(T0)
    reads = [c for c in get_items if c.get("Key") == {"PK": {"S": "RSAGA#s1"}, "SK": {"S": "META"}}]

    assert lost == [True]
    assert result["skipped"] == 0
    assert result["findings"][RETRY] == 1
    (event,) = world.events_of(RETRY)
    assert (event["detail"]["sagaId"], event["detail"]["attempt"]) == ("s1", 1)
    saga = world.saga("s1")
    assert saga["prepareAttempts"] == 1  # claimed once, not twice
    assert "prepareClaimPublishedAt" in saga
    # The old item came with the failure, or from one consistent read when it did not.
    assert len(reads) == (0 if server == "returns the old item" else 1)
    assert all(c.get("ConsistentRead") is True for c in reads)


@pytest.mark.parametrize("server", ["returns the old item", "ignores ReturnValuesOnCCF"])
def test_given_another_runs_claim_between_our_read_and_claim_then_ours_is_skipped(
    world: SweepWorld, server: str
) -> None:
    failed_prepare(world, "s1")
    other_client = world.backend.new_client()
    others: list[runner.SweepReport] = []
    if server == "ignores ReturnValuesOnCCF":
        _ignore_return_values_on_condition_check_failure(world.backend.client)

    def foreign_claim() -> None:
        others.append(
            runner.run_retry_failed_prepare(
                SagaRepository(
                    other_client,
                    world.backend.table_name,
                    plan=Routing.for_phase(Phase.MIGRATING, 16),
                ),
                RetryClaims(other_client, world.backend.table_name),
                EventPublisher(world.events_client, world.env["EVENT_BUS_NAME"]),
                now=T0,
                token="the-other-run",
            )
        )

    once_before_update(world.backend.client, foreign_claim)

    result = sweep(T0)

    assert others[0].findings[RETRY] == 1
    assert (result["skipped"], result["findings"][RETRY]) == (1, 0)
    assert len(world.events_of(RETRY)) == 1
    saga = world.saga("s1")
    assert saga["prepareClaimToken"] == "the-other-run"
    assert saga["prepareAttempts"] == 1


def test_given_the_saga_is_deleted_between_read_and_claim_and_its_row_cannot_be_read_then_it_is_skipped(  # noqa: E501
    world: SweepWorld,
) -> None:
    # DynamoDB sends no old item when there is no row; the role may not read saga rows.
    failed_prepare(world, "s1")
    other_client = world.backend.new_client()
    once_before_update(
        world.backend.client,
        lambda: other_client.delete_item(
            TableName=world.backend.table_name,
            Key={"PK": {"S": "RSAGA#s1"}, "SK": {"S": "META"}},
        ),
    )

    def deny(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["PK"]["S"].startswith("RSAGA#"):
            raise ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "not on saga rows"}},
                "GetItem",
            )

    world.backend.client.meta.events.register("before-parameter-build.dynamodb.GetItem", deny)

    result = sweep(T0)

    assert (result["skipped"], result["findings"][RETRY]) == (1, 0)
    assert world.events_of(RETRY) == []
