"""One domain function per sweep: read every open saga, apply the rule, act.

The read is `SagaRepository.get_all_open_sagas()` along the routing the repository was built
with (the control record's state, read by the handler per invocation); it is complete or it
raises (EnumerationError), and the exception is left to fail the invocation, so a sweep never
acts on a partial list and emits nothing when the read fails.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index import names
from saga_index.errors import SagaIndexError
from saga_index.repository import ReadResult, SagaRepository
from saga_index.sweeps.claims import RetryClaims
from saga_index.sweeps.events import EventPublisher, EventPublishError, SagaEvent, event_for
from saga_index.sweeps.rules import (
    FindingKind,
    HealthPolicy,
    OpenSagaSnapshot,
    RetryDecision,
    RetryPolicy,
    RuleResult,
    StuckPolicy,
    Unevaluable,
    open_saga_snapshot,
    prepare_retries,
    require_aware,
    stuck_sagas,
    workflow_health,
)
from saga_index.writer import utc_iso

log = logging.getLogger(__name__)

# The finding kinds each sweep reports (its metrics are emitted even when zero).
SWEEP_FINDING_KINDS: dict[str, tuple[FindingKind, ...]] = {
    names.JOB_WORKFLOW_HEALTH_SWEEP: (FindingKind.WORKFLOW_UNHEALTHY,),
    names.JOB_RETRY_FAILED_PREPARE: (
        FindingKind.PREPARE_RETRY_REQUESTED,
        FindingKind.PREPARE_RETRIES_EXHAUSTED,
    ),
    names.JOB_STUCK_SAGA_SWEEP: (FindingKind.STUCK,),
    names.JOB_AGENT_METRICS_SNAPSHOT: (),
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
            "phase": repository.phase.value,
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


def run_retry_failed_prepare(
    repository: SagaRepository,
    claims: RetryClaims,
    publisher: EventPublisher,
    *,
    now: datetime,
    policy: RetryPolicy | None = None,
) -> SweepReport:
    """Claim each due retry (and each exhaustion) with a conditional write, then publish.

    Claims come first so that a duplicate delivery cannot retry a saga twice; an event that
    cannot be published has its claim released, so the retry is not lost: the failed invocation
    is retried by Scheduler with the same scheduled time and claims it again.
    """
    now = require_aware(now)
    read = _read(names.JOB_RETRY_FAILED_PREPARE, repository)
    plan = prepare_retries(read.items, now, policy)
    report = _report(names.JOB_RETRY_FAILED_PREPARE, now, read)
    report.unevaluable = len(plan.unevaluable)
    _log_unevaluable(names.JOB_RETRY_FAILED_PREPARE, plan.unevaluable)
    claimed_at = report.now

    claimed: list[tuple[RetryDecision, SagaEvent]] = []
    claim_failures: list[str] = []
    for decision in (*plan.retries, *plan.exhausted):
        saga = decision.finding.saga
        try:
            if decision.finding.kind is FindingKind.PREPARE_RETRY_REQUESTED:
                won = claims.claim_retry(decision, claimed_at=claimed_at)
            else:
                won = claims.mark_exhausted(decision, at=claimed_at)
        except (ClientError, BotoCoreError) as err:
            # Keep going: what is claimed must still be published; fail loudly at the end.
            claim_failures.append(f"saga {saga.saga_id}: {type(err).__name__}: {err}")
            log.error("retry claim failed", extra={"sagaId": saga.saga_id, "error": str(err)})
            continue
        if won:
            claimed.append((decision, event_for(decision.finding, scheduled_time=claimed_at)))
        else:
            report.skipped += 1

    events = [event for _decision, event in claimed]
    for event in events:
        log.info(
            "saga finding",
            extra={
                "job": names.JOB_RETRY_FAILED_PREPARE,
                "kind": event.detail_type,
                "sagaId": event.saga_id,
            },
        )
    try:
        publisher.publish(events)
    except EventPublishError as err:
        failed = {id(f.event) for f in err.failed}
        _count(report, events, failed=failed)
        unreleased = _release(claims, [(d, e) for d, e in claimed if id(e) in failed], claimed_at)
        if unreleased:
            raise SweepIncompleteError(
                f"{err}; and these claims could not be released, so their retry waits for the "
                f"next backoff: {'; '.join(unreleased)}"
            ) from err
        raise
    _count(report, events, failed=set())
    if claim_failures:
        raise SweepIncompleteError(
            f"{len(claim_failures)} retry claim(s) failed (the other findings were published): "
            + "; ".join(claim_failures)
        )
    return report


def _release(
    claims: RetryClaims, unpublished: Sequence[tuple[RetryDecision, SagaEvent]], claimed_at: str
) -> list[str]:
    """Undo the claims whose events did not go out; return what could not be undone."""
    unreleased: list[str] = []
    for decision, _event in unpublished:
        saga = decision.finding.saga
        try:
            if decision.finding.kind is FindingKind.PREPARE_RETRY_REQUESTED:
                released = claims.release_retry(decision, claimed_at=claimed_at)
            else:
                released = claims.release_exhausted(decision, at=claimed_at)
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
        "unevaluable": report.unevaluable,
    }
    if report.snapshot is not None:
        age = report.snapshot.oldest_age
        out["openByState"] = dict(report.snapshot.counts_by_state)
        out["oldestSagaId"] = report.snapshot.oldest_saga_id
        out["oldestAgeSeconds"] = None if age is None else int(age.total_seconds())
    return out
