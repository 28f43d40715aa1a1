"""The key plan: the only thing the store needs to know about layouts.

A plan answers three questions: the GSI4PK a writer stamps on a person's rows, the GSI4PKs a
by-person read queries (in order), and the GSI4PKs an enumeration reads, stage by stage (every
key of a stage may be read in parallel; a stage is read to its end before the next starts).

A table that is not moving has a Layout as its plan (saga_index.index.layout). During a layout
change the machinery provides one from the control record (saga_index.layout_change.record's
Routing); the store never reads the record itself.

The sparse open-saga index (docs/control-contract.md, "The open-saga index") is a second,
optional part of a plan (`OpenIndexPlan`): the OpenSagaPK a writer stamps on an open saga now,
and the keys an enumeration of open sagas reads. A plan without it (a Layout, a table that never
used the open index) stamps none, leaves an open saga's key as it is, and enumerates open sagas
over GSI4; whatever the plan, a writer that closes a saga removes its OpenSagaPK.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class OpenIndexPlan(Protocol):
    def open_write_key(self, person: Person) -> str | None:
        """The OpenSagaPK a writer stamps on this person's OPEN saga rows now; None: none, and
        it removes any."""
        ...

    def open_enumeration_keys(self) -> tuple[str, ...] | None:
        """The OpenSagaPKs an enumeration of open sagas reads (one stage); None: GSI4's."""
        ...


# What a writer does with OpenSagaPK on one write: SET this key, REMOVE it, or leave it as is.
REMOVE_OPEN_KEY = None
KEEP_OPEN_KEY = ""


def open_key_for(plan: KeyPlan, person: Person, *, is_open: bool) -> str | None:
    """The OpenSagaPK to SET on a row written in an open state; REMOVE_OPEN_KEY (None) to
    remove it; KEEP_OPEN_KEY ("") to leave it as it is (an open saga under a plan that does not
    know the open index). A closed saga's key is always removed."""
    if not is_open:
        return REMOVE_OPEN_KEY
    if not isinstance(plan, OpenIndexPlan):
        return KEEP_OPEN_KEY
    return plan.open_write_key(person)


def open_enumeration_keys(plan: KeyPlan) -> tuple[str, ...] | None:
    """The open index keys an open-saga enumeration of `plan` reads; None: GSI4's."""
    return plan.open_enumeration_keys() if isinstance(plan, OpenIndexPlan) else None


# A following writer asks for its plan on every write (a ControlProvider's `routing`, whose
# answer is at most T seconds old), so a long-lived writer follows a record change.
PlanSource = Callable[[], KeyPlan]


def enumeration_keys(plan: KeyPlan) -> tuple[str, ...]:
    """Every GSI4PK an enumeration of `plan` reads, once each, in reading order."""
    return tuple(dict.fromkeys(k for stage in plan.enumeration_stages() for k in stage))
