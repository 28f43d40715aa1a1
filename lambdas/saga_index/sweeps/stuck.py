"""stuck-saga-sweep's rule: open sagas with no update for longer than their state allows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from saga_index.sweeps.clock import format_age, iso_utc, parse_timestamp, require_aware
from saga_index.sweeps.findings import Finding, FindingKind, RuleResult, SagaRef, Unevaluable
from saga_index.sweeps.policies import StuckPolicy
from saga_index.sweeps.rows import UPDATED_AT, open_sagas


def stuck_sagas(
    sagas: Iterable[Mapping[str, Any]], now: datetime, policy: StuckPolicy | None = None
) -> RuleResult:
    """Open sagas with no update (updatedAt) for longer than their state's threshold
    -> SagaStuck."""
    now = require_aware(now)
    policy = policy or StuckPolicy()
    findings: list[Finding] = []
    unevaluable: list[Unevaluable] = []
    for item in open_sagas(sagas):
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
                        "updatedAt": iso_utc(updated),
                        "ageSeconds": int(age.total_seconds()),
                        "thresholdSeconds": int(threshold.total_seconds()),
                    },
                )
            )
    return RuleResult(tuple(findings), tuple(unevaluable))
