"""What a rule returns: findings about sagas, and the rows it could not evaluate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from saga_index.index import InvalidKeyError, keys, names


class FindingKind(StrEnum):
    """What a sweep found; the value is the EventBridge detail-type and the metric name."""

    WORKFLOW_UNHEALTHY = names.FINDING_WORKFLOW_UNHEALTHY
    PREPARE_RETRY_REQUESTED = names.FINDING_PREPARE_RETRY_REQUESTED
    PREPARE_RETRIES_EXHAUSTED = names.FINDING_PREPARE_RETRIES_EXHAUSTED
    STUCK = names.FINDING_STUCK


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
    """A row the rule could not judge (a missing or unparseable timestamp, a non-integer attempt
    count): never dropped silently nor guessed at, so the sweep logs it and counts it."""

    saga: SagaRef
    reason: str


@dataclass(frozen=True)
class RuleResult:
    findings: tuple[Finding, ...]
    unevaluable: tuple[Unevaluable, ...] = ()
