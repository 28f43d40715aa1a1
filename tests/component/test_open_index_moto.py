"""The open-saga index's move against moto: the moves and their refusals (each writing nothing),
the writers' stamps and removals, the readers' switch, and a saga closing while `adding`.
Clocks are injected: nothing waits for effectiveAt."""

from __future__ import annotations

from typing import Any

import pytest

from saga_index.index import InvalidInputError, Layout, Person, RetryLaterError, names
from saga_index.layout_change.record import ControlStore, OpenIndexState, routing_for
from saga_index.layout_change.transitions import (
    PreconditionFailedError,
)
from saga_index.layout_change.transitions.open_index_move import (
    CHECK_NO_OPEN_INDEX_KEYS,
    CHECK_OPEN_INDEX_PARITY,
    OpenIndexBuildingError,
    OpenIndexNotReadyError,
)
from saga_index.layout_change.transitions.open_index_rules import OpenIndexMoveNotAllowedError
from saga_index.store import SagaRepository
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.writer import SagaWriter
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock
from tests.support.open_index import (
    BUILDING,
    MISBUILT,
    MISSING,
    Moves,
    open_index_fixtures,
    readiness_of,
)

OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
dynamo, clock, store = open_index_fixtures("open-index")


@pytest.fixture
def move(store: ControlStore, clock: Clock) -> Moves:
    return Moves(store, clock)


def writer(store: ControlStore, clock: Clock) -> SagaWriter:
    return SagaWriter(
        store.client, store.table_name, follow=lambda: routing_for(store.read(), clock())
    )


def row(dynamo: Backend, saga_id: str) -> dict[str, Any]:
    item = dynamo.get(f"RSAGA#{saga_id}", "META")
    assert item is not None
    return deserialize(item)


def history_count(dynamo: Backend) -> int:
    return sum(1 for i in dynamo.scan_all() if i["SK"]["S"].startswith("HISTORY#"))


def test_given_the_index_missing_or_building_then_adding_is_refused_writing_nothing(
    move: Moves, store: ControlStore, dynamo: Backend
) -> None:
    with pytest.raises(OpenIndexNotReadyError, match="add it"):
        move("adding", readiness=readiness_of(MISSING))
    with pytest.raises(OpenIndexNotReadyError, match="KEYS_ONLY"):
        move("adding", readiness=readiness_of(MISBUILT))
    with pytest.raises(OpenIndexBuildingError, match="CREATING") as building:
        move("adding", readiness=readiness_of(BUILDING))
    assert isinstance(building.value, RetryLaterError)
    assert isinstance(OpenIndexNotReadyError("x"), InvalidInputError)
    assert store.read().version == 0
    assert history_count(dynamo) == 0


def test_given_bad_moves_then_each_is_refused_writing_nothing(
    move: Moves, store: ControlStore, dynamo: Backend
) -> None:
    with pytest.raises(OpenIndexMoveNotAllowedError, match="not an allowed move"):
        move("open")
    with pytest.raises(InvalidInputError, match="power of two"):
        move("adding", shard_count=12)
    assert store.read().version == 0

    move("adding")
    move.settle()
    move("open")
    before = store.read()
    for late in ("removing", "off", "adding"):
        with pytest.raises(OpenIndexMoveNotAllowedError, match="`open` is the end"):
            move(late)
    assert store.read() == before
    assert history_count(dynamo) == before.version


