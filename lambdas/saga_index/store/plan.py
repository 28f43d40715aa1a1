"""The key plan: the only thing the store needs to know about layouts.

A plan answers three questions: the GSI4PK a writer stamps on a person's rows, the GSI4PKs a
by-person read queries (in order), and the GSI4PKs an enumeration reads, stage by stage (every
key of a stage may be read in parallel; a stage is read to its end before the next starts).

A table that is not moving has a Layout as its plan (saga_index.index.layout). During a layout
change the machinery provides one from the control record (saga_index.layout_change.record's
Routing); the store never reads the record itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from saga_index.index import Person


class KeyPlan(Protocol):
    def write_key(self, person: Person) -> str:
        """The GSI4PK a writer stamps on this person's saga rows now."""
        ...

    def read_keys(self, person: Person) -> tuple[str, ...]:
        """The GSI4PKs a by-person read queries, in order (one when every layout agrees)."""
        ...

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        """The GSI4PKs an enumeration reads, stage by stage."""
        ...


# A following writer asks for its plan on every write (a ControlProvider's `routing`, whose
# answer is at most T seconds old), so a long-lived writer follows a record change.
PlanSource = Callable[[], KeyPlan]


def enumeration_keys(plan: KeyPlan) -> tuple[str, ...]:
    """Every GSI4PK an enumeration of `plan` reads, once each, in reading order."""
    return tuple(dict.fromkeys(k for stage in plan.enumeration_stages() for k in stage))
