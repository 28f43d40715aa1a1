"""The control state as values: what one read of the record says (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from saga_index.index import LEGACY, InvalidInputError, Layout
from saga_index.layout_change.record.open_index import (
    OPEN_INDEX_OFF,
    OpenIndex,
    check_one_dimension,
)
from saga_index.layout_change.record.phase import Phase, phase_of


class RecordCondition(StrEnum):
    """How the state was obtained (docs/control-contract.md, "Missing or unreadable")."""

    PRESENT = "present"  # the STATE item
    NEVER_MIGRATED = "never-migrated"  # no STATE and no HISTORY: legacy, version 0
    MISSING = "missing"  # no STATE but HISTORY exists: deleted; the drift guard pages


class BackfillDirection(StrEnum):
    FORWARD = "forward"  # rows move toward the state's target layout
    ROLLBACK = "rollback"  # rows move back to the legacy layout while rolling back

    @classmethod
    def parse(cls, value: object) -> BackfillDirection:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InvalidInputError(
                f"direction must be 'forward' or 'rollback'; got {value!r}"
            ) from None


class BackfillKind(StrEnum):
    """What a backfill run changes on the saga rows; the one lease is held by one kind at a time.

    layout      GSI4PK, from the record's source layout to its target (the layout move)
    open-index  OpenSagaPK: stamped on open sagas (forward), removed (rollback)
    """

    LAYOUT = "layout"
    OPEN_INDEX = "open-index"

    @classmethod
    def parse(cls, value: object) -> BackfillKind:
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InvalidInputError(
                f"backfill kind must be 'layout' or 'open-index'; got {value!r}"
            ) from None


def check_version(version: int) -> None:
    if version < 1:
        raise InvalidInputError(f"a transition's version starts at 1, got {version}")


def check_prior_write(prior_write: Layout | None, layout: Layout, moving_to: Layout | None) -> None:
    """The layout writers stamp until effectiveAt must be one this state's readers read."""
    if prior_write is not None and prior_write not in (layout, moving_to):
        raise InvalidInputError(
            f"the prior write layout {prior_write} is neither the layout "
            f"({layout}) nor movingTo ({moving_to}): readers of this state would "
            "not see what its writers stamp"
        )


def check_open_index_move(transition: Transition) -> None:
    """A transition changes the layout or the open index, never both."""
    check_one_dimension(
        (transition.layout, transition.moving_to),
        (transition.previous_layout, transition.previous_moving_to),
        transition.open_index != transition.previous_open_index,
    )


@dataclass(frozen=True)
class Transition:
    """One layout transition: the STATE item carries the newest, a HISTORY item each one."""

    version: int
    layout: Layout
    moving_to: Layout | None
    previous_layout: Layout
    previous_moving_to: Layout | None
    changed_at: datetime
    changed_by: str
    reason: str
    effective_at: datetime
    checks_passed: tuple[str, ...] = ()
    checks_forced: tuple[str, ...] = ()
    # The layout writers stamp until effective_at; None means `layout` (the source when moving,
    # else the current layout), which is also what an item written before the writers' switch
    # existed implies. transitions.rules.prior_write_for computes it.
    prior_write: Layout | None = None
    # The open-saga index's state after this transition and before it (record/open_index.py):
    # a transition changes one of the two dimensions, never both.
    open_index: OpenIndex = OPEN_INDEX_OFF
    previous_open_index: OpenIndex = OPEN_INDEX_OFF

    def __post_init__(self) -> None:
        check_version(self.version)
        phase_of(self.layout, self.moving_to)
        phase_of(self.previous_layout, self.previous_moving_to)
        check_prior_write(self.prior_write, self.layout, self.moving_to)
        check_open_index_move(self)
        if self.prior_write == self.layout:
            # One spelling for "the layout", so a transition equals the same one read back.
            object.__setattr__(self, "prior_write", None)

    @property
    def write_layout(self) -> Layout:
        """The layout writers stamp from effective_at on: movingTo, else the current one."""
        return self.moving_to or self.layout

    @property
    def prior_write_layout(self) -> Layout:
        """The layout writers stamp until effective_at."""
        return self.prior_write or self.layout

    def writes_at(self, now: datetime) -> Layout:
        """The layout a writer whose wall clock reads `now` stamps under this transition."""
        return self.prior_write_layout if now < self.effective_at else self.write_layout

    def open_writes_at(self, now: datetime) -> OpenIndex | None:
        """The open index whose OpenSagaPK a writer whose wall clock reads `now` stamps on an
        open saga under this transition; None: it stamps none (and removes any).

        Until effectiveAt writers do what the state before stamped, as for the layout: a
        process still following that state reads neither way from the open index unless that
        state was `open`, whose writers stamp too."""
        followed = self.previous_open_index if now < self.effective_at else self.open_index
        return followed if followed.stamps else None

    @property
    def changes_open_index(self) -> bool:
        return self.open_index != self.previous_open_index

    @property
    def phase(self) -> Phase:
        return phase_of(self.layout, self.moving_to)

    @property
    def previous_phase(self) -> Phase:
        return phase_of(self.previous_layout, self.previous_moving_to)

    @property
    def forced(self) -> bool:
        return bool(self.checks_forced)


