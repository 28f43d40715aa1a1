"""The sweeps' pure rules on a fixed clock: every threshold and the backoff at its boundary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from saga_index.index.errors import InvalidInputError
from saga_index.sweeps.findings import FindingKind
from saga_index.sweeps.health import workflow_health
from saga_index.sweeps.outbox import pending_publications
from saga_index.sweeps.policies import HealthPolicy, RetryPolicy, StuckPolicy
from saga_index.sweeps.retry import prepare_retries
from saga_index.sweeps.snapshot import open_saga_snapshot
from saga_index.sweeps.stuck import stuck_sagas

NOW = datetime(2026, 7, 10, 12, 0, tzinfo=UTC)
MS = timedelta(milliseconds=1)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ago(delta: timedelta) -> str:
    return iso(NOW - delta)


def saga(saga_id: str = "s1", state: str = "OPENED", **attributes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "PK": f"RSAGA#{saga_id}",
        "SK": "META",
        "sagaId": saga_id,
        "personId": f"p-{saga_id}",
        "leaseId": f"lease-{saga_id}",
        "state": state,
        "openedAt": "2026-07-01T00:00:00.000Z",
        "updatedAt": ago(timedelta(minutes=1)),
    }
    item.update(attributes)
    return {k: v for k, v in item.items() if v is not None}


def ids(findings: Any) -> list[str]:
    return [f.saga.saga_id for f in findings]


# ---- workflow-health-sweep ---------------------------------------------------------------------


def test_given_heartbeat_exactly_30_minutes_old_when_swept_then_it_is_still_healthy() -> None:
    result = workflow_health([saga(workflowHeartbeatAt=ago(timedelta(minutes=30)))], NOW)
    assert result.findings == ()


def test_given_heartbeat_one_millisecond_over_30_minutes_when_swept_then_it_is_unhealthy() -> None:
    result = workflow_health([saga(workflowHeartbeatAt=ago(timedelta(minutes=30) + MS))], NOW)
    assert ids(result.findings) == ["s1"]
    finding = result.findings[0]
    assert finding.kind is FindingKind.WORKFLOW_UNHEALTHY
    assert finding.kind == "SagaWorkflowUnhealthy"
    assert "workflowHeartbeatAt" in finding.reason
    assert finding.saga.person_id == "p-s1"
    assert finding.saga.lease_id == "lease-s1"
    assert finding.saga.state == "OPENED"
    assert finding.details["thresholdSeconds"] == 1800


def test_given_a_fresh_heartbeat_and_an_old_update_when_swept_then_the_heartbeat_wins() -> None:
    item = saga(workflowHeartbeatAt=ago(timedelta(minutes=5)), updatedAt=ago(timedelta(days=3)))
    assert workflow_health([item], NOW).findings == ()


def test_given_no_heartbeat_when_swept_then_updated_at_is_the_heartbeat() -> None:
    healthy = saga("s1", updatedAt=ago(timedelta(minutes=30)))
    unhealthy = saga("s2", updatedAt=ago(timedelta(minutes=30) + MS))
    result = workflow_health([healthy, unhealthy], NOW)
    assert ids(result.findings) == ["s2"]
    assert "updatedAt" in result.findings[0].reason


def test_given_a_custom_threshold_when_swept_then_its_boundary_applies() -> None:
    policy = HealthPolicy(threshold=timedelta(minutes=5))
    at = saga("s1", updatedAt=ago(timedelta(minutes=5)))
    over = saga("s2", updatedAt=ago(timedelta(minutes=5) + MS))
    assert ids(workflow_health([at, over], NOW, policy).findings) == ["s2"]


def test_given_terminal_sagas_when_swept_then_they_are_never_unhealthy() -> None:
    item = saga(state="SIGNED", updatedAt=ago(timedelta(days=30)))
    assert workflow_health([item], NOW).findings == ()


def test_given_a_heartbeat_in_the_future_when_swept_then_it_is_healthy() -> None:
    item = saga(workflowHeartbeatAt=iso(NOW + timedelta(minutes=10)))
    assert workflow_health([item], NOW).findings == ()


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({"workflowHeartbeatAt": "yesterday"}, "workflowHeartbeatAt"),
        ({"workflowHeartbeatAt": "2026-07-10T11:00:00"}, "time zone"),
        ({"updatedAt": None}, "updatedAt is missing"),
        ({"updatedAt": 1720000000}, "not a string"),
    ],
)
def test_given_an_unusable_heartbeat_when_swept_then_the_row_is_reported_not_guessed(
    attributes: dict[str, Any], named: str
) -> None:
    result = workflow_health([saga(**attributes)], NOW)
    assert result.findings == ()
    assert [u.saga.saga_id for u in result.unevaluable] == ["s1"]
    assert named in result.unevaluable[0].reason


def test_given_a_naive_clock_when_a_rule_runs_then_it_refuses() -> None:
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        workflow_health([], datetime(2026, 7, 10, 12, 0))


def test_given_a_non_positive_threshold_when_building_the_policy_then_it_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="positive"):
        HealthPolicy(threshold=timedelta(0))


# ---- retry-failed-prepare: backoff ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    [
        (None, timedelta(minutes=10)),
        (0, timedelta(minutes=10)),
        (1, timedelta(minutes=20)),
        (2, timedelta(minutes=40)),
    ],
)
def test_given_a_failed_prepare_exactly_at_its_backoff_when_swept_then_no_retry_is_due(
    attempts: int | None, backoff: timedelta
) -> None:
    last = {"lastPrepareRetryAt": ago(backoff)} if attempts else {"updatedAt": ago(backoff)}
    item = saga(state="PREPARE_FAILED", prepareAttempts=attempts, **last)
    plan = prepare_retries([item], NOW)
    assert plan.retries == ()
    assert plan.exhausted == ()


@pytest.mark.parametrize(
    ("attempts", "backoff"),
    [
        (None, timedelta(minutes=10)),
        (0, timedelta(minutes=10)),
        (1, timedelta(minutes=20)),
        (2, timedelta(minutes=40)),
    ],
)
def test_given_a_failed_prepare_one_ms_past_its_backoff_when_swept_then_a_retry_is_due(
    attempts: int | None, backoff: timedelta
) -> None:
    last = (
        {"lastPrepareRetryAt": ago(backoff + MS)} if attempts else {"updatedAt": ago(backoff + MS)}
    )
    item = saga(state="PREPARE_FAILED", prepareAttempts=attempts, **last)
    plan = prepare_retries([item], NOW)
    assert ids(d.finding for d in plan.retries) == ["s1"]
    decision = plan.retries[0]
    assert decision.finding.kind == "SagaPrepareRetryRequested"
    assert decision.seen_attempts == attempts
    assert decision.finding.details["attempt"] == (attempts or 0) + 1
    assert decision.finding.details["backoffSeconds"] == int(backoff.total_seconds())


def test_given_a_last_retry_time_when_swept_then_it_counts_instead_of_updated_at() -> None:
    recent_retry = saga(
        state="PREPARE_FAILED",
        prepareAttempts=1,
        updatedAt=ago(timedelta(days=1)),
        lastPrepareRetryAt=ago(timedelta(minutes=19)),
    )
    assert prepare_retries([recent_retry], NOW).retries == ()


def test_given_a_saga_claimed_at_this_time_when_that_time_is_swept_again_then_no_retry() -> None:
    # What a duplicate delivery reads after the first delivery's claim: 0 s since the attempt.
    claimed = saga(state="PREPARE_FAILED", prepareAttempts=1, lastPrepareRetryAt=iso(NOW))
    assert prepare_retries([claimed], NOW).retries == ()


def test_given_numbers_as_dynamodb_returns_them_when_swept_then_decimals_count() -> None:
    item = saga(
        state="PREPARE_FAILED",
        prepareAttempts=Decimal(2),
        lastPrepareRetryAt=ago(timedelta(minutes=41)),
    )
    plan = prepare_retries([item], NOW)
    assert [d.seen_attempts for d in plan.retries] == [2]


def test_given_a_custom_policy_when_swept_then_its_base_and_maximum_apply() -> None:
    policy = RetryPolicy(max_attempts=5, base_backoff=timedelta(minutes=1))
    at = saga(
        "s1",
        state="PREPARE_FAILED",
        prepareAttempts=4,
        lastPrepareRetryAt=ago(timedelta(minutes=16)),
    )
    over = saga(
        "s2",
        state="PREPARE_FAILED",
        prepareAttempts=4,
        lastPrepareRetryAt=ago(timedelta(minutes=16) + MS),
    )
    plan = prepare_retries([at, over], NOW, policy)
    assert ids(d.finding for d in plan.retries) == ["s2"]
    assert plan.exhausted == ()


def test_given_sagas_in_other_states_when_swept_then_only_prepare_failed_is_retried() -> None:
    old = ago(timedelta(days=2))
    items = [
        saga(f"s-{state}", state=state, updatedAt=old)
        for state in ("OPENED", "PREPARING", "SIGNED")
    ]
    plan = prepare_retries(items, NOW)
    assert plan.retries == ()
    assert plan.exhausted == ()
    assert plan.unevaluable == ()


# ---- retry-failed-prepare: exhaustion -----------------------------------------------------------


def test_given_attempts_one_below_the_maximum_when_due_then_the_last_retry_is_requested() -> None:
    item = saga(
        state="PREPARE_FAILED", prepareAttempts=2, lastPrepareRetryAt=ago(timedelta(hours=1))
    )
    plan = prepare_retries([item], NOW)
    assert ids(d.finding for d in plan.retries) == ["s1"]
    assert plan.retries[0].finding.details["attempt"] == 3
    assert plan.exhausted == ()


@pytest.mark.parametrize("attempts", [3, 4])
def test_given_attempts_at_or_over_the_maximum_when_swept_then_retries_are_exhausted(
    attempts: int,
) -> None:
    # Whatever the time since the last attempt: no retry is left to wait for.
    item = saga(state="PREPARE_FAILED", prepareAttempts=attempts, lastPrepareRetryAt=iso(NOW))
    plan = prepare_retries([item], NOW)
    assert plan.retries == ()
    assert ids(d.finding for d in plan.exhausted) == ["s1"]
    finding = plan.exhausted[0].finding
    assert finding.kind == "SagaPrepareRetriesExhausted"
    assert finding.details == {"prepareAttempts": attempts, "maxAttempts": 3}


def test_given_exhaustion_already_recorded_when_swept_then_it_is_not_reported_again() -> None:
    item = saga(
        state="PREPARE_FAILED",
        prepareAttempts=3,
        prepareRetriesExhaustedAt=ago(timedelta(hours=1)),
    )
    plan = prepare_retries([item], NOW)
    assert plan.retries == ()
    assert plan.exhausted == ()


@pytest.mark.parametrize(
    ("attributes", "named"),
    [
        ({"prepareAttempts": "2"}, "not a number"),
        ({"prepareAttempts": Decimal("1.5")}, "non-negative integer"),
        ({"prepareAttempts": -1}, "non-negative integer"),
        ({"prepareAttempts": True}, "not a number"),
        ({"lastPrepareRetryAt": "soon", "prepareAttempts": 1}, "lastPrepareRetryAt"),
        ({"updatedAt": None}, "updatedAt is missing"),
    ],
)
def test_given_unusable_retry_bookkeeping_when_swept_then_the_row_is_reported_not_retried(
    attributes: dict[str, Any], named: str
) -> None:
    plan = prepare_retries([saga(state="PREPARE_FAILED", **attributes)], NOW)
    assert plan.retries == ()
    assert plan.exhausted == ()
    assert [u.saga.saga_id for u in plan.unevaluable] == ["s1"]
    assert named in plan.unevaluable[0].reason


@pytest.mark.parametrize("max_attempts", [0, 21, True])
def test_given_an_invalid_maximum_when_building_the_policy_then_it_is_rejected(
    max_attempts: Any,
) -> None:
    with pytest.raises(InvalidInputError, match="max prepare attempts"):
        RetryPolicy(max_attempts=max_attempts)


def test_given_the_default_policy_then_backoff_is_ten_minutes_times_two_to_the_attempts() -> None:
    policy = RetryPolicy()
    assert [policy.backoff(n) for n in range(4)] == [
        timedelta(minutes=10),
        timedelta(minutes=20),
        timedelta(minutes=40),
        timedelta(minutes=80),
    ]


# ---- stuck-saga-sweep --------------------------------------------------------------------------


def test_given_no_update_for_exactly_24_hours_when_swept_then_it_is_not_stuck() -> None:
    assert stuck_sagas([saga(updatedAt=ago(timedelta(hours=24)))], NOW).findings == ()


def test_given_no_update_for_24_hours_and_a_millisecond_when_swept_then_it_is_stuck() -> None:
    result = stuck_sagas([saga(state="NEGOTIATING", updatedAt=ago(timedelta(hours=24) + MS))], NOW)
    assert ids(result.findings) == ["s1"]
    assert result.findings[0].kind == "SagaStuck"
    assert "NEGOTIATING" in result.findings[0].reason


def test_given_a_per_state_threshold_when_swept_then_that_state_uses_its_own_boundary() -> None:
    policy = StuckPolicy(per_state={"PREPARING": timedelta(hours=2)})
    at = saga("s1", state="PREPARING", updatedAt=ago(timedelta(hours=2)))
    over = saga("s2", state="PREPARING", updatedAt=ago(timedelta(hours=2) + MS))
    other_state = saga("s3", state="OPENED", updatedAt=ago(timedelta(hours=3)))
    assert ids(stuck_sagas([at, over, other_state], NOW, policy).findings) == ["s2"]


def test_given_a_workflow_heartbeat_when_swept_for_stuck_then_only_updates_count() -> None:
    # A live workflow that never changes the saga is still stuck: heartbeat is not an update.
    item = saga(updatedAt=ago(timedelta(days=2)), workflowHeartbeatAt=iso(NOW))
    assert ids(stuck_sagas([item], NOW).findings) == ["s1"]


def test_given_terminal_sagas_when_swept_for_stuck_then_they_are_ignored() -> None:
    item = saga(state="EXPIRED", updatedAt=ago(timedelta(days=200)))
    assert stuck_sagas([item], NOW).findings == ()


def test_given_a_threshold_for_a_terminal_state_when_building_the_policy_then_it_is_rejected() -> (
    None
):
    with pytest.raises(InvalidInputError, match="SIGNED"):
        StuckPolicy(per_state={"SIGNED": timedelta(hours=1)})


def test_given_no_update_time_when_swept_for_stuck_then_the_row_is_reported() -> None:
    result = stuck_sagas([saga(updatedAt=None)], NOW)
    assert result.findings == ()
    assert "updatedAt is missing" in result.unevaluable[0].reason


# ---- agent-metrics-snapshot --------------------------------------------------------------------


def test_given_open_and_terminal_sagas_when_snapshotted_then_open_ones_are_counted_by_state() -> (
    None
):
    items = [
        saga("a", state="OPENED", openedAt="2026-07-09T12:00:00.000Z"),
        saga("b", state="OPENED", openedAt="2026-07-08T12:00:00.000Z"),
        saga("c", state="PREPARE_FAILED", openedAt="2026-07-10T11:00:00.000Z"),
        saga("d", state="SIGNED", openedAt="2026-01-01T00:00:00.000Z"),
    ]
    snapshot = open_saga_snapshot(items, NOW)
    assert snapshot.counts_by_state == {
        "OPENED": 2,
        "PREPARING": 0,
        "PREPARE_FAILED": 1,
        "OFFER_SENT": 0,
        "NEGOTIATING": 0,
        "AWAITING_SIGNATURE": 0,
    }
    assert snapshot.total == 3
    assert snapshot.oldest_saga_id == "b"
    assert snapshot.oldest_age == timedelta(days=2)


def test_given_no_open_saga_when_snapshotted_then_there_is_no_oldest() -> None:
    snapshot = open_saga_snapshot([saga(state="DECLINED")], NOW)
    assert snapshot.total == 0
    assert snapshot.oldest_saga_id is None
    assert snapshot.oldest_age is None


def test_given_an_opened_at_in_the_future_when_snapshotted_then_its_age_is_zero() -> None:
    snapshot = open_saga_snapshot([saga(openedAt=iso(NOW + timedelta(minutes=3)))], NOW)
    assert snapshot.oldest_age == timedelta(0)


def test_given_an_unparseable_opened_at_when_snapshotted_then_it_counts_but_is_reported() -> None:
    items = [saga("a", openedAt="garbage"), saga("b", openedAt="2026-07-10T11:00:00.000Z")]
    snapshot = open_saga_snapshot(items, NOW)
    assert snapshot.counts_by_state["OPENED"] == 2
    assert snapshot.oldest_saga_id == "b"
    assert [u.saga.saga_id for u in snapshot.unevaluable] == ["a"]


# ---- retry-failed-prepare: the outbox of pending claims ---------------------------------------

CLAIMED_EVENT = (
    '{"detail": {"attempt": 1, "sagaId": "s1"}, "detailType": "SagaPrepareRetryRequested"}'
)


def pending(**attributes: Any) -> dict[str, Any]:
    return saga(
        state="PREPARE_FAILED",
        prepareAttempts=1,
        lastPrepareRetryAt=ago(timedelta(hours=1)),
        prepareClaimToken="run-1",
        prepareClaimEvent=CLAIMED_EVENT,
        **attributes,
    )


def test_given_a_pending_claim_older_than_the_timeout_then_its_event_is_due_again_as_claimed() -> (
    None
):
    plan = pending_publications([pending(prepareClaimedAt=ago(timedelta(minutes=5) + MS))], NOW)

    (due,) = plan.due
    assert (due.saga.saga_id, due.token, due.detail_type) == (
        "s1",
        "run-1",
        str(FindingKind.PREPARE_RETRY_REQUESTED),
    )
    assert due.detail == {"attempt": 1, "sagaId": "s1"}


@pytest.mark.parametrize(
    "attributes",
    [
        {"prepareClaimedAt": ago(timedelta(minutes=5))},  # at the timeout: not yet
        {"prepareClaimedAt": ago(timedelta(hours=1)), "prepareClaimPublishedAt": ago(MS)},
    ],
)
def test_given_a_young_or_published_claim_then_nothing_is_due(attributes: dict[str, Any]) -> None:
    assert pending_publications([pending(**attributes)], NOW).due == ()


def test_given_a_pending_claim_then_no_new_retry_is_decided_for_the_saga() -> None:
    # Due by its backoff, but the last claim's event is not known to be out: that goes first.
    plan = prepare_retries([pending(prepareClaimedAt=ago(timedelta(hours=1)))], NOW)

    assert (plan.retries, plan.exhausted) == ((), ())


def test_given_a_claim_made_before_claims_had_tokens_then_it_is_not_pending() -> None:
    item = saga(
        state="PREPARE_FAILED", prepareAttempts=1, lastPrepareRetryAt=ago(timedelta(hours=1))
    )

    assert len(prepare_retries([item], NOW).retries) == 1


@pytest.mark.parametrize("event", [None, "not json", '{"detail": {}}'])
def test_given_a_pending_claim_without_a_usable_event_then_it_is_unevaluable(
    event: str | None,
) -> None:
    item = pending(prepareClaimedAt=ago(timedelta(hours=1)))
    item["prepareClaimEvent"] = event

    plan = pending_publications([item], NOW)

    assert plan.due == ()
    (row,) = plan.unevaluable
    assert "prepareClaimEvent" in row.reason
