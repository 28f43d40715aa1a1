"""What happens in one virtual second of the traffic: the event kinds a plan holds."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from devkit.seed import EPOCH, SagaRecord
from saga_index.store import utc_iso


@dataclass(frozen=True)
class ListPageLoad:
    manager: str
    persons: tuple[str, ...]
    kind: str = "list-page"


@dataclass(frozen=True)
class Sweep:
    name: str
    kind: str = "sweep"


@dataclass(frozen=True)
class Transition:
    saga_id: str
    person_id: str
    to_state: str
    kind: str = "transition"


@dataclass(frozen=True)
class NewSaga:
    number: int
    person_id: str
    manager_id: str
    size: int
    salt: int


@dataclass(frozen=True)
class CohortOpen:
    sagas: tuple[NewSaga, ...]
    kind: str = "cohort"


@dataclass(frozen=True)
class InboundMessage:
    person_id: str
    reads: int
    kind: str = "inbound"


Event = ListPageLoad | Sweep | Transition | CohortOpen | InboundMessage


def new_saga_record(
    saga: NewSaga, run_label: str, second: int, time_base: datetime = EPOCH
) -> SagaRecord:
    """The row a cohort opens; ids carry the run label so two replays never collide."""
    opened = utc_iso(time_base + timedelta(seconds=second))
    return SagaRecord(
        saga_id=f"rs_{run_label}_cohort_{saga.number:06d}",
        person_id=saga.person_id,
        lease_id=f"lease_{run_label}_cohort_{saga.number:06d}",
        manager_id=saga.manager_id,
        opened_at=opened,
        state="OPENED",
        size=saga.size,
        salt=saga.salt,
    )
