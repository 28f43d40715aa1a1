"""workflow-health-sweep's rule: open sagas whose workflow heartbeat is stale."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from saga_index.sweeps.clock import format_age, iso_utc, parse_timestamp, require_aware
from saga_index.sweeps.findings import Finding, FindingKind, RuleResult, SagaRef, Unevaluable
from saga_index.sweeps.policies import HealthPolicy
from saga_index.sweeps.rows import UPDATED_AT, WORKFLOW_HEARTBEAT_AT, open_sagas


def workflow_health(
    sagas: Iterable[Mapping[str, Any]], now: datetime, policy: HealthPolicy | None = None
) -> RuleResult:
    """Open sagas whose workflow heartbeat (workflowHeartbeatAt, else updatedAt) is older than
    the threshold -> SagaWorkflowUnhealthy."""
    now = require_aware(now)
    policy = policy or HealthPolicy()
    findings: list[Finding] = []
    unevaluable: list[Unevaluable] = []
    for item in open_sagas(sagas):
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
                        "heartbeatAt": iso_utc(heartbeat),
                        "ageSeconds": int(age.total_seconds()),
                        "thresholdSeconds": int(policy.threshold.total_seconds()),
                    },
                )
            )
    return RuleResult(tuple(findings), tuple(unevaluable))
