"""The open-saga index's state in the control record: its ladder, its encoding, the writers'
switch, the readers' switch and the missing-record rule (docs/control-contract.md, "The
open-saga index")."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devkit.contract_states import DELAY, MS, OPEN_INDEX_STATES, OPENED, path_through
from saga_index.index import InvalidInputError, Layout, Person
from saga_index.layout_change.record import (
    ControlItemInvalidError,
    ControlState,
    OpenIndex,
    OpenIndexState,
    RecordCondition,
    history_item,
    parse_history_item,
    parse_state_item,
    routing_for,
    state_item,
)
from saga_index.layout_change.record.history import HistoryEntry, restore_point
from saga_index.layout_change.transitions import (
    plan_move,
    plan_open_index_move,
    transition_for,
)
from saga_index.layout_change.transitions.errors import TransitionNotAllowedError
from saga_index.layout_change.transitions.open_index_rules import OpenIndexMoveNotAllowedError

_SHARDED = (("migrating", 0, 16), ("sharded", 3600.0, None))
_ADDING = (*_SHARDED, ("open-index:adding", 7200.0, None))


def _state(*steps: tuple[str, float, int | None]) -> ControlState:
    return path_through(*steps)


def test_given_every_open_index_state_then_its_item_reads_back_as_the_same_state() -> None:
    for _, build in OPEN_INDEX_STATES:
        state = build()
        assert parse_state_item(state_item(state)) == state
        assert state.transition is not None
        assert parse_history_item(history_item(state.transition)) == state.transition


def test_given_off_then_the_item_carries_no_open_index_attribute() -> None:
    item = state_item(_state(*_SHARDED))
    assert not {k for k in item if "OpenIndex" in k or k == "openIndex"}
    assert parse_state_item(item).open_index == OpenIndex.off()


def test_given_adding_then_writers_stamp_only_from_effective_at_and_readers_stay_on_gsi4() -> None:
    state = _state(*_ADDING)
    assert state.transition is not None
    effective = state.transition.effective_at
    person = Person.of("p-1")

    before, after = routing_for(state, effective - MS), routing_for(state, effective)

    assert before.open_write_key(person) is None
    assert after.open_write_key(person) == person.open_index_pk(16)
    assert before.open_enumeration_keys() is None
    assert after.open_enumeration_keys() is None
    # The layout's routing is untouched by the open index's move.
    assert after.write_key(person) == Layout.sharded(16).key_for(person)


def test_given_open_then_enumerations_read_the_open_index_keys_at_once() -> None:
    state = _state(*_ADDING, ("open-index:open", 10800.0, None))
    assert state.transition is not None
    routing = routing_for(state, state.transition.effective_at - MS)
    assert routing.open_enumeration_keys() == tuple(f"RenewalSagaOpen#{n}" for n in range(16))
    assert routing.open_write_key("p-1") == Person.of("p-1").open_index_pk(16)


def test_given_removing_then_writers_stop_stamping_at_effective_at() -> None:
    state = _state(*_ADDING, ("open-index:removing", 10800.0, None))
    assert state.transition is not None
    effective = state.transition.effective_at
    assert routing_for(state, effective - MS).open_write_key("p-1") is not None
    assert routing_for(state, effective).open_write_key("p-1") is None


@pytest.mark.parametrize(
    ("steps", "requested", "message"),
    [
        (_SHARDED, "open", "not an allowed move"),
        (_SHARDED, "removing", "not an allowed move"),
        (_ADDING, "off", "not an allowed move"),
        (_ADDING, "adding", "already 'adding'"),
        ((*_ADDING, ("open-index:open", 10800.0, None)), "removing", "`open` is the end"),
        ((*_ADDING, ("open-index:open", 10800.0, None)), "off", "no rollback"),
        ((("migrating", 0, 16),), "adding", "the layout is moving"),
    ],
)
def test_given_a_move_out_of_order_then_it_is_refused_naming_the_allowed_ones(
    steps: tuple[tuple[str, float, int | None], ...], requested: str, message: str
) -> None:
    with pytest.raises(OpenIndexMoveNotAllowedError, match=message) as refused:
        plan_open_index_move(_state(*steps), requested)
    assert isinstance(refused.value, TransitionNotAllowedError)


def test_given_shards_then_only_a_power_of_two_the_record_agrees_with_is_taken() -> None:
    sharded = _state(*_SHARDED)
    assert plan_open_index_move(sharded, "adding").to == OpenIndex(OpenIndexState.ADDING, 16)
    assert plan_open_index_move(sharded, "adding", shard_count=8).to.shard_count == 8
    assert plan_open_index_move(ControlState.never_migrated(), "adding").to.shard_count == 16
    with pytest.raises(InvalidInputError, match="power of two"):
        plan_open_index_move(sharded, "adding", shard_count=12)
    with pytest.raises(OpenIndexMoveNotAllowedError, match="disagrees"):
        plan_open_index_move(_state(*_ADDING), "open", shard_count=32)


def test_given_a_layout_move_then_the_open_index_is_carried_over() -> None:
    state = _state(*_ADDING, ("open-index:open", 10800.0, None), ("resharding", 14400.0, 32))
    assert state.open_index == OpenIndex(OpenIndexState.OPEN, 16)
    assert state.transition is not None
    assert not state.transition.changes_open_index
    assert plan_move(state, "sharded").from_state.open_index == state.open_index


def test_given_an_open_index_move_then_its_transition_keeps_the_layout_and_what_writers_stamp() -> (
    None
):
    sharded = _state(*_SHARDED)
    # Before the sharded state's effectiveAt its writers still stamp its prior layout.
    at = OPENED + timedelta(seconds=3600) + DELAY / 2
    move = plan_open_index_move(sharded, "adding")

    transition = transition_for(
        move, at, changed_by="op", reason="test", effective_delay=DELAY, checks_forced=("x",)
    )

    assert (transition.version, transition.changed_at) == (sharded.version + 1, at)
    assert (transition.layout, transition.moving_to) == (sharded.layout, sharded.moving_to)
    assert (transition.previous_layout, transition.previous_moving_to) == (
        sharded.layout,
        sharded.moving_to,
    )
    assert (transition.prior_write or transition.layout) == sharded.writes_at(at)
    assert transition.open_index == OpenIndex(OpenIndexState.ADDING, 16)
    assert transition.previous_open_index == OpenIndex.off()
    assert (transition.effective_at, transition.checks_forced) == (at + DELAY, ("x",))


def test_given_a_transition_changing_both_dimensions_then_it_cannot_be_built() -> None:
    migrating = _state(("migrating", 0, 16)).transition
    assert migrating is not None
    with pytest.raises(InvalidInputError, match="never both"):
        type(migrating)(
            **{
                **migrating.__dict__,
                "prior_write": None,
                "open_index": OpenIndex(OpenIndexState.ADDING, 16),
            }
        )


def test_given_an_item_moving_both_dimensions_then_a_reader_refuses_it_at_open_index() -> None:
    item = {**state_item(_state(("migrating", 0, 16))), "openIndex": "adding"}
    item["openIndexShardCount"] = 16
    with pytest.raises(ControlItemInvalidError) as refused:
        parse_state_item(item)
    assert refused.value.attribute == "openIndex"


def test_given_a_lost_state_then_an_unconfirmed_adding_to_open_is_not_followed() -> None:
    adding = _state(*_ADDING)
    opened = _state(*_ADDING, ("open-index:open", 10800.0, None))
    assert adding.transition is not None
    assert opened.transition is not None
    newest = [HistoryEntry(opened.transition, applied=False), HistoryEntry(adding.transition, True)]
    point = restore_point(newest)
    assert point is not None
    assert point.transition.open_index.state is OpenIndexState.ADDING
    missing = ControlState(point.transition, condition=RecordCondition.MISSING)
    at = opened.transition.effective_at + timedelta(seconds=1)
    assert routing_for(missing, at).open_enumeration_keys() is None
