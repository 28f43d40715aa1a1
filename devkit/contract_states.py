"""The control states the contract vectors are built from (devkit.contract_vectors,
devkit.contract_records): each one as `phase set` builds it, through the transition rules."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from saga_index.index import Layout
from saga_index.layout_change.record import DEFAULT_TIMING, ControlState
from saga_index.layout_change.transitions import (
    plan_move,
    plan_open_index_move,
    transition_for,
)
from saga_index.store.dynamo import serialize

OPENED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DELAY = DEFAULT_TIMING.effective_delay
MS = timedelta(milliseconds=1)
S16, S32 = Layout.sharded(16), Layout.sharded(32)


# ---- states built as `phase set` builds them ---------------------------------------------------


def _move(
    previous: ControlState, phase: str, at: datetime, shards: int | None = None
) -> ControlState:
    plan = plan_move(previous, phase, shard_count=shards)
    return ControlState(
        transition=transition_for(
            plan,
            at,
            changed_by="ops@example",
            reason=f"to {phase}",
            effective_delay=DELAY,
            checks_passed=("backfill-verified",) if plan.completes else (),
        )
    )


def _open_index_move(
    previous: ControlState, state: str, at: datetime, shards: int | None = None
) -> ControlState:
    plan = plan_open_index_move(previous, state, shard_count=shards)
    return ControlState(
        transition=transition_for(
            plan,
            at,
            changed_by="ops@example",
            reason=f"open index to {state}",
            effective_delay=DELAY,
            checks_passed=("open-index-parity",) if plan.completes else (),
        )
    )


# A step `open-index:<state>` moves the open index (record/open_index.py), any other the layout.
OPEN_INDEX_STEP = "open-index:"


def path_through(
    *steps: tuple[str, float, int | None], start: ControlState | None = None
) -> ControlState:
    """The state after `steps` (phase, seconds after OPENED, --shards) from never migrated
    (or `start`); a phase spelled `open-index:<state>` moves the open index instead."""
    state = ControlState.never_migrated() if start is None else start
    for phase, seconds, shards in steps:
        at = OPENED + timedelta(seconds=seconds)
        if phase.startswith(OPEN_INDEX_STEP):
            state = _open_index_move(state, phase.removeprefix(OPEN_INDEX_STEP), at, shards)
        else:
            state = _move(state, phase, at, shards)
    return state


_LATE = 3600.0  # a step taken long after the one before it became effective
STATES: tuple[tuple[str, Callable[[], ControlState]], ...] = (
    ("legacy after a rollback", lambda: path_through(
        ("migrating", 0, 16), ("rolling-back", _LATE, None), ("legacy", 2 * _LATE, None))),
    ("migrating(16)", lambda: path_through(("migrating", 0, 16))),
    ("sharded(16)", lambda: path_through(("migrating", 0, 16), ("sharded", _LATE, None))),
    ("rolling-back(16) from sharded", lambda: path_through(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("rolling-back", 2 * _LATE, None))),
    ("resharding 16 -> 32 (split)", lambda: path_through(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 32))),
    ("resharding 32 -> 16 (merge)", lambda: path_through(
        ("migrating", 0, 32), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 16))),
    ("abort: rolling-back 10 s after migrating, before its effectiveAt", lambda: path_through(
        ("migrating", 0, 16), ("rolling-back", 10, None))),
    ("abort: rolling-back after migrating became effective", lambda: path_through(
        ("migrating", 0, 16), ("rolling-back", _LATE, None))),
    ("abort: migrating again 5 s after a rolling-back that was effective", lambda: path_through(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("rolling-back", 2 * _LATE, None),
        ("migrating", 2 * _LATE + 5, None))),
    ("abort: resharding 32 -> 16 5 s after a split, before its effectiveAt", lambda: path_through(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 32),
        ("resharding", 2 * _LATE + 5, 16))),
)  # fmt: skip


_SHARDED = (("migrating", 0, 16), ("sharded", _LATE, None))
_ADDING = (*_SHARDED, ("open-index:adding", 2 * _LATE, None))
_OPEN = (*_ADDING, ("open-index:open", 3 * _LATE, None))
_REMOVING = (*_ADDING, ("open-index:removing", 3 * _LATE, None))
# The open index's states (devkit.contract_vectors' `openIndex`), each as `open-index set`
# builds it.
OPEN_INDEX_STATES: tuple[tuple[str, Callable[[], ControlState]], ...] = (
    ("sharded(16), open index adding(16)", lambda: path_through(*_ADDING)),
    ("legacy, open index adding(16) (the default N)", lambda: path_through(
        ("open-index:adding", 0, None))),
    ("sharded(16), open index adding(8) (--shards 8)", lambda: path_through(
        *_SHARDED, ("open-index:adding", 2 * _LATE, 8))),
    ("sharded(16), open index open(16)", lambda: path_through(*_OPEN)),
    ("sharded(16), open index removing(16)", lambda: path_through(*_REMOVING)),
    ("sharded(16), open index removing 10 s after adding, before its effectiveAt",
     lambda: path_through(*_ADDING[:-1], ("open-index:adding", 2 * _LATE, None),
                          ("open-index:removing", 2 * _LATE + 10, None))),
    ("sharded(16), open index off after a rollback", lambda: path_through(
        *_REMOVING, ("open-index:off", 4 * _LATE, None))),
    ("sharded(16), open index adding again (the rollback aborted)", lambda: path_through(
        *_REMOVING, ("open-index:adding", 3 * _LATE + 5, None))),
    ("open index open(16), then resharding 16 -> 32", lambda: path_through(
        *_OPEN, ("resharding", 4 * _LATE, 32))),
)  # fmt: skip


def dynamo_json(item: dict[str, Any]) -> dict[str, Any]:
    """A Python item as DynamoDB JSON, the form the vectors hold."""
    wire: dict[str, Any] = serialize(item)
    return wire
