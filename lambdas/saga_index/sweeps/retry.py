"""retry-failed-prepare's rule: which PREPARE_FAILED sagas are due a retry, and whose retries
are used up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from saga_index.sweeps.clock import format_age, iso_utc, parse_timestamp, require_aware
from saga_index.sweeps.findings import Finding, FindingKind, SagaRef, Unevaluable
from saga_index.sweeps.outbox import is_pending
from saga_index.sweeps.policies import RetryPolicy
from saga_index.sweeps.rows import (
    LAST_PREPARE_RETRY_AT,
    PREPARE_ATTEMPTS,
    PREPARE_FAILED,
    PREPARE_RETRIES_EXHAUSTED_AT,
    UPDATED_AT,
)


@dataclass(frozen=True)
class RetryDecision:
    """A PREPARE_FAILED saga to claim (retry or exhaustion) and what its claim conditions on.

    seen_* are the values read; the conditional UpdateItem requires them unchanged, so a saga
    changed between read and claim (or claimed by another run) is skipped.
    """

    finding: Finding
    seen_attempts: int | None  # None: prepareAttempts absent (counts as 0)
    seen_updated_at: str | None
    seen_last_retry_at: str | None

    @property
    def attempts(self) -> int:
        return self.seen_attempts or 0


@dataclass(frozen=True)
class PrepareRetryPlan:
    retries: tuple[RetryDecision, ...]
    exhausted: tuple[RetryDecision, ...]
    unevaluable: tuple[Unevaluable, ...] = ()


def _attempts(item: Mapping[str, Any]) -> int | None:
    value = item.get(PREPARE_ATTEMPTS)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise ValueError(f"{PREPARE_ATTEMPTS} is not a number: {value!r}")
    if value != int(value) or value < 0:
        raise ValueError(f"{PREPARE_ATTEMPTS} is not a non-negative integer: {value!r}")
    return int(value)


def _optional_str(item: Mapping[str, Any], attribute: str) -> str | None:
    value = item.get(attribute)
    return value if isinstance(value, str) else None


def prepare_retries(
    sagas: Iterable[Mapping[str, Any]], now: datetime, policy: RetryPolicy | None = None
) -> PrepareRetryPlan:
    """PREPARE_FAILED sagas due a retry, and those whose retries are used up.

    Due: prepareAttempts (absent = 0) below the maximum and the last attempt
    (lastPrepareRetryAt, else updatedAt) older than base x 2^attempts.
    Exhausted: prepareAttempts at or over the maximum and not yet recorded as exhausted
    (prepareRetriesExhaustedAt absent), so the exhaustion event goes out once.
    A saga whose last claim is still pending (not yet published) is neither: that claim is
    published first (`outbox.pending_publications`), and the backoff counts from it.
    """
    now = require_aware(now)
    policy = policy or RetryPolicy()
    retries: list[RetryDecision] = []
    exhausted: list[RetryDecision] = []
    unevaluable: list[Unevaluable] = []
    for item in sagas:
        if item.get("state") != PREPARE_FAILED or is_pending(item):
            continue
        ref = SagaRef.of(item)
        try:
            seen_attempts = _attempts(item)
        except ValueError as err:
            unevaluable.append(Unevaluable(ref, str(err)))
            continue
        attempts = seen_attempts or 0
        seen_updated_at = _optional_str(item, UPDATED_AT)
        seen_last_retry_at = _optional_str(item, LAST_PREPARE_RETRY_AT)
        if item.get(UPDATED_AT) is not None and seen_updated_at is None:
            unevaluable.append(Unevaluable(ref, f"{UPDATED_AT} is not a string"))
            continue
        if attempts >= policy.max_attempts:
            if item.get(PREPARE_RETRIES_EXHAUSTED_AT) is None:
                finding = Finding(
                    FindingKind.PREPARE_RETRIES_EXHAUSTED,
                    ref,
                    f"prepare failed after {attempts} retries; the maximum is "
                    f"{policy.max_attempts}",
                    {"prepareAttempts": attempts, "maxAttempts": policy.max_attempts},
                )
                exhausted.append(
                    RetryDecision(finding, seen_attempts, seen_updated_at, seen_last_retry_at)
                )
            continue
        attribute = (
            LAST_PREPARE_RETRY_AT if item.get(LAST_PREPARE_RETRY_AT) is not None else UPDATED_AT
        )
        try:
            last_attempt = parse_timestamp(item, attribute)
        except ValueError as err:
            unevaluable.append(Unevaluable(ref, f"no usable last attempt time: {err}"))
            continue
        backoff = policy.backoff(attempts)
        age = now - last_attempt
        if age > backoff:
            finding = Finding(
                FindingKind.PREPARE_RETRY_REQUESTED,
                ref,
                f"prepare retry {attempts + 1} of {policy.max_attempts}: the last attempt "
                f"({attribute}) is {format_age(age)} old, over the {format_age(backoff)} backoff",
                {
                    "attempt": attempts + 1,
                    "maxAttempts": policy.max_attempts,
                    "lastAttemptAt": iso_utc(last_attempt),
                    "backoffSeconds": int(backoff.total_seconds()),
                },
            )
            retries.append(
                RetryDecision(finding, seen_attempts, seen_updated_at, seen_last_retry_at)
            )
    return PrepareRetryPlan(tuple(retries), tuple(exhausted), tuple(unevaluable))
