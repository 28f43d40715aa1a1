"""The sweeps' rules: pure functions of (open sagas, now, policy).

No I/O and no clock of their own: `now` is injected (the handlers pass the schedule's
scheduledTime), so a rule gives the same answer for the same inputs and its boundaries can be
tested exactly. "Older than a threshold" is strict everywhere: a saga exactly at the threshold is
not yet a finding.

A row a rule cannot evaluate (a missing or unparseable timestamp, a non-integer attempt count) is
neither dropped silently nor guessed at: it is returned in `unevaluable` with the reason, so the
sweep logs it and counts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError, InvalidKeyError
from saga_index.index.model import OPEN_STATES

PREPARE_FAILED = "PREPARE_FAILED"

# Attributes the rules read (owned by the renewal workflow, except the retry bookkeeping below).
UPDATED_AT = "updatedAt"
OPENED_AT = "openedAt"
WORKFLOW_HEARTBEAT_AT = "workflowHeartbeatAt"
# Retry bookkeeping, written only by the retry sweep's conditional claims (claims.py).
PREPARE_ATTEMPTS = "prepareAttempts"
LAST_PREPARE_RETRY_AT = "lastPrepareRetryAt"
PREPARE_RETRIES_EXHAUSTED_AT = "prepareRetriesExhaustedAt"
# The claim's outbox, on the saga row beside the count it claimed (claims.py): the token of the
# run that claimed, when it claimed (its wall clock), the event to publish, and when PutEvents
# accepted that event. A claim without the last is pending.
PREPARE_CLAIM_TOKEN = "prepareClaimToken"  # noqa: S105 (an attribute name)
PREPARE_CLAIMED_AT = "prepareClaimedAt"
PREPARE_CLAIM_EVENT = "prepareClaimEvent"
PREPARE_CLAIM_PUBLISHED_AT = "prepareClaimPublishedAt"

DEFAULT_HEARTBEAT_THRESHOLD = timedelta(minutes=30)
DEFAULT_MAX_PREPARE_ATTEMPTS = 3
DEFAULT_PREPARE_BACKOFF = timedelta(minutes=10)
# A pending claim older than this is re-published: the sweep function's timeout is 3 minutes
# (infra/sweeps.py), so the run that claimed it has ended by then; 2 more cover clock skew
# between execution environments.
DEFAULT_PUBLISH_TIMEOUT = timedelta(minutes=5)
DEFAULT_STUCK_THRESHOLD = timedelta(hours=24)


class FindingKind(StrEnum):
    """What a sweep found; the value is the EventBridge detail-type and the metric name."""

    WORKFLOW_UNHEALTHY = "SagaWorkflowUnhealthy"
    PREPARE_RETRY_REQUESTED = "SagaPrepareRetryRequested"
    PREPARE_RETRIES_EXHAUSTED = "SagaPrepareRetriesExhausted"
    STUCK = "SagaStuck"


@dataclass(frozen=True)
class SagaRef:
    """Who a finding is about: the event's identity fields and the row's table key."""

    saga_id: str
    person_id: Any
    lease_id: Any
    state: Any
    pk: str
    sk: str

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> SagaRef:
        pk, sk = keys.table_key_of(item)
        saga_id = item.get("sagaId")
        if not isinstance(saga_id, str) or not saga_id:
            try:
                saga_id = keys.parse_saga_table_key(pk, sk)
            except InvalidKeyError:
                saga_id = pk
        return cls(
            saga_id=saga_id,
            person_id=item.get("personId"),
            lease_id=item.get("leaseId"),
            state=item.get("state"),
            pk=pk,
            sk=sk,
        )


@dataclass(frozen=True)
class Finding:
    kind: FindingKind
    saga: SagaRef
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unevaluable:
    saga: SagaRef
    reason: str


@dataclass(frozen=True)
class RuleResult:
    findings: tuple[Finding, ...]
    unevaluable: tuple[Unevaluable, ...] = ()


# ---- policies (thresholds with their defaults) -------------------------------------------------


def _positive(name: str, value: timedelta) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInputError(f"{name} must be a positive duration, got {value!r}")
    return value


@dataclass(frozen=True)
class HealthPolicy:
    threshold: timedelta = DEFAULT_HEARTBEAT_THRESHOLD

    def __post_init__(self) -> None:
        _positive("workflow heartbeat threshold", self.threshold)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_PREPARE_ATTEMPTS
    base_backoff: timedelta = DEFAULT_PREPARE_BACKOFF
    publish_timeout: timedelta = DEFAULT_PUBLISH_TIMEOUT

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidInputError(
                f"max prepare attempts must be an integer, got {self.max_attempts!r}"
            )
        if not 1 <= self.max_attempts <= 20:
            raise InvalidInputError(
                f"max prepare attempts must be from 1 to 20, got {self.max_attempts}"
            )
        _positive("prepare retry backoff", self.base_backoff)
        _positive("claim publish timeout", self.publish_timeout)

    def backoff(self, attempts: int) -> timedelta:
        """How long after the last attempt the next one is due: base x 2^attempts."""
        return self.base_backoff * (2**attempts)


@dataclass(frozen=True)
class StuckPolicy:
    default_threshold: timedelta = DEFAULT_STUCK_THRESHOLD
    per_state: Mapping[str, timedelta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _positive("stuck-saga threshold", self.default_threshold)
        unknown = sorted(set(self.per_state) - set(OPEN_STATES))
        if unknown:
            raise InvalidInputError(
                f"stuck-saga thresholds name states that are not open states: {unknown}; "
                f"open states are {', '.join(OPEN_STATES)}"
            )
        for state, threshold in self.per_state.items():
            _positive(f"stuck-saga threshold for {state}", threshold)

    def threshold_for(self, state: str) -> timedelta:
        return self.per_state.get(state, self.default_threshold)


# ---- helpers ------------------------------------------------------------------------------------


def require_aware(now: datetime) -> datetime:
    if not isinstance(now, datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(f"now must be a timezone-aware datetime, got {now!r}")
    return now.astimezone(UTC)


def parse_timestamp(item: Mapping[str, Any], attribute: str) -> datetime:
    """The attribute as an aware UTC datetime; ValueError naming the attribute otherwise."""
    value = item.get(attribute)
    if value is None:
        raise ValueError(f"{attribute} is missing")
    if not isinstance(value, str):
        raise ValueError(f"{attribute} is not a string: {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{attribute} is not an ISO-8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"{attribute} has no time zone: {value!r}")
    return parsed.astimezone(UTC)


def format_age(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours}h{minutes:02d}m{secs:02d}s"


def _open(sagas: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    # The repository already filters on open states; a pure rule does not rely on its caller.
    return (s for s in sagas if s.get("state") in OPEN_STATES)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- workflow-health-sweep ---------------------------------------------------------------------


def workflow_health(
    sagas: Iterable[Mapping[str, Any]], now: datetime, policy: HealthPolicy | None = None
) -> RuleResult:
    """Open sagas whose workflow heartbeat (workflowHeartbeatAt, else updatedAt) is older than
    the threshold -> SagaWorkflowUnhealthy."""
    now = require_aware(now)
    policy = policy or HealthPolicy()
    findings: list[Finding] = []
    unevaluable: list[Unevaluable] = []
    for item in _open(sagas):
        attribute = (
            WORKFLOW_HEARTBEAT_AT if item.get(WORKFLOW_HEARTBEAT_AT) is not None else UPDATED_AT
        )
        try:
            heartbeat = parse_timestamp(item, attribute)
        except ValueError as err:
            unevaluable.append(Unevaluable(SagaRef.of(item), f"no usable heartbeat: {err}"))
            continue
        age = now - heartbeat
        if age > policy.threshold:
            findings.append(
                Finding(
                    FindingKind.WORKFLOW_UNHEALTHY,
                    SagaRef.of(item),
                    f"workflow heartbeat ({attribute}) is {format_age(age)} old, over the "
                    f"{format_age(policy.threshold)} threshold",
                    {
                        "heartbeatAttribute": attribute,
                        "heartbeatAt": _iso(heartbeat),
                        "ageSeconds": int(age.total_seconds()),
                        "thresholdSeconds": int(policy.threshold.total_seconds()),
                    },
                )
            )
    return RuleResult(tuple(findings), tuple(unevaluable))


# ---- stuck-saga-sweep --------------------------------------------------------------------------


def stuck_sagas(
    sagas: Iterable[Mapping[str, Any]], now: datetime, policy: StuckPolicy | None = None
) -> RuleResult:
    """Open sagas with no update (updatedAt) for longer than their state's threshold
    -> SagaStuck."""
    now = require_aware(now)
    policy = policy or StuckPolicy()
    findings: list[Finding] = []
    unevaluable: list[Unevaluable] = []
    for item in _open(sagas):
        try:
            updated = parse_timestamp(item, UPDATED_AT)
        except ValueError as err:
            unevaluable.append(Unevaluable(SagaRef.of(item), f"no usable update time: {err}"))
            continue
        threshold = policy.threshold_for(str(item["state"]))
        age = now - updated
        if age > threshold:
            findings.append(
                Finding(
                    FindingKind.STUCK,
                    SagaRef.of(item),
                    f"no update for {format_age(age)} in state {item['state']}, over the "
                    f"{format_age(threshold)} threshold",
                    {
                        "updatedAt": _iso(updated),
                        "ageSeconds": int(age.total_seconds()),
                        "thresholdSeconds": int(threshold.total_seconds()),
                    },
                )
            )
    return RuleResult(tuple(findings), tuple(unevaluable))


# ---- retry-failed-prepare ----------------------------------------------------------------------


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
    published first (`pending_publications`), and the backoff counts from it.
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
                    "lastAttemptAt": _iso(last_attempt),
                    "backoffSeconds": int(backoff.total_seconds()),
                },
            )
            retries.append(
                RetryDecision(finding, seen_attempts, seen_updated_at, seen_last_retry_at)
            )
    return PrepareRetryPlan(tuple(retries), tuple(exhausted), tuple(unevaluable))


# ---- retry-failed-prepare: the outbox of pending claims ----------------------------------------


def is_pending(item: Mapping[str, Any]) -> bool:
    """A claim was made (by a run with a token) and its event is not known to be published."""
    return (
        item.get(PREPARE_CLAIM_TOKEN) is not None and item.get(PREPARE_CLAIM_PUBLISHED_AT) is None
    )


@dataclass(frozen=True)
class PendingPublication:
    """A claim whose event is not known to be published, old enough to publish again: the event
    exactly as claimed (so its sagaId and attempt are those of the first try)."""

    saga: SagaRef
    token: str
    detail_type: str
    detail: Mapping[str, Any]
    claimed_at: datetime


@dataclass(frozen=True)
class PendingPlan:
    due: tuple[PendingPublication, ...]
    unevaluable: tuple[Unevaluable, ...] = ()


def _claimed_event(item: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    raw = item.get(PREPARE_CLAIM_EVENT)
    if not isinstance(raw, str):
        raise ValueError(f"{PREPARE_CLAIM_EVENT} is missing or not a string")
    try:
        event = json.loads(raw)
    except ValueError:
        raise ValueError(f"{PREPARE_CLAIM_EVENT} is not JSON: {raw[:80]!r}") from None
    if (
        not isinstance(event, dict)
        or not isinstance(event.get("detailType"), str)
        or not isinstance(event.get("detail"), dict)
    ):
        raise ValueError(f"{PREPARE_CLAIM_EVENT} has no detailType and detail: {raw[:80]!r}")
    return event["detailType"], event["detail"]


def pending_publications(
    sagas: Iterable[Mapping[str, Any]], clock_now: datetime, policy: RetryPolicy | None = None
) -> PendingPlan:
    """Pending claims (`is_pending`) claimed more than the publish timeout before `clock_now`
    (a wall clock, like the claim's prepareClaimedAt): the run that made them has ended without
    recording the publication, so whether the event went out is unknown; it goes out again.
    Younger ones may belong to a run still in progress and are left to it."""
    clock_now = require_aware(clock_now)
    policy = policy or RetryPolicy()
    due: list[PendingPublication] = []
    unevaluable: list[Unevaluable] = []
    for item in sagas:
        if not is_pending(item):
            continue
        ref = SagaRef.of(item)
        try:
            claimed_at = parse_timestamp(item, PREPARE_CLAIMED_AT)
            detail_type, detail = _claimed_event(item)
        except ValueError as err:
            unevaluable.append(Unevaluable(ref, f"pending claim cannot be published: {err}"))
            continue
        if clock_now - claimed_at > policy.publish_timeout:
            token = str(item[PREPARE_CLAIM_TOKEN])
            due.append(PendingPublication(ref, token, detail_type, detail, claimed_at))
    return PendingPlan(tuple(due), tuple(unevaluable))


# ---- agent-metrics-snapshot --------------------------------------------------------------------


@dataclass(frozen=True)
class OpenSagaSnapshot:
    counts_by_state: Mapping[str, int]
    oldest_saga_id: str | None
    oldest_age: timedelta | None  # None when there is no open saga with a usable openedAt
    unevaluable: tuple[Unevaluable, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts_by_state.values())


def open_saga_snapshot(sagas: Iterable[Mapping[str, Any]], now: datetime) -> OpenSagaSnapshot:
    """Open sagas counted by state (every open state, zeros included) and the age of the oldest
    (by openedAt; a saga opened 'in the future' by clock skew counts as age 0)."""
    now = require_aware(now)
    counts = dict.fromkeys(OPEN_STATES, 0)
    oldest: tuple[datetime, str] | None = None
    unevaluable: list[Unevaluable] = []
    for item in _open(sagas):
        counts[str(item["state"])] += 1
        try:
            opened = parse_timestamp(item, OPENED_AT)
        except ValueError as err:
            unevaluable.append(Unevaluable(SagaRef.of(item), f"no usable open time: {err}"))
            continue
        ref = SagaRef.of(item)
        if oldest is None or (opened, ref.saga_id) < oldest:
            oldest = (opened, ref.saga_id)
    if oldest is None:
        return OpenSagaSnapshot(counts, None, None, tuple(unevaluable))
    age = max(now - oldest[0], timedelta(0))
    return OpenSagaSnapshot(counts, oldest[1], age, tuple(unevaluable))
