"""One domain function per sweep: read every open saga, apply the rule, act.

The read is `SagaRepository.get_all_open_sagas()` along the routing the repository was built
with (the control record's state, read by the handler per invocation); it is complete or it
raises (EnumerationError), and the exception is left to fail the invocation, so a sweep never
acts on a partial list and emits nothing when the read fails.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import SagaIndexError, jobs, names
from saga_index.store import ReadResult, SagaRepository, utc_iso
from saga_index.sweeps.claims import Claim, RetryClaims
from saga_index.sweeps.clock import require_aware
from saga_index.sweeps.events import EventPublisher, EventPublishError, SagaEvent, event_for
from saga_index.sweeps.findings import FindingKind, RuleResult, SagaRef, Unevaluable
from saga_index.sweeps.health import workflow_health
from saga_index.sweeps.outbox import PendingPublication, pending_publications
from saga_index.sweeps.policies import HealthPolicy, RetryPolicy, StuckPolicy
from saga_index.sweeps.retry import RetryDecision, prepare_retries
from saga_index.sweeps.snapshot import OpenSagaSnapshot, open_saga_snapshot
from saga_index.sweeps.stuck import stuck_sagas

log = logging.getLogger(__name__)

# The finding kinds each sweep reports (its metrics are emitted even when zero), from the spec.
SWEEP_FINDING_KINDS: dict[str, tuple[FindingKind, ...]] = {
    job.name: tuple(FindingKind(finding) for finding in job.findings) for job in jobs.SWEEPS
}


class SweepIncompleteError(SagaIndexError):
    """A sweep could not finish acting on what it found; the message says what is left."""


@dataclass
class SweepReport:
    job: str
    now: str
    sagas_read: int
    requests: int
    partitions: int
    anomalies: int
    # Events published, by kind (zeros for every kind the sweep reports).
    findings: dict[str, int] = field(default_factory=dict)
    # Retry sweep: sagas found due but changed between read and claim (someone else acted).
    skipped: int = 0
    # Retry sweep: pending claims past the publish timeout, published again.
    republished: int = 0
    unevaluable: int = 0
    snapshot: OpenSagaSnapshot | None = None


def _report(job: str, now: datetime, read: ReadResult) -> SweepReport:
    return SweepReport(
        job=job,
        now=utc_iso(now),
        sagas_read=len(read),
        requests=read.requests,
        partitions=len(read.partitions),
        anomalies=read.anomalies,
        findings={str(kind): 0 for kind in SWEEP_FINDING_KINDS[job]},
    )


def _log_unevaluable(job: str, rows: Sequence[Unevaluable]) -> None:
    for row in rows:
        log.warning(
            "saga could not be evaluated by the sweep: left for a human",
            extra={"job": job, "sagaId": row.saga.saga_id, "PK": row.saga.pk, "reason": row.reason},
        )


def _read(job: str, repository: SagaRepository) -> ReadResult:
    # No try/except: an EnumerationError must fail the invocation before anything is acted on.
    read = repository.get_all_open_sagas()
    log.info(
        "open sagas read",
        extra={
            "job": job,
            "sagas": len(read),
            "requests": read.requests,
            "partitions": len(read.partitions),
        },
    )
    return read


def run_workflow_health_sweep(
    repository: SagaRepository,
    publisher: EventPublisher,
    *,
    now: datetime,
    policy: HealthPolicy | None = None,
) -> SweepReport:
    now = require_aware(now)
    read = _read(names.JOB_WORKFLOW_HEALTH_SWEEP, repository)
    result = workflow_health(read.items, now, policy)
    return _publish(names.JOB_WORKFLOW_HEALTH_SWEEP, now, read, result, publisher)


def run_stuck_saga_sweep(
    repository: SagaRepository,
    publisher: EventPublisher,
    *,
    now: datetime,
    policy: StuckPolicy | None = None,
) -> SweepReport:
    now = require_aware(now)
    read = _read(names.JOB_STUCK_SAGA_SWEEP, repository)
    result = stuck_sagas(read.items, now, policy)
    return _publish(names.JOB_STUCK_SAGA_SWEEP, now, read, result, publisher)


def _publish(
    job: str, now: datetime, read: ReadResult, result: RuleResult, publisher: EventPublisher
) -> SweepReport:
    report = _report(job, now, read)
    report.unevaluable = len(result.unevaluable)
    _log_unevaluable(job, result.unevaluable)
    events = [event_for(f, scheduled_time=report.now) for f in result.findings]
    for event in events:
        log.info(
            "saga finding", extra={"job": job, "kind": event.detail_type, "sagaId": event.saga_id}
        )
    try:
        publisher.publish(events)
    except EventPublishError as err:
        _count(report, events, failed={id(f.event) for f in err.failed})
        raise
    _count(report, events, failed=set())
    return report


def _count(report: SweepReport, events: Sequence[SagaEvent], *, failed: set[int]) -> None:
    for event in events:
        if id(event) not in failed:
            report.findings[event.detail_type] = report.findings.get(event.detail_type, 0) + 1


def _wall_clock() -> datetime:
    return datetime.now(UTC)


def run_retry_failed_prepare(
    repository: SagaRepository,
    claims: RetryClaims,
    publisher: EventPublisher,
    *,
    now: datetime,
    policy: RetryPolicy | None = None,
    token: str | None = None,
    clock: Callable[[], datetime] = _wall_clock,
) -> SweepReport:
    """Claim each due retry (and each exhaustion) with a conditional write, publish, then record
    the publication on each claim; and publish again every pending claim older than the policy's
    publish timeout (a run that claimed and died before recording the publication).

    `token` names this run's claims (default: a fresh uuid); `clock` is the wall clock the
    claims are stamped with and the timeout is measured on (`now` is the scheduled time).
    Claims come first so that a duplicate delivery cannot retry a saga twice. An event the bus
    answered as failed on every send (EventPublishError.refused) has its claim released (a later
    run claims it again) and fails the invocation. An event with no answer (the call raised: the
    bus may have it) keeps its claim pending and fails the invocation: releasing it would let the
    next run claim the same attempt number again for what is a new retry, and consumers that
    de-duplicate on (sagaId, attempt) would drop that retry. Pending, it is published again after
    the timeout with the same (sagaId, attempt), as is an event whose publication could not be
    recorded; no new attempt is claimed for the saga meanwhile.
    """
    now = require_aware(now)
    policy = policy or RetryPolicy()
    token = token or uuid.uuid4().hex
    read = _read(names.JOB_RETRY_FAILED_PREPARE, repository)
    plan = prepare_retries(read.items, now, policy)
    pending = pending_publications(read.items, require_aware(clock()), policy)
    report = _report(names.JOB_RETRY_FAILED_PREPARE, now, read)
    unevaluable = (*plan.unevaluable, *pending.unevaluable)
    report.unevaluable = len(unevaluable)
    _log_unevaluable(names.JOB_RETRY_FAILED_PREPARE, unevaluable)

    claimed, claim_failures = _claim_due(
        (*plan.retries, *plan.exhausted), claims, report, token=token, clock=clock
    )

    again = [(p, SagaEvent(detail_type=p.detail_type, detail=p.detail)) for p in pending.due]
    events = [event for _decision, event in claimed]
    _log_publications(events, [p for p, _event in again])
    failed: set[int] = set()
    refused: set[int] = set()
    publish_error: EventPublishError | None = None
    try:
        publisher.publish([*events, *(event for _p, event in again)])
    except EventPublishError as err:
        failed = {id(f.event) for f in err.failed}
        refused = {id(f.event) for f in err.refused}
        publish_error = err
    _count(report, events, failed=failed)
    report.republished = sum(1 for _p, event in again if id(event) not in failed)

    published = [
        (decision.finding.saga, token) for decision, event in claimed if id(event) not in failed
    ] + [(p.saga, p.token) for p, event in again if id(event) not in failed]
    unrecorded = _record_published(claims, published, utc_iso(require_aware(clock())))

    if publish_error is not None:
        # Only a refusal proves the bus does not have the event; a re-published claim is never
        # released either way (an earlier run's send of it may have been delivered).
        unreleased = _release(claims, [(d, e) for d, e in claimed if id(e) in refused], token)
        unanswered = [
            f"saga {d.finding.saga.saga_id}"
            for d, e in claimed
            if id(e) in failed and id(e) not in refused
        ]
        kept: list[str] = []
        if unanswered:
            kept.append("the bus gave no answer for the claimed events of " + ", ".join(unanswered))
        if unreleased:
            kept.append("these claims could not be released: " + "; ".join(unreleased))
        if kept:
            raise SweepIncompleteError(
                f"{publish_error}; and {'; and '.join(kept)}: those claims stay pending and are "
                "published again after the publish timeout, with the same attempt"
            ) from publish_error
        raise publish_error
    problems = claim_failures + unrecorded
    if problems:
        raise SweepIncompleteError(
            f"{len(claim_failures)} retry claim(s) failed and {len(unrecorded)} publication(s) "
            "could not be recorded (those are published again after the timeout; every other "
            "finding was published): " + "; ".join(problems)
        )
    return report


def _claim_due(
    decisions: Sequence[RetryDecision],
    claims: RetryClaims,
    report: SweepReport,
    *,
    token: str,
    clock: Callable[[], datetime],
) -> tuple[list[tuple[RetryDecision, SagaEvent]], list[str]]:
    """Claim each decision (a retry, or an exhaustion) for its event: the won claims with their
    events, and the claims that failed (one lost to another run counts as skipped in `report`)."""
    scheduled_at = report.now
    claimed: list[tuple[RetryDecision, SagaEvent]] = []
    claim_failures: list[str] = []
    for decision in decisions:
        saga = decision.finding.saga
        event = event_for(decision.finding, scheduled_time=scheduled_at)
        claim = Claim(
            token=token,
            scheduled_at=scheduled_at,
            clocked_at=utc_iso(require_aware(clock())),
            event=json.dumps(
                {"detailType": event.detail_type, "detail": event.detail}, sort_keys=True
            ),
        )
        try:
            if decision.finding.kind is FindingKind.PREPARE_RETRY_REQUESTED:
                won = claims.claim_retry(decision, claim)
            else:
                won = claims.mark_exhausted(decision, claim)
        except (ClientError, BotoCoreError) as err:
            # Keep going: what is claimed must still be published; fail loudly at the end.
            claim_failures.append(f"saga {saga.saga_id}: {type(err).__name__}: {err}")
            log.error("retry claim failed", extra={"sagaId": saga.saga_id, "error": str(err)})
            continue
        if won:
            claimed.append((decision, event))
        else:
            report.skipped += 1
    return claimed, claim_failures


def _log_publications(events: Sequence[SagaEvent], again: Sequence[PendingPublication]) -> None:
    for event in events:
        log.info(
            "saga finding",
            extra={
                "job": names.JOB_RETRY_FAILED_PREPARE,
                "kind": event.detail_type,
                "sagaId": event.saga_id,
            },
        )
    for publication in again:
        log.warning(
            "pending claim older than the publish timeout: publishing it again",
            extra={
                "sagaId": publication.saga.saga_id,
                "kind": publication.detail_type,
                "claimedBy": publication.token,
                "claimedAt": utc_iso(publication.claimed_at),
            },
        )


def _record_published(
    claims: RetryClaims, published: Sequence[tuple[SagaRef, str]], at: str
) -> list[str]:
    """Mark each published claim; return what could not be marked (it stays pending)."""
    unrecorded: list[str] = []
    for saga, token in published:
        try:
            claims.mark_published(saga, token=token, at=at)
        except (ClientError, BotoCoreError) as err:
            unrecorded.append(f"saga {saga.saga_id}: {type(err).__name__}: {err}")
            log.error("publication not recorded", extra={"sagaId": saga.saga_id, "error": str(err)})
    return unrecorded


def _release(
    claims: RetryClaims, refused: Sequence[tuple[RetryDecision, SagaEvent]], token: str
) -> list[str]:
    """Undo the claims whose events the bus answered as failed; return what could not be
    undone."""
    unreleased: list[str] = []
    for decision, _event in refused:
        saga = decision.finding.saga
        try:
            if decision.finding.kind is FindingKind.PREPARE_RETRY_REQUESTED:
                released = claims.release_retry(decision, token=token)
            else:
                released = claims.release_exhausted(decision, token=token)
        except (ClientError, BotoCoreError) as err:
            unreleased.append(f"saga {saga.saga_id}: {type(err).__name__}: {err}")
            continue
        if not released:
            # Changed again since the claim: whoever changed it owns it now.
            log.warning("claim not released: saga changed since", extra={"sagaId": saga.saga_id})
    return unreleased


def run_agent_metrics_snapshot(repository: SagaRepository, *, now: datetime) -> SweepReport:
    now = require_aware(now)
    read = _read(names.JOB_AGENT_METRICS_SNAPSHOT, repository)
    snapshot = open_saga_snapshot(read.items, now)
    report = _report(names.JOB_AGENT_METRICS_SNAPSHOT, now, read)
    report.snapshot = snapshot
    report.unevaluable = len(snapshot.unevaluable)
    _log_unevaluable(names.JOB_AGENT_METRICS_SNAPSHOT, snapshot.unevaluable)
    return report


def summary(report: SweepReport) -> dict[str, Any]:
    """The report as plain JSON (the handler's return value)."""
    out: dict[str, Any] = {
        "job": report.job,
        "now": report.now,
        "sagasRead": report.sagas_read,
        "requests": report.requests,
        "partitions": report.partitions,
        "anomalies": report.anomalies,
        "findings": dict(report.findings),
        "skipped": report.skipped,
        "republished": report.republished,
        "unevaluable": report.unevaluable,
    }
    if report.snapshot is not None:
        age = report.snapshot.oldest_age
        out["openByState"] = dict(report.snapshot.counts_by_state)
        out["oldestSagaId"] = report.snapshot.oldest_saga_id
        out["oldestAgeSeconds"] = None if age is None else int(age.total_seconds())
    return out