def test_given_adding_then_writers_stamp_open_sagas_and_remove_the_key_when_one_closes(
    move: Moves, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    saga_writer = writer(store, clock)
    move("adding", shard_count=8)
    # Before effectiveAt writers stamp as the state before did: nothing.
    saga_writer.create_saga(
        saga_id="early", person_id="p-1", lease_id="l", opened_at="2026-01-01T00:00:00.000Z"
    )
    assert OPEN_KEY not in row(dynamo, "early")

    move.settle()
    saga_writer.create_saga(
        saga_id="s1", person_id="p-1", lease_id="l", opened_at="2026-01-01T00:00:00.000Z"
    )
    assert row(dynamo, "s1")[OPEN_KEY] == Person.of("p-1").open_index_pk(8)
    saga_writer.transition(saga_id="early", person_id="p-1", to_state="PREPARING", updated_at=_T)
    assert row(dynamo, "early")[OPEN_KEY] == Person.of("p-1").open_index_pk(8)

    # A saga closing while adding leaves the index in the same write.
    saga_writer.transition(saga_id="s1", person_id="p-1", to_state="SIGNED", updated_at=_T)
    closed = row(dynamo, "s1")
    assert OPEN_KEY not in closed
    assert closed["state"] == "SIGNED"
    # A closed saga created as such never carries one.
    saga_writer.create_saga(
        saga_id="s2", person_id="p-2", lease_id="l", opened_at=_T, state="EXPIRED"
    )
    assert OPEN_KEY not in row(dynamo, "s2")


def test_given_a_fixed_layout_plan_then_a_close_removes_the_key_and_an_open_write_keeps_it(
    dynamo: Backend,
) -> None:
    saga_writer = SagaWriter(dynamo.client, dynamo.table_name, plan=Layout.legacy())
    dynamo.put_saga("s1", "p-1", **{OPEN_KEY: "RenewalSagaOpen#3"})
    saga_writer.transition(saga_id="s1", person_id="p-1", to_state="PREPARING", updated_at=_T)
    assert row(dynamo, "s1")[OPEN_KEY] == "RenewalSagaOpen#3"
    saga_writer.transition(saga_id="s1", person_id="p-1", to_state="DECLINED", updated_at=_T)
    assert OPEN_KEY not in row(dynamo, "s1")


def test_given_unstamped_open_rows_then_open_is_refused_naming_them_until_they_are_stamped(
    move: Moves, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    dynamo.put_saga("old", "p-1")
    dynamo.put_saga("done", "p-2", state="SIGNED")
    move("adding")
    with pytest.raises(RetryLaterError, match="in-flight margin"):
        move("open")
    move.settle()
    with pytest.raises(PreconditionFailedError, match="RSAGA#old") as refused:
        move("open")
    (failed,) = refused.value.failed
    assert failed.name == CHECK_OPEN_INDEX_PARITY
    assert "RSAGA#done" not in failed.detail
    version = store.read().version

    # A closed saga that still carries a key is named too.
    dynamo.put_saga("done", "p-2", state="SIGNED", **{OPEN_KEY: "RenewalSagaOpen#1"})
    writer(store, clock).transition(
        saga_id="old", person_id="p-1", to_state="PREPARING", updated_at=_T
    )
    with pytest.raises(PreconditionFailedError, match="RSAGA#done: a closed saga carries"):
        move("open")
    assert store.read().version == version

    writer(store, clock).transition(
        saga_id="done", person_id="p-2", to_state="SIGNED", updated_at=_T
    )
    change = move("open")
    assert change.transition.open_index.state is OpenIndexState.OPEN
    assert change.transition.checks_passed == (CHECK_OPEN_INDEX_PARITY,)


def test_given_open_then_enumerations_read_the_open_index_and_by_person_reads_gsi4(
    move: Moves, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    move("adding")
    move.settle()
    saga_writer = writer(store, clock)
    for n in range(6):
        saga_writer.create_saga(saga_id=f"s{n}", person_id=f"p-{n}", lease_id="l", opened_at=_T)
    saga_writer.transition(saga_id="s5", person_id="p-5", to_state="CANCELLED", updated_at=_T)
    # A row only GSI4 has (no open key): readers of `open` must not see it, readers of
    # `adding` must: which index answered is then plain.
    dynamo.put_saga("ghost", "p-9")
    adding_reads = SagaRepository(dynamo.client, dynamo.table_name, plan=routing_for(store.read()))
    assert {r["sagaId"] for r in adding_reads.get_all_open_sagas()} == {
        "s0", "s1", "s2", "s3", "s4", "ghost"
    }  # fmt: skip

    dynamo.put_saga("ghost", "p-9", state="EXPIRED")  # closed again: parity holds
    move.settle()
    move("open")
    plan = routing_for(store.read(), clock())
    reads = SagaRepository(dynamo.client, dynamo.table_name, plan=plan)
    dynamo.put_saga("ghost", "p-9")  # open on GSI4 only: a row no writer following `open` makes
    result = reads.get_all_open_sagas()
    assert {r["sagaId"] for r in result} == {"s0", "s1", "s2", "s3", "s4"}
    assert result.partitions == tuple(f"RenewalSagaOpen#{n}" for n in range(16))
    page = reads.page_of_open_sagas(limit=3)
    assert len(page.rows) == 3
    assert page.cursor is not None
    rest = reads.page_of_open_sagas(limit=10, cursor=page.cursor)
    assert {r["sagaId"] for r in page.rows + rest.rows} == {"s0", "s1", "s2", "s3", "s4"}
    # By person: GSI4, as ever (the ghost is found there).
    assert [r["sagaId"] for r in reads.get_sagas_by_person("p-9")] == ["ghost"]


def test_given_the_rollback_then_off_waits_for_every_stamp_to_go(
    move: Moves, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    move("adding")
    move.settle()
    saga_writer = writer(store, clock)
    saga_writer.create_saga(saga_id="s1", person_id="p-1", lease_id="l", opened_at=_T)
    move("removing")
    # Until removing's effectiveAt writers still stamp; from it they remove on every write.
    saga_writer.transition(saga_id="s1", person_id="p-1", to_state="PREPARING", updated_at=_T)
    assert OPEN_KEY in row(dynamo, "s1")
    move.settle()
    with pytest.raises(PreconditionFailedError, match="RSAGA#s1") as refused:
        move("off")
    assert refused.value.failed[0].name == CHECK_NO_OPEN_INDEX_KEYS
    # The abort of the rollback and the rollback again are never blocked.
    assert move("adding").transition.open_index.state is OpenIndexState.ADDING
    move("removing")
    move.settle()
    saga_writer.transition(saga_id="s1", person_id="p-1", to_state="OFFER_SENT", updated_at=_T)
    assert OPEN_KEY not in row(dynamo, "s1")
    change = move("off")
    assert change.transition.open_index.state is OpenIndexState.OFF
    assert change.transition.checks_passed == (CHECK_NO_OPEN_INDEX_KEYS,)


def test_given_force_then_the_checks_are_skipped_and_recorded_but_not_the_wait(
    move: Moves, store: ControlStore, dynamo: Backend
) -> None:
    dynamo.put_saga("old", "p-1")
    move("adding")
    with pytest.raises(RetryLaterError):
        move("open", force=True)
    move.settle()
    change = move("open", force=True)
    assert change.transition.checks_forced == (CHECK_OPEN_INDEX_PARITY,)
    assert store.read().open_index.state is OpenIndexState.OPEN


def test_given_a_moving_layout_then_the_open_index_waits(
    move: Moves, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    from tests.support.control_fixtures import set_phase

    set_phase(store, "migrating", changed_by="t", reason="r", shard_count=16, clock=clock)
    with pytest.raises(OpenIndexMoveNotAllowedError, match="the layout is moving"):
        move("adding")
    assert store.read().version == 1


_T = "2026-01-02T00:00:00.000Z"
