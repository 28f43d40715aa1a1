"""retry-failed-prepare's outbox: claims whose event is not known to be published, and which of
them are old enough to publish again."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from saga_index.sweeps.clock import parse_timestamp, require_aware
from saga_index.sweeps.findings import SagaRef, Unevaluable
from saga_index.sweeps.policies import RetryPolicy
from saga_index.sweeps.rows import (
    PREPARE_CLAIM_EVENT,
    PREPARE_CLAIM_PUBLISHED_AT,
    PREPARE_CLAIM_TOKEN,
    PREPARE_CLAIMED_AT,
)


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
