"""HISTORY items as read: a transition, and whether a STATE write of it was confirmed
(docs/control-contract.md, "Transitions"). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from saga_index.index import TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.decode import (
    parse_history_flags,
    parse_history_item,
    parse_state_item,
)
from saga_index.layout_change.record.errors import (
    ControlItemInvalidError,
)
from saga_index.layout_change.record.items import HISTORY_ABANDONED, HISTORY_APPLIED
from saga_index.layout_change.record.open_index import OpenIndexState
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.store.dynamo import Expression, serialize

__all__ = [
    "HISTORY_ABANDONED",
    "HISTORY_APPLIED",
    "NOT_SETTLED",
    "HistoryEntry",
    "followed_state",
    "needs_lost_record_probe",
    "parse_history_entry",
    "restore_point",
]

# An intent may be replaced (taken over, or settled to what STATE holds) only while no STATE
# write confirmed it: an applied history item is never overwritten.
NOT_SETTLED: Final = Expression(
    f"attribute_not_exists(#{TABLE_PARTITION_KEY}) OR #{HISTORY_APPLIED} = :notApplied",
    names={f"#{TABLE_PARTITION_KEY}": TABLE_PARTITION_KEY, f"#{HISTORY_APPLIED}": HISTORY_APPLIED},
    slots=frozenset({":notApplied"}),
).given(serialize({":notApplied": False}))


@dataclass(frozen=True)
class HistoryEntry:
    """One HISTORY item: the transition, and whether a STATE write of it was confirmed."""

    transition: Transition
    applied: bool
    abandoned: bool = False

    @property
    def version(self) -> int:
        return self.transition.version

    @property
    def completes(self) -> bool:
        """A completing move (the state it left was moving, the new one is not): it stops
        reading a layout, which an unconfirmed intent must never make a restore do. Completing
        the open index's addition (`adding` -> `open`: reads switch to it) or its removal
        (`removing` -> `off`) counts too."""
        transition = self.transition
        if transition.changes_open_index:
            return (transition.previous_open_index.state, transition.open_index.state) in (
                (OpenIndexState.ADDING, OpenIndexState.OPEN),
                (OpenIndexState.REMOVING, OpenIndexState.OFF),
            )
        return transition.previous_moving_to is not None and transition.moving_to is None


def restore_point(newest_first: Sequence[HistoryEntry]) -> HistoryEntry | None:
    """The history item a missing STATE is rebuilt from, given the newest items first.

    Every item below the newest is applied (an intent for v+1 is written only over a STATE at
    v, after settling v's item). The newest, when still an intent, is undecided: its STATE
    write may have landed before the settle failed, or never. Follow it unless it completes a
    move: an opening move or an abort reads every layout the state before it read, so following
    it hides nothing either way; a completing intent is skipped for the state before it, which
    reads both layouts and writes the same key. An abandoned intent was never applied: skipped."""
    entries = [e for e in newest_first if not (e.abandoned and not e.applied)]
    if not entries:
        return None
    newest_first = entries
    newest = newest_first[0]
    if newest.applied or not newest.completes or len(newest_first) < 2:
        return newest
    return newest_first[1]


def followed_state(
    state_item: Mapping[str, Any] | None, newest_history: Sequence[Mapping[str, Any]]
) -> ControlState:
    """The one missing-record rule (docs/control-contract.md, "Missing or unreadable record"),
    from the items as stored: the STATE item when there is one; else the HISTORY item
    `restore_point` picks from the newest two (`newest_history`, newest first), as a MISSING
    state; else never migrated. The TypeScript package's `followedState` is the same rule,
    checked against the contract vectors."""
    if state_item is not None:
        return parse_state_item(state_item)
    point = restore_point([parse_history_entry(item) for item in newest_history[:2]])
    if point is None:
        return ControlState.never_migrated()
    return ControlState(transition=point.transition, condition=RecordCondition.MISSING)


def needs_lost_record_probe(state: ControlState) -> bool:
    """Whether a reader must probe the shard keys before it follows `state` (the lost-record
    rule, docs/control-contract.md, "A lost record"): there is no STATE item, and what it
    follows instead (never migrated, or the history item `restore_point` picked) reads only the
    legacy key. A STATE write whose answer was lost can leave its move's intent marked
    abandoned (or a writer can have followed a move history does not confirm); once STATE is
    gone, the history alone would then send every reader to an empty legacy key while the rows
    sit on shard keys. The TypeScript package's `needsLostRecordProbe` is the same rule,
    checked against the contract vectors."""
    if state.condition is RecordCondition.PRESENT:
        return False
    return state.moving_to is None and state.layout.shard_count is None


def parse_history_entry(item: Mapping[str, Any]) -> HistoryEntry:
    """A HISTORY item's transition, then its flags: the record's parts in their order."""
    transition = parse_history_item(item)
    try:
        flags = parse_history_flags(item)
    except ControlItemInvalidError as err:
        # Name the item: history is read many items at a time.
        raise ControlItemInvalidError(
            f"history item {item.get(TABLE_SORT_KEY)!r}: {err}",
            kind=err.kind,
            attribute=err.attribute,
        ) from err
    return HistoryEntry(
        transition=transition,
        applied=flags["applied"],
        abandoned=flags["abandoned"],
    )
