"""The routing rule of every state (docs/control-contract.md, "Routing"): pure, no I/O."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from saga_index.index import keys
from saga_index.index.errors import InvalidInputError, InvalidPersonIdError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.errors import ControlRecordInvalidError
from saga_index.layout_change.record.phase import Phase, layouts_for_phase, phase_of
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition

ROOT = Path(__file__).resolve().parents[2]
PERSONS = sorted(
    {v["personId"] for v in json.loads((ROOT / "docs/shard-vectors.json").read_text())["vectors"]}
)
S16, S32 = Layout.sharded(16), Layout.sharded(32)
AT = datetime(2026, 3, 1, tzinfo=UTC)


def _state(
    layout: Layout,
    moving_to: Layout | None,
    *,
    previous: tuple[Layout, Layout | None] = (LEGACY, None),
    condition: RecordCondition = RecordCondition.PRESENT,
) -> ControlState:
    transition = Transition(
        version=3,
        layout=layout,
        moving_to=moving_to,
        previous_layout=previous[0],
        previous_moving_to=previous[1],
        changed_at=AT,
        changed_by="op",
        reason="test",
        effective_at=AT + timedelta(seconds=75),
    )
    return ControlState(transition=transition, condition=condition)


def test_given_a_never_migrated_record_then_everything_is_the_legacy_partition() -> None:
    routing = routing_for(ControlState.never_migrated())

    assert routing.write_key("p-1") == keys.LEGACY_GSI4PK
    assert routing.read_keys("p-1") == (keys.LEGACY_GSI4PK,)
    assert routing.enumeration_stages() == ((keys.LEGACY_GSI4PK,),)


def test_given_migrating_then_writers_stamp_the_shard_and_readers_read_legacy_first() -> None:
    routing = routing_for(_state(LEGACY, S16))
    shard_key = keys.shard_gsi4pk_for_person("p-1", 16)

    assert routing.write_key("p-1") == shard_key
    assert routing.read_keys("p-1") == (keys.LEGACY_GSI4PK, shard_key)
    assert routing.enumeration_stages() == ((keys.LEGACY_GSI4PK,), S16.partitions())


def test_given_sharded_then_only_the_shard_is_written_and_read() -> None:
    routing = routing_for(_state(S16, None))
    shard_key = keys.shard_gsi4pk_for_person("p-1", 16)

    assert routing.write_key("p-1") == shard_key
    assert routing.read_keys("p-1") == (shard_key,)
    assert routing.enumeration_keys() == tuple(f"RenewalSaga#{s}" for s in range(16))


def test_given_rolling_back_then_writers_stamp_legacy_and_readers_read_the_shards_first() -> None:
    routing = routing_for(_state(S16, LEGACY))
    shard_key = keys.shard_gsi4pk_for_person("p-1", 16)

    assert routing.write_key("p-1") == keys.LEGACY_GSI4PK
    assert routing.read_keys("p-1") == (shard_key, keys.LEGACY_GSI4PK)
    assert routing.enumeration_stages() == (S16.partitions(), (keys.LEGACY_GSI4PK,))


@pytest.mark.parametrize("person_id", PERSONS[:12], ids=lambda p: ascii(p)[:30])
def test_given_a_split_then_a_by_person_read_is_one_request_when_both_layouts_agree(
    person_id: str,
) -> None:
    routing = Routing.between(S16, S32)
    source, target = S16.key_for(person_id), S32.key_for(person_id)

    assert routing.write_key(person_id) == target
    expected = (source,) if source == target else (source, target)
    assert routing.read_keys(person_id) == expected


def _stage_of(stages: tuple[tuple[str, ...], ...], key: str) -> int:
    return next(n for n, stage in enumerate(stages) if key in stage)


@pytest.mark.parametrize(
    ("source", "target"),
    [(Layout.sharded(n), Layout.sharded(2 * n)) for n in (1, 2, 16, 512)]
    + [(Layout.sharded(2 * n), Layout.sharded(n)) for n in (1, 2, 16, 512)]
    + [(LEGACY, S16), (S16, LEGACY), (LEGACY, Layout.sharded(1))],
    ids=str,
)
def test_given_any_move_then_every_key_is_read_once_and_a_rows_source_stage_comes_first(
    source: Layout, target: Layout
) -> None:
    stages = Routing.between(source, target).enumeration_stages()
    flat = [k for stage in stages for k in stage]

    assert len(flat) == len(set(flat))
    assert set(flat) == set(source.partitions()) | set(target.partitions())
    for person_id in PERSONS:
        src, dst = source.key_for(person_id), target.key_for(person_id)
        if src != dst:
            assert _stage_of(stages, src) < _stage_of(stages, dst), person_id


def test_given_a_split_then_shared_keys_are_read_with_the_source() -> None:
    stages = Routing.between(S16, S32).enumeration_stages()

    assert stages == (S16.partitions(), tuple(f"RenewalSaga#{s}" for s in range(16, 32)))


def test_given_a_merge_then_shared_keys_are_read_with_the_target() -> None:
    stages = Routing.between(S32, S16).enumeration_stages()

    assert stages == (tuple(f"RenewalSaga#{s}" for s in range(16, 32)), S16.partitions())


@pytest.mark.parametrize(
    ("previous", "layout", "moving_to", "expected"),
    [
        ((LEGACY, S16), S16, None, (LEGACY, S16)),  # migrating -> sharded
        ((S16, LEGACY), LEGACY, None, (S16, LEGACY)),  # rolling-back -> legacy
        ((LEGACY, None), LEGACY, S16, (LEGACY, S16)),  # legacy -> migrating
        ((LEGACY, S16), S16, LEGACY, (S16, LEGACY)),  # migrating -> rolling-back
        ((S16, None), S16, LEGACY, (S16, LEGACY)),  # sharded -> rolling-back
    ],
)
def test_given_a_missing_record_then_reads_cover_both_sides_of_the_newest_move(
    previous: tuple[Layout, Layout | None],
    layout: Layout,
    moving_to: Layout | None,
    expected: tuple[Layout, Layout],
) -> None:
    state = _state(layout, moving_to, previous=previous, condition=RecordCondition.MISSING)

    routing = routing_for(state)

    assert (routing.source, routing.target) == expected
    assert routing.write_key("p-1") == (moving_to or layout).key_for("p-1")


def test_given_a_missing_record_naming_three_layouts_then_it_is_invalid() -> None:
    state = _state(S32, None, previous=(LEGACY, S16), condition=RecordCondition.MISSING)

    with pytest.raises(ControlRecordInvalidError, match="more than two layouts"):
        routing_for(state)


def test_given_an_unusable_person_id_then_routing_refuses_it_in_every_layout() -> None:
    for routing in (Routing.between(LEGACY), Routing.between(LEGACY, S16)):
        with pytest.raises(InvalidPersonIdError):
            routing.write_key("")


@pytest.mark.parametrize(
    ("current", "moving_to", "phase"),
    [
        (LEGACY, None, Phase.LEGACY),
        (LEGACY, S16, Phase.MIGRATING),
        (S16, None, Phase.SHARDED),
        (S16, LEGACY, Phase.ROLLING_BACK),
        (S16, S32, Phase.RESHARDING),
    ],
)
def test_given_a_pair_of_layouts_then_its_phase_is_named(
    current: Layout, moving_to: Layout | None, phase: Phase
) -> None:
    assert phase_of(current, moving_to) is phase


def test_given_a_move_to_the_same_layout_then_it_is_not_a_state() -> None:
    with pytest.raises(InvalidInputError):
        phase_of(S16, Layout.sharded(16))


def test_given_a_phase_override_then_its_layouts_route_like_the_old_phase_flags() -> None:
    assert layouts_for_phase("migrating", 16) == (LEGACY, S16)
    assert layouts_for_phase("rolling-back", 16) == (S16, LEGACY)
    with pytest.raises(InvalidInputError):
        layouts_for_phase("resharding", 16)


def test_given_a_bad_layout_then_it_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        Layout.sharded(12)
    with pytest.raises(InvalidInputError):
        Layout("legacy", 16)
