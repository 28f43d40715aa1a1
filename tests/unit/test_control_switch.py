"""The writers' switch at effectiveAt (docs/control-contract.md, "Routing"): every move opens
with writers still stamping what the state before it stamped, and switches them to the target
at its effectiveAt by the writer's wall clock. Pure: no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import history_item, state_item
from saga_index.layout_change.record.errors import ControlRecordInvalidError
from saga_index.layout_change.record.provider import ControlProvider, FixedStateSource
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.layout_change.record.timing import DEFAULT_TIMING
from saga_index.layout_change.transitions.rules import plan_move, transition_for

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DELAY = DEFAULT_TIMING.effective_delay
S16, S32 = Layout.sharded(16), Layout.sharded(32)
P = "p-1"  # shard 14 of 16, 30 of 32
SHARD14, SHARD30 = keys.shard_gsi4pk_for_person(P, 16), keys.shard_gsi4pk_for_person(P, 32)


def _next(previous: ControlState, phase: str, at: datetime, **kwargs: Any) -> ControlState:
    """The state `phase set` writes at `at` (the executor's construction, without a store)."""
    move = plan_move(previous, phase, **kwargs)
    return ControlState(
        transition=transition_for(move, at, changed_by="op", reason="test", effective_delay=DELAY)
    )


def _writes(state: ControlState, at: datetime) -> str:
    return routing_for(state, at).write_key(P)


def test_given_a_move_opened_less_than_effective_at_ago_then_writers_stamp_the_source() -> None:
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    effective_at = AT + DELAY

    assert migrating.prior_write == LEGACY
    assert _writes(migrating, AT) == keys.LEGACY_GSI4PK
    assert _writes(migrating, effective_at - timedelta(milliseconds=1)) == keys.LEGACY_GSI4PK
    assert _writes(migrating, effective_at) == SHARD14
    # Readers are dual from the moment they read the state, before and after the switch.
    assert routing_for(migrating, AT).read_keys(P) == (keys.LEGACY_GSI4PK, SHARD14)
    assert routing_for(migrating, effective_at).read_keys(P) == (keys.LEGACY_GSI4PK, SHARD14)


def test_given_sharded_then_a_rollback_or_a_reshard_keeps_stamping_the_shard_until_it_is_due() -> (
    None
):
    sharded = _next(
        _next(ControlState.never_migrated(), "migrating", AT, shard_count=16),
        "sharded",
        AT + 2 * DELAY,
    )
    later = AT + 10 * DELAY
    rolling_back = _next(sharded, "rolling-back", later)
    resharding = _next(sharded, "resharding", later, shard_count=32)

    assert sharded.prior_write == S16  # completed after effectiveAt: prior = its write layout
    assert _writes(rolling_back, later + DELAY / 2) == SHARD14
    assert _writes(rolling_back, later + DELAY) == keys.LEGACY_GSI4PK
    assert _writes(resharding, later + DELAY / 2) == SHARD14
    assert _writes(resharding, later + DELAY) == SHARD30


def test_given_an_abort_before_the_move_was_due_then_writers_never_leave_legacy() -> None:
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    aborted_at = AT + timedelta(seconds=10)
    rolling_back = _next(migrating, "rolling-back", aborted_at)

    assert rolling_back.prior_write == LEGACY
    for seconds in (10, 30, 74, 75, 84, 85, 200):
        # A still-legacy reader (never refreshed since before migrating) reads RenewalSaga only.
        assert _writes(rolling_back, AT + timedelta(seconds=seconds)) == keys.LEGACY_GSI4PK


def test_given_an_abort_after_the_move_was_due_then_writers_keep_the_shard_until_its_own() -> None:
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    aborted_at = AT + DELAY + timedelta(seconds=1)
    rolling_back = _next(migrating, "rolling-back", aborted_at)

    assert rolling_back.prior_write == S16
    assert _writes(rolling_back, aborted_at + DELAY - timedelta(seconds=1)) == SHARD14
    assert _writes(rolling_back, aborted_at + DELAY) == keys.LEGACY_GSI4PK


def test_given_a_reshard_aborted_before_it_was_due_then_writers_stay_on_the_old_count() -> None:
    sharded = ControlState(
        transition=Transition(1, S16, None, LEGACY, S16, AT, "op", "t", AT + DELAY)
    )
    later = AT + 2 * DELAY
    split = _next(sharded, "resharding", later, shard_count=32)
    abort = _next(split, "resharding", later + timedelta(seconds=5), shard_count=16)

    assert (abort.layout, abort.moving_to, abort.prior_write) == (S32, S16, S16)
    assert _writes(abort, later + 3 * DELAY) == SHARD14


def test_given_a_completing_move_forced_before_it_was_due_then_writers_stamp_what_it_reads() -> (
    None
):
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    forced = _next(migrating, "sharded", AT + timedelta(seconds=5))

    # The previous prior (legacy) is a layout `sharded` no longer reads: stamp the shard at once.
    assert forced.prior_write == S16
    assert _writes(forced, AT + timedelta(seconds=5)) == SHARD14


def test_given_the_pair_then_it_is_written_on_state_and_history_and_read_back() -> None:
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    aborted = _next(migrating, "rolling-back", AT + timedelta(seconds=10))
    resharding = _next(
        ControlState(transition=Transition(1, S16, None, LEGACY, S16, AT, "op", "t", AT + DELAY)),
        "resharding",
        AT + 2 * DELAY,
        shard_count=32,
    )
    assert aborted.transition is not None
    assert resharding.transition is not None

    assert state_item(aborted)["priorWriteLayout"] == "legacy"
    assert "priorWriteShardCount" not in state_item(aborted)
    assert history_item(resharding.transition)["priorWriteLayout"] == "sharded"
    assert history_item(resharding.transition)["priorWriteShardCount"] == 16
    assert parse_state_item(state_item(aborted)) == aborted
    assert parse_history_item(history_item(aborted.transition)) == aborted.transition


@pytest.mark.parametrize(
    ("layout", "moving_to"), [(LEGACY, S16), (S16, LEGACY), (S16, S32), (S16, None), (LEGACY, None)]
)
def test_given_an_item_written_before_the_switch_then_its_prior_is_the_source(
    layout: Layout, moving_to: Layout | None
) -> None:
    state = ControlState(
        transition=Transition(2, layout, moving_to, LEGACY, None, AT, "op", "t", AT + DELAY)
    )
    item = state_item(state)
    del item["priorWriteLayout"]
    item.pop("priorWriteShardCount", None)

    parsed = parse_state_item(item)

    assert parsed.prior_write == layout
    assert routing_for(parsed, AT).writes == layout
    assert routing_for(parsed, AT + DELAY).writes == (moving_to or layout)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"priorWriteLayout": "hashed"}, "priorWriteLayout must be 'legacy' or 'sharded'"),
        ({"priorWriteLayout": "sharded"}, "priorWriteShardCount must be a number"),
        (
            {"priorWriteLayout": "sharded", "priorWriteShardCount": 12},
            "priorWriteShardCount: shard count must be a power of two",
        ),
        (
            {"priorWriteLayout": "legacy", "priorWriteShardCount": 16},
            "priorWriteShardCount must be absent for a legacy layout",
        ),
        ({"priorWriteLayout": None, "priorWriteShardCount": 16}, "priorWriteShardCount is set"),
        ({"priorWriteLayout": 1}, "priorWriteLayout must be 'legacy' or 'sharded'"),
        (
            {"priorWriteLayout": "sharded", "priorWriteShardCount": 32},
            "the prior write layout sharded(32) is neither the layout",
        ),
    ],
)
def test_given_a_malformed_prior_pair_then_the_item_is_unreadable(
    changes: dict[str, Any], message: str
) -> None:
    state = ControlState(
        transition=Transition(1, LEGACY, S16, LEGACY, None, AT, "op", "t", AT + DELAY)
    )
    item = {**state_item(state), **changes}
    item = {k: v for k, v in item.items() if v is not None}

    with pytest.raises(ControlRecordInvalidError) as raised:
        parse_state_item(item)
    assert message in str(raised.value)


