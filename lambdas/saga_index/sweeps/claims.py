"""The retry sweep's conditional writes: claim a retry, record exhaustion once, undo either.

Scheduler delivers at least once, and two deliveries of one firing can run side by side. A retry
is therefore CLAIMED before its event goes out, with a conditional UpdateItem that only succeeds
on the saga exactly as the sweep read it. The claim increments prepareAttempts and records the
scheduled time in lastPrepareRetryAt, so a second delivery of the same firing either fails the
condition (it read the saga before the claim) or reads a last attempt that is 0 s old and finds
the backoff not elapsed (it read the saga after the claim). Either way it claims nothing.

Only the retry attributes are touched: never GSI4PK/GSI4SK (a claim is not a re-stamp and must
not move the row between index partitions), never state or updatedAt (they belong to the
workflow; the stuck sweep reads updatedAt).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from saga_index.dynamo.codec import serialize
from saga_index.dynamo.conditions import is_condition_failed
from saga_index.sweeps.rules import (
    LAST_PREPARE_RETRY_AT,
    PREPARE_ATTEMPTS,
    PREPARE_FAILED,
    PREPARE_RETRIES_EXHAUSTED_AT,
    UPDATED_AT,
    RetryDecision,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

_PLACEHOLDER = re.compile(r"[:#][A-Za-z0-9_]+")

_NAMES = {
    "#state": "state",
    "#attempts": PREPARE_ATTEMPTS,
    "#updatedAt": UPDATED_AT,
    "#lastRetryAt": LAST_PREPARE_RETRY_AT,
    "#exhaustedAt": PREPARE_RETRIES_EXHAUSTED_AT,
}

# The workflow has not moved the saga on (a retry of a saga that left PREPARE_FAILED would
# restart a prepare that is already running or done).
STILL_PREPARE_FAILED = "#state = :prepareFailed"
# Nobody claimed a retry since our read: the count is the one the rule decided on. A saga that
# was never retried has no count at all; the condition says so instead of comparing with 0.
ATTEMPTS_UNCHANGED = "#attempts = :seenAttempts"
ATTEMPTS_NEVER_COUNTED = "attribute_not_exists(#attempts)"
# The workflow did not write the saga since our read (a fresh failure restarts the backoff).
UPDATED_AT_UNCHANGED = "#updatedAt = :seenUpdatedAt"
UPDATED_AT_ABSENT = "attribute_not_exists(#updatedAt)"
# The exhaustion event goes out once: the first sweep to record it wins.
NOT_YET_EXHAUSTED = "attribute_not_exists(#exhaustedAt)"
# Undo only our own claim: the count we wrote and the scheduled time that claimed it.
STILL_OUR_CLAIM = "#attempts = :claimedAttempts AND #lastRetryAt = :claimedAt"
STILL_OUR_EXHAUSTION = "#exhaustedAt = :claimedAt"


def _unchanged(decision: RetryDecision, values: dict[str, Any]) -> str:
    values[":prepareFailed"] = PREPARE_FAILED
    parts = [STILL_PREPARE_FAILED]
    if decision.seen_attempts is None:
        parts.append(ATTEMPTS_NEVER_COUNTED)
    else:
        values[":seenAttempts"] = decision.seen_attempts
        parts.append(ATTEMPTS_UNCHANGED)
    if decision.seen_updated_at is None:
        parts.append(UPDATED_AT_ABSENT)
    else:
        values[":seenUpdatedAt"] = decision.seen_updated_at
        parts.append(UPDATED_AT_UNCHANGED)
    return " AND ".join(parts)


def _placeholders(expression: str) -> set[str]:
    return set(_PLACEHOLDER.findall(expression))


class RetryClaims:
    """Conditional UpdateItems on saga rows; the client is injected. True = written."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        if not table_name:
            raise ValueError("table_name is required")
        self.client = client
        self.table_name = table_name

    def claim_retry(self, decision: RetryDecision, *, claimed_at: str) -> bool:
        """Increment prepareAttempts and set lastPrepareRetryAt = claimed_at, if unchanged."""
        values: dict[str, Any] = {":one": 1, ":zero": 0, ":claimedAt": claimed_at}
        condition = _unchanged(decision, values)
        update = "SET #attempts = if_not_exists(#attempts, :zero) + :one, #lastRetryAt = :claimedAt"
        return self._update(decision, update, condition, values, "claim retry")

    def release_retry(self, decision: RetryDecision, *, claimed_at: str) -> bool:
        """Undo claim_retry (its event could not be published), if the claim is still ours."""
        values: dict[str, Any] = {
            ":claimedAttempts": decision.attempts + 1,
            ":claimedAt": claimed_at,
        }
        sets: list[str] = []
        removes: list[str] = []
        if decision.seen_attempts is None:
            removes.append("#attempts")
        else:
            values[":seenAttempts"] = decision.seen_attempts
            sets.append("#attempts = :seenAttempts")
        if decision.seen_last_retry_at is None:
            removes.append("#lastRetryAt")
        else:
            values[":seenLastRetryAt"] = decision.seen_last_retry_at
            sets.append("#lastRetryAt = :seenLastRetryAt")
        update = " ".join(
            part
            for part in (
                "SET " + ", ".join(sets) if sets else "",
                "REMOVE " + ", ".join(removes) if removes else "",
            )
            if part
        )
        return self._update(decision, update, STILL_OUR_CLAIM, values, "release retry claim")

    def mark_exhausted(self, decision: RetryDecision, *, at: str) -> bool:
        """Record prepareRetriesExhaustedAt, once, if the saga is unchanged since the read."""
        values: dict[str, Any] = {":claimedAt": at}
        condition = _unchanged(decision, values) + " AND " + NOT_YET_EXHAUSTED
        update = "SET #exhaustedAt = :claimedAt"
        return self._update(decision, update, condition, values, "record exhaustion")

    def release_exhausted(self, decision: RetryDecision, *, at: str) -> bool:
        values: dict[str, Any] = {":claimedAt": at}
        return self._update(
            decision, "REMOVE #exhaustedAt", STILL_OUR_EXHAUSTION, values, "release exhaustion"
        )

    def _update(
        self,
        decision: RetryDecision,
        update: str,
        condition: str,
        values: dict[str, Any],
        what: str,
    ) -> bool:
        saga = decision.finding.saga
        # DynamoDB rejects names and values the expressions do not use.
        used = _placeholders(update + " " + condition)
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key=serialize({"PK": saga.pk, "SK": saga.sk}),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={k: v for k, v in _NAMES.items() if k in used},
                ExpressionAttributeValues=serialize({k: v for k, v in values.items() if k in used}),
            )
        except ClientError as err:
            if is_condition_failed(err):
                log.info(
                    "saga changed since it was read: skipped",
                    extra={"sagaId": saga.saga_id, "action": what},
                )
                return False
            raise
        return True
