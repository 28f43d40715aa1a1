"""The routing rule, the same for every state (docs/control-contract.md, "Routing").

  writers  stamp the state's PRIOR write layout (priorWriteLayout) until its effectiveAt, by
           the writer's own wall clock, and the TARGET layout's key (the layout being moved to,
           else the current one) from effectiveAt on
  readers  read the SOURCE (current) layout's partitions first, then the target's, and
           de-duplicate on the table key (PK, SK); each distinct GSI4PK is read once

The open-saga index follows the same switch (record/open_index.py): writers stamp OpenSagaPK on
open sagas as the previous state did until effectiveAt, as the new state does from then on;
enumerations of open sagas read the open index's keys only while the state is `open`, else
GSI4's as above. By-person reads always read GSI4.

Why writers wait: a process that has not re-read the record since the move opened still reads
only the layouts of the state before it. Until effectiveAt such a process may exist (its cache
is at most T + grace old, plus the in-flight margin), so writers keep stamping the layout that
state's writers stamped, which every live reader reads. From effectiveAt on every process reads
the new state's source and target, and writers may stamp the target.

Why source first: a row moves when a writer changes its GSI4PK, and it only ever moves from the
source layout's key to the target's. A read that finishes the key a row moves away from before
it reads the key the row moves to narrows the window in which it misses that row. It does not
close it: GSI reads are eventually consistent, and DynamoDB propagates a GSI key change as a
delete under the old key and a put under the new one, asynchronously and with no promise that
both become visible together. A read can therefore miss a row that is moving during it; the
next read (the next sweep, the next page load) sees it on one key or the other. The drift
guard's every-run checks and the backfill's read-back query the index too (the read-back
re-reads a row from the base table before it counts it as left behind); the drift guard's
periodic scan reads the base table, which has no such window (docs/control-contract.md).

Enumerations are read in stages: every key of a stage may be read in parallel, and a stage is
read to its end before the next starts. A key both layouts name (only a re-shard has such keys:
sharded(N) -> sharded(2N) keeps keys 0..N-1) sits in the stage that keeps the rule: in a split
rows only LEAVE a shared key (to key + N), so it is read with the source; in a merge rows only
ENTER it (from key + M), so it is read with the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from saga_index.index import InvalidInputError, Layout, Person, validate_shard_count
from saga_index.layout_change.record.errors import ControlRecordInvalidError
from saga_index.layout_change.record.open_index import OpenIndex
from saga_index.layout_change.record.phase import Phase, layouts_for_phase, phase_of
from saga_index.layout_change.record.state import ControlState, RecordCondition
from saga_index.layout_change.record.timing import utc_now


@dataclass(frozen=True, init=False)
class Routing:
    """Where a state's writers write and its readers read, at one moment: the key plan the
    store reads through (saga_index.store.plan). `writes` is the layout writers stamp now
    (the target unless given; routing_for gives the prior layout before effectiveAt)."""

    source: Layout
    target: Layout
    writes: Layout
    # The open-saga index (record/open_index.py): the one whose OpenSagaPK writers stamp on the
    # open sagas they write now (None: none, and they remove it), and the one enumerations of
    # open sagas read (None: they read GSI4's keys, `enumeration_stages`).
    open_writes: OpenIndex | None
    open_reads: OpenIndex | None

    def __init__(
        self,
        source: Layout,
        target: Layout,
        writes: Layout | None = None,
        *,
        open_writes: OpenIndex | None = None,
        open_reads: OpenIndex | None = None,
    ) -> None:
        if open_writes is not None and not open_writes.stamps:
            raise InvalidInputError(f"writers stamp no OpenSagaPK in state {open_writes}")
        if open_reads is not None and not open_reads.reads:
            raise InvalidInputError(f"readers do not read the open index in state {open_reads}")
        object.__setattr__(self, "open_writes", open_writes)
        object.__setattr__(self, "open_reads", open_reads)
        chosen = target if writes is None else writes
        if chosen not in (source, target):
            raise InvalidInputError(
                f"writers must stamp the source ({source}) or the target ({target}) layout, "
                f"not {chosen}: readers of this routing would not see the rows"
            )
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "writes", chosen)

    @classmethod
    def between(
        cls,
        source: Layout,
        target: Layout | None = None,
        *,
        writes: Layout | None = None,
        open_writes: OpenIndex | None = None,
        open_reads: OpenIndex | None = None,
    ) -> Routing:
        return cls(source, target or source, writes, open_writes=open_writes, open_reads=open_reads)

    @classmethod
    def for_phase(cls, phase: Phase | str, shard_count: int) -> Routing:
        """The routing a process in `phase` with N = `shard_count` follows (the CLI's read-only
        --phase/--shards overrides, tests, the demo's fixed readers)."""
        validate_shard_count(shard_count)
        return cls.between(*layouts_for_phase(phase, shard_count))

    @property
    def moving(self) -> bool:
        return self.source != self.target

    @property
    def phase(self) -> Phase:
        """The name of the state this routing follows (`resharding` included)."""
        return phase_of(self.source, self.target if self.moving else None)

    @property
    def switched(self) -> bool:
        """True once writers stamp the target (always, when not moving)."""
        return self.writes == self.target

    def write_key(self, person: str | Person) -> str:
        """The GSI4PK a writer stamps on this person's saga rows now."""
        return self.writes.key_for(person)

    def read_keys(self, person: str | Person) -> tuple[str, ...]:
        """The GSI4PKs a by-person read queries, in order (one request when both agree)."""
        checked = Person.of(person)
        return _distinct((self.source.key_for(checked), self.target.key_for(checked)))

    def enumeration_stages(self) -> tuple[tuple[str, ...], ...]:
        """The GSI4PKs an enumeration reads, stage by stage (see the module docstring)."""
        source_keys = self.source.partitions()
        if not self.moving:
            return (source_keys,)
        target_keys = self.target.partitions()
        shared = set(source_keys) & set(target_keys)
        if shared and not _target_is_finer(self.source, self.target):
            first = tuple(k for k in source_keys if k not in shared)
        else:
            first = source_keys
        second = tuple(k for k in target_keys if k not in first)
        return tuple(stage for stage in (first, second) if stage)

    def enumeration_keys(self) -> tuple[str, ...]:
        """Every GSI4PK an enumeration reads, once each, in reading order."""
        return tuple(k for stage in self.enumeration_stages() for k in stage)

    # ---- the open-saga index (saga_index.store.plan's OpenKeyPlan) ----------------------------

    def open_write_key(self, person: str | Person) -> str | None:
        """The OpenSagaPK a writer stamps on this person's OPEN saga rows now; None: it stamps
        none and removes any (a closed saga never carries one, whatever the state)."""
        return None if self.open_writes is None else self.open_writes.key_for(person)

    def open_enumeration_keys(self) -> tuple[str, ...] | None:
        """The OpenSagaPKs an enumeration of open sagas reads (one stage: rows never move
        between them); None: it reads GSI4 (`enumeration_stages`) and drops closed sagas."""
        return None if self.open_reads is None else self.open_reads.partitions()


def routing_for(state: ControlState, now: datetime | None = None) -> Routing:
    """The routing of a state for a process whose wall clock reads `now` (a timezone-aware
    datetime; None: this process's clock now): writers stamp the prior write layout while
    `now` < effectiveAt, the target from then on.

    A MISSING record routes over every layout its newest history item names: writers per that
    item (its prior write layout until its effectiveAt, then the state it resulted in), readers
    over both sides of that move (source first), so a deleted record can never hide rows that
    are still on the old side."""
    at = _aware(utc_now() if now is None else now)
    reads = state.open_index if state.open_index.reads else None
    if state.condition is not RecordCondition.MISSING or state.transition is None:
        return Routing.between(
            state.layout,
            state.moving_to,
            writes=state.writes_at(at),
            open_writes=state.open_writes_at(at),
            open_reads=reads,
        )
    transition = state.transition
    target = state.target
    named = (
        transition.layout,
        transition.moving_to,
        transition.previous_layout,
        transition.previous_moving_to,
    )
    others = _distinct(tuple(str(x) for x in named if x is not None and x != target))
    sources = [x for x in named if x is not None and str(x) in others]
    if len(others) > 1:
        raise ControlRecordInvalidError(
            f"history version {transition.version} names more than two layouts "
            f"({', '.join(others)} and {target}): no transition produces that"
        )
    return Routing.between(
        sources[0] if sources else target,
        target,
        writes=transition.writes_at(at),
        open_writes=transition.open_writes_at(at),
        open_reads=reads,
    )


def resolve_routing(
    routing: Routing | None, phase: Phase | str | None, shard_count: int
) -> Routing:
    """`routing` as given, or the one a process in `phase` with N = `shard_count` follows
    (the checks' constructors take either). Exactly one of the two must be given."""
    if routing is not None and phase is None:
        return routing
    if phase is not None and routing is None:
        return Routing.for_phase(phase, shard_count)
    raise InvalidInputError("give exactly one of routing or phase (with shard_count)")


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(
            f"the wall clock must be timezone-aware (UTC), got the naive datetime {now!r}"
        )
    return now


def _target_is_finer(source: Layout, target: Layout) -> bool:
    return (target.shard_count or 0) > (source.shard_count or 0)


def _distinct(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))