@dataclass(frozen=True)
class Lease:
    """The backfill's run lock. Live while now < expires_at; the token identifies the run."""

    holder: str
    token: str
    direction: BackfillDirection
    acquired_at: datetime
    heartbeat_at: datetime
    expires_at: datetime
    state_version: int
    # The pace the run chose and why, as its last heartbeat wrote it (None: not reported yet).
    pace: str | None = None
    # What the run changes (`leaseKind`; absent on the item reads as the layout).
    kind: BackfillKind = BackfillKind.LAYOUT

    def __post_init__(self) -> None:
        # Read from the item: a string, or None when `leaseKind` is absent (a layout run's).
        kind = BackfillKind.LAYOUT if self.kind is None else BackfillKind.parse(self.kind)
        object.__setattr__(self, "kind", kind)

    def is_live(self, now: datetime) -> bool:
        return now < self.expires_at


@dataclass(frozen=True)
class BackfillCompletion:
    """The last backfill run that released its lease with a result."""

    direction: BackfillDirection
    source: Layout
    target: Layout
    state_version: int
    started_at: datetime
    completed_at: datetime
    scanned: int
    restamped: int
    anomalies: int
    complete: bool
    verified: bool
    holder: str
    lease_token: str


@dataclass(frozen=True)
class ControlState:
    """The state a reader or writer follows. `transition` is None only when never migrated."""

    transition: Transition | None
    condition: RecordCondition = RecordCondition.PRESENT
    lease: Lease | None = None
    backfill_max_writes_per_second: float | None = None
    backfill_paused: bool = False
    # The fencing epoch of the latest lease taken (None: no lease since the record was written).
    lease_epoch: int | None = None
    last_backfill: BackfillCompletion | None = field(default=None)

    @classmethod
    def never_migrated(cls) -> ControlState:
        return cls(transition=None, condition=RecordCondition.NEVER_MIGRATED)

    @property
    def layout(self) -> Layout:
        return LEGACY if self.transition is None else self.transition.layout

    @property
    def moving_to(self) -> Layout | None:
        return None if self.transition is None else self.transition.moving_to

    @property
    def version(self) -> int:
        return 0 if self.transition is None else self.transition.version

    @property
    def phase(self) -> Phase:
        return phase_of(self.layout, self.moving_to)

    @property
    def target(self) -> Layout:
        """The layout writers stamp from effectiveAt on: the one being moved to, else the
        current one (before effectiveAt they stamp `prior_write`; see `writes_at`)."""
        return self.moving_to or self.layout

    @property
    def prior_write(self) -> Layout:
        """The layout writers stamp until effectiveAt (legacy when never migrated)."""
        return LEGACY if self.transition is None else self.transition.prior_write_layout

    def writes_at(self, now: datetime) -> Layout:
        """The layout a writer whose wall clock reads `now` stamps in this state."""
        return LEGACY if self.transition is None else self.transition.writes_at(now)

    @property
    def shard_count(self) -> int | None:
        return self.layout.shard_count

    @property
    def effective_at(self) -> datetime | None:
        return None if self.transition is None else self.transition.effective_at

    @property
    def open_index(self) -> OpenIndex:
        """The open-saga index's state (off when never migrated)."""
        return OPEN_INDEX_OFF if self.transition is None else self.transition.open_index

    def open_writes_at(self, now: datetime) -> OpenIndex | None:
        """The open index writers stamp on open sagas at `now` (None: none, remove it)."""
        return None if self.transition is None else self.transition.open_writes_at(now)