def test_given_a_naive_wall_clock_then_routing_refuses_it() -> None:
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        routing_for(ControlState.never_migrated(), datetime(2026, 3, 1))


def test_given_writes_outside_the_routing_layouts_then_routing_refuses_them() -> None:
    with pytest.raises(InvalidInputError, match="writers must stamp the source"):
        Routing(LEGACY, S16, S32)
    assert Routing.for_phase("migrating", 16).writes == S16  # the CLI's read overrides


class _Record:
    def __init__(self, state: ControlState) -> None:
        self.state, self.reads = state, 0

    def read(self) -> ControlState:
        self.reads += 1
        return self.state


def test_given_a_cached_state_then_the_provider_switches_writers_at_effective_at_unread() -> None:
    record = _Record(_next(ControlState.never_migrated(), "migrating", AT, shard_count=16))
    wall = [AT + timedelta(seconds=70)]
    provider = ControlProvider(record, clock=lambda: 0.0, wall_clock=lambda: wall[0])

    before = provider.routing().write_key(P)
    wall[0] = AT + DELAY
    after = provider.routing().write_key(P)

    assert (before, after) == (keys.LEGACY_GSI4PK, SHARD14)
    assert record.reads == 1  # the same cached state: only the wall clock moved
    fixed = FixedStateSource(record.state, wall_clock=lambda: AT)
    assert fixed.routing().write_key(P) == keys.LEGACY_GSI4PK


def test_given_a_missing_record_then_writers_follow_the_newest_history_items_switch() -> None:
    migrating = _next(ControlState.never_migrated(), "migrating", AT, shard_count=16)
    missing = ControlState(transition=migrating.transition, condition=RecordCondition.MISSING)

    assert routing_for(missing, AT + timedelta(seconds=1)).write_key(P) == keys.LEGACY_GSI4PK
    assert routing_for(missing, AT + DELAY).write_key(P) == SHARD14
    assert routing_for(missing, AT).read_keys(P) == (keys.LEGACY_GSI4PK, SHARD14)
