"""The retry sweep's conditional writes: claim a retry or an exhaustion, record its publication,
undo a claim whose event the bus answered as failed (a claim whose PutEvents got no answer is
never undone: the bus may have its event, so it stays pending and is published again).

Scheduler delivers at least once, and two deliveries of one firing can run side by side. A retry
is therefore CLAIMED before its event goes out, with a conditional UpdateItem that only succeeds
on the saga exactly as the sweep read it. The claim increments prepareAttempts and records the
scheduled time in lastPrepareRetryAt, so a second delivery of the same firing either fails the
condition (it read the saga before the claim) or reads a last attempt that is 0 s old and finds
the backoff not elapsed (it read the saga after the claim). Either way it claims nothing.

A claim is also an outbox entry. It carries the token of the run that made it, the run's wall
clock and the event to publish; the run records prepareClaimPublishedAt only after PutEvents
accepted the event. A claim without it is pending, and a later run publishes it again once it is
older than the publish timeout (outbox.pending_publications), so a run that dies between claim
and publish loses nothing. A claim whose condition fails is told apart by its token: the old item
(ReturnValuesOnConditionCheckFailure=ALL_OLD, or one consistent GetItem on a server that ignores
it) carries ours when botocore re-sent a write that had been applied (its answer was lost), and
that claim is ours; any other token means someone else's, and the saga is skipped.

Only the retry attributes are touched: never GSI4PK/GSI4SK (a claim is not a re-stamp and must
not move the row between index partitions), never state or updatedAt (they belong to the
workflow; the stuck sweep reads updatedAt).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from saga_index.store.dynamo import (
    Expression,
    all_of,
    attribute_fragment,
    attribute_list,
    deserialize,
    error_code,
    is_condition_failed,
    request_expressions,
    serialize,
    update,
)
from saga_index.sweeps.findings import SagaRef
from saga_index.sweeps.retry import RetryDecision
from saga_index.sweeps.rows import (
    LAST_PREPARE_RETRY_AT,
    PREPARE_ATTEMPTS,
    PREPARE_CLAIM_EVENT,
    PREPARE_CLAIM_PUBLISHED_AT,
    PREPARE_CLAIM_TOKEN,
    PREPARE_CLAIMED_AT,
    PREPARE_FAILED,
    PREPARE_RETRIES_EXHAUSTED_AT,
    UPDATED_AT,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

ACCESS_DENIED = "AccessDeniedException"


def _attributes(*attributes: str) -> Expression:
    """A list of attributes, each spelt "#" + its name, for a REMOVE."""
    return attribute_list({f"#{a}": a for a in attributes})


# The workflow has not moved the saga on (a retry of a saga that left PREPARE_FAILED would
# restart a prepare that is already running or done).
STILL_PREPARE_FAILED = attribute_fragment(
    "#state = :prepareFailed", "state", slots=(":prepareFailed",)
).given(serialize({":prepareFailed": PREPARE_FAILED}))
# Nobody claimed a retry since our read: the count is the one the rule decided on. A saga that
# was never retried has no count at all; the condition says so instead of comparing with 0.
ATTEMPTS_UNCHANGED = attribute_fragment(
    f"#{PREPARE_ATTEMPTS} = :seenAttempts", PREPARE_ATTEMPTS, slots=(":seenAttempts",)
)
ATTEMPTS_NEVER_COUNTED = attribute_fragment(
    f"attribute_not_exists(#{PREPARE_ATTEMPTS})", PREPARE_ATTEMPTS
)
# The workflow did not write the saga since our read (a fresh failure restarts the backoff).
UPDATED_AT_UNCHANGED = attribute_fragment(
    f"#{UPDATED_AT} = :seenUpdatedAt", UPDATED_AT, slots=(":seenUpdatedAt",)
)
UPDATED_AT_ABSENT = attribute_fragment(f"attribute_not_exists(#{UPDATED_AT})", UPDATED_AT)
# The exhaustion event goes out once: the first sweep to record it wins.
NOT_YET_EXHAUSTED = attribute_fragment(
    f"attribute_not_exists(#{PREPARE_RETRIES_EXHAUSTED_AT})", PREPARE_RETRIES_EXHAUSTED_AT
)
# The claim is the one this token made and its publication is not recorded yet: only then may it
# be undone (its event was refused) or marked published.
STILL_THE_PENDING_CLAIM = attribute_fragment(
    f"#{PREPARE_CLAIM_TOKEN} = :token AND attribute_not_exists(#{PREPARE_CLAIM_PUBLISHED_AT})",
    PREPARE_CLAIM_TOKEN,
    PREPARE_CLAIM_PUBLISHED_AT,
    slots=(":token",),
)

# What a claim writes beside its count or its exhaustion: the outbox entry, pending.
_CLAIM_RECORD = attribute_fragment(
    f"#{PREPARE_CLAIM_TOKEN} = :token, #{PREPARE_CLAIMED_AT} = :clockedAt,"
    f" #{PREPARE_CLAIM_EVENT} = :event",
    PREPARE_CLAIM_TOKEN,
    PREPARE_CLAIMED_AT,
    PREPARE_CLAIM_EVENT,
    slots=(":token", ":clockedAt", ":event"),
)
_CLAIM_FIELDS = _attributes(PREPARE_CLAIM_TOKEN, PREPARE_CLAIMED_AT, PREPARE_CLAIM_EVENT)
# A retry counts one more attempt (the first one counts from none) at the scheduled time.
_ONE_MORE_ATTEMPT = attribute_fragment(
    f"#{PREPARE_ATTEMPTS} = if_not_exists(#{PREPARE_ATTEMPTS}, :zero) + :one",
    PREPARE_ATTEMPTS,
    slots=(":zero", ":one"),
).given(serialize({":zero": 0, ":one": 1}))
_RETRIED_AT_CLAIM = attribute_fragment(
    f"#{LAST_PREPARE_RETRY_AT} = :claimedAt", LAST_PREPARE_RETRY_AT, slots=(":claimedAt",)
)
_EXHAUSTED_AT_CLAIM = attribute_fragment(
    f"#{PREPARE_RETRIES_EXHAUSTED_AT} = :claimedAt",
    PREPARE_RETRIES_EXHAUSTED_AT,
    slots=(":claimedAt",),
)
# Undoing a retry claim puts back the count and the last retry time it read.
_ATTEMPTS_BACK = attribute_fragment(
    f"#{PREPARE_ATTEMPTS} = :seenAttempts", PREPARE_ATTEMPTS, slots=(":seenAttempts",)
)
_LAST_RETRY_BACK = attribute_fragment(
    f"#{LAST_PREPARE_RETRY_AT} = :seenLastRetryAt",
    LAST_PREPARE_RETRY_AT,
    slots=(":seenLastRetryAt",),
)
_PUBLISHED_NOW = attribute_fragment(
    f"#{PREPARE_CLAIM_PUBLISHED_AT} = :publishedAt",
    PREPARE_CLAIM_PUBLISHED_AT,
    slots=(":publishedAt",),
)


@dataclass(frozen=True)
class Claim:
    """What one run writes into each claim it makes."""

    token: str  # the run's: tells its own claims (a re-sent write) from anyone else's
    scheduled_at: str  # the run's "now": lastPrepareRetryAt, or prepareRetriesExhaustedAt
    clocked_at: str  # the run's wall clock at the claim: the publish timeout counts from it
    event: str  # JSON {"detailType", "detail"}: what to publish, now or again later


def _unchanged(decision: RetryDecision) -> Expression:
    """The saga is still as the sweep read it when it decided."""
    parts = [STILL_PREPARE_FAILED]
    if decision.seen_attempts is None:
        parts.append(ATTEMPTS_NEVER_COUNTED)
    else:
        parts.append(ATTEMPTS_UNCHANGED.given(serialize({":seenAttempts": decision.seen_attempts})))
    if decision.seen_updated_at is None:
        parts.append(UPDATED_AT_ABSENT)
    else:
        seen = serialize({":seenUpdatedAt": decision.seen_updated_at})
        parts.append(UPDATED_AT_UNCHANGED.given(seen))
    return all_of(*parts)


def _claim_record(claim: Claim) -> tuple[Expression, Expression]:
    """What a claim sets beside its count or its exhaustion, and what it removes."""
    record = _CLAIM_RECORD.given(
        serialize({":token": claim.token, ":clockedAt": claim.clocked_at, ":event": claim.event})
    )
    return record, _attributes(PREPARE_CLAIM_PUBLISHED_AT)


def _pending_claim(token: str) -> Expression:
    return STILL_THE_PENDING_CLAIM.given(serialize({":token": token}))


class RetryClaims:
    """Conditional UpdateItems on saga rows; the client is injected. True = written (a claim:
    written by this run, now or by an earlier send of the same write)."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        if not table_name:
            raise ValueError("table_name is required")
        self.client = client
        self.table_name = table_name

    def claim_retry(self, decision: RetryDecision, claim: Claim) -> bool:
        """Increment prepareAttempts, set lastPrepareRetryAt and a pending claim, if unchanged."""
        record, unpublished = _claim_record(claim)
        retried_at = _RETRIED_AT_CLAIM.given(serialize({":claimedAt": claim.scheduled_at}))
        change = update(set_=[_ONE_MORE_ATTEMPT, retried_at, record], remove=[unpublished])
        return self._claim(decision.finding.saga, change, _unchanged(decision), claim.token)

    def mark_exhausted(self, decision: RetryDecision, claim: Claim) -> bool:
        """Record prepareRetriesExhaustedAt and a pending claim, once, if unchanged."""
        record, unpublished = _claim_record(claim)
        exhausted_at = _EXHAUSTED_AT_CLAIM.given(serialize({":claimedAt": claim.scheduled_at}))
        change = update(set_=[exhausted_at, record], remove=[unpublished])
        condition = all_of(_unchanged(decision), NOT_YET_EXHAUSTED)
        return self._claim(decision.finding.saga, change, condition, claim.token)

    def mark_published(self, saga: SagaRef, *, token: str, at: str) -> bool:
        """Record that PutEvents accepted the event of the claim `token` made."""
        change = update(set_=[_PUBLISHED_NOW.given(serialize({":publishedAt": at}))])
        return self._update(saga, change, _pending_claim(token), "published")

    def release_retry(self, decision: RetryDecision, *, token: str) -> bool:
        """Undo claim_retry (the bus answered its event as failed), if the claim is still ours
        and pending."""
        sets: list[Expression] = []
        removes: list[Expression] = [_CLAIM_FIELDS]
        if decision.seen_attempts is None:
            removes.append(_attributes(PREPARE_ATTEMPTS))
        else:
            sets.append(_ATTEMPTS_BACK.given(serialize({":seenAttempts": decision.seen_attempts})))
        if decision.seen_last_retry_at is None:
            removes.append(_attributes(LAST_PREPARE_RETRY_AT))
        else:
            seen = serialize({":seenLastRetryAt": decision.seen_last_retry_at})
            sets.append(_LAST_RETRY_BACK.given(seen))
        return self._update(
            decision.finding.saga,
            update(set_=sets, remove=removes),
            _pending_claim(token),
            "release retry claim",
        )

    def release_exhausted(self, decision: RetryDecision, *, token: str) -> bool:
        """Undo mark_exhausted (the bus answered its event as failed), if the claim is still ours
        and pending."""
        return self._update(
            decision.finding.saga,
            update(remove=[_attributes(PREPARE_RETRIES_EXHAUSTED_AT), _CLAIM_FIELDS]),
            _pending_claim(token),
            "release exhaustion",
        )

    def _claim(self, saga: SagaRef, change: Expression, condition: Expression, token: str) -> bool:
        try:
            self._send(saga, change, condition, return_old_on_failure=True)
        except ClientError as err:
            if not is_condition_failed(err):
                raise
            holder = self._claim_token(saga, err)
            if holder == token:
                # Our own write, applied by an earlier send whose answer was lost.
                log.info("claim already made by this run: kept", extra={"sagaId": saga.saga_id})
                return True
            log.info(
                "saga changed or claimed since it was read: skipped",
                extra={"sagaId": saga.saga_id, "claimedBy": holder},
            )
            return False
        return True

    def _claim_token(self, saga: SagaRef, err: ClientError) -> str | None:
        """The claim token on the row as the failed condition saw it."""
        old = err.response.get("Item")
        if old is None:
            # A server that ignores ReturnValuesOnConditionCheckFailure (dynalite): read it.
            try:
                old = self.client.get_item(
                    TableName=self.table_name,
                    Key=serialize({"PK": saga.pk, "SK": saga.sk}),
                    ConsistentRead=True,
                ).get("Item")
            except ClientError as read_err:
                # DynamoDB returns the old item whenever there is one, so there the row is gone;
                # the function's role need not read saga rows to learn that.
                if error_code(read_err) != ACCESS_DENIED:
                    raise
                return None
        if old is None:
            return None
        token = deserialize(old).get(PREPARE_CLAIM_TOKEN)
        return token if isinstance(token, str) else None

    def _update(self, saga: SagaRef, change: Expression, condition: Expression, what: str) -> bool:
        try:
            self._send(saga, change, condition, return_old_on_failure=False)
        except ClientError as err:
            if is_condition_failed(err):
                log.info(
                    "saga changed since it was claimed: not written",
                    extra={"sagaId": saga.saga_id, "action": what},
                )
                return False
            raise
        return True

    def _send(
        self,
        saga: SagaRef,
        change: Expression,
        condition: Expression,
        *,
        return_old_on_failure: bool,
    ) -> None:
        extra: dict[str, Any] = (
            {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"} if return_old_on_failure else {}
        )
        self.client.update_item(
            TableName=self.table_name,
            Key=serialize({"PK": saga.pk, "SK": saga.sk}),
            **request_expressions(update=change, condition=condition),
            **extra,
        )
