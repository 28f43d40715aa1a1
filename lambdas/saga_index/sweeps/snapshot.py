"""agent-metrics-snapshot's rule: open sagas counted by state, and the age of the oldest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from saga_index.index import OPEN_STATES
from saga_index.sweeps.clock import parse_timestamp, require_aware
from saga_index.sweeps.findings import SagaRef, Unevaluable
from saga_index.sweeps.rows import OPENED_AT, open_sagas


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
    for item in open_sagas(sagas):
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
