"""Planting a control record state directly (any state, `resharding` included, and the MISSING
condition), for tests of the code that FOLLOWS the record. Transitions themselves are tested with
the executor in tests/component/test_control_store.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.encode import state_item
from saga_index.layout_change.record.items import state_key
from saga_index.layout_change.record.open_index import OpenIndex, OpenIndexState
from saga_index.layout_change.record.state import ControlState, Transition
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import DEFAULT_TIMING
from saga_index.store.dynamo.codec import serialize

CHANGED_AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def transition(
    current: Layout,
    moving_to: Layout | None = None,
    *,
    version: int = 1,
    previous: tuple[Layout, Layout | None] | None = None,
) -> Transition:
    previous_layout, previous_moving_to = previous or _previous_of(current, moving_to)
    return Transition(
        version=version,
        layout=current,
        moving_to=moving_to,
        previous_layout=previous_layout,
        previous_moving_to=previous_moving_to,
        changed_at=CHANGED_AT,
        changed_by="test",
        reason="planted by a test",
        effective_at=CHANGED_AT + DEFAULT_TIMING.effective_delay,
    )


def _previous_of(current: Layout, moving_to: Layout | None) -> tuple[Layout, Layout | None]:
    """The state an allowed transition comes from (resharding: from its sharded source)."""
    if moving_to is not None:
        return (current, None) if current.is_sharded else (LEGACY, None)
    if current.is_sharded:
        return (LEGACY, current)
    return (Layout.sharded(16), LEGACY)


def seed_state(
    client: Any,
    table_name: str,
    current: Layout,
    moving_to: Layout | None = None,
    *,
    version: int = 1,
    previous: tuple[Layout, Layout | None] | None = None,
) -> ControlState:
    """Write (overwrite) the STATE item and its HISTORY item: the record names this state."""
    change = transition(current, moving_to, version=version, previous=previous)
    state = ControlState(transition=change)
    store = ControlStore(client, table_name)
    client.put_item(TableName=table_name, Item=serialize(state_item(state)))
    store.put_history(change)
    return state


# The open index state each seeded one comes from (open_index_rules' allowed moves).
_OPEN_INDEX_FROM = {
    OpenIndexState.OPEN: OpenIndexState.ADDING,
    OpenIndexState.ADDING: OpenIndexState.OFF,
    OpenIndexState.REMOVING: OpenIndexState.ADDING,
}


def seed_open_index(
    client: Any,
    table_name: str,
    layout: Layout,
    shard_count: int,
    *,
    version: int = 2,
    state: OpenIndexState = OpenIndexState.OPEN,
) -> ControlState:
    """Write the STATE item and its HISTORY item of `open-index set <state>` on a settled
    `layout` (effectiveAt long past: settled): the open index is `state` (default `open`, from
    `adding`) with N = `shard_count`."""
    before = _OPEN_INDEX_FROM[state]
    before_n = None if before is OpenIndexState.OFF else shard_count
    change = replace(
        transition(layout, version=version, previous=(layout, None)),
        open_index=OpenIndex(state, shard_count),
        previous_open_index=OpenIndex(before, before_n),
    )
    seeded = ControlState(transition=change)
    client.put_item(TableName=table_name, Item=serialize(state_item(seeded)))
    ControlStore(client, table_name).put_history(change)
    return seeded


def delete_state(client: Any, table_name: str) -> None:
    """Delete the STATE item, leaving its history: the record is then MISSING."""
    client.delete_item(TableName=table_name, Key=serialize(state_key()))
