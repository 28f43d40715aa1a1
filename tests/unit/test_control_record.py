"""The control items' encoding: every attribute round-trips, and a malformed item is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import history_item, state_item
from saga_index.layout_change.record.errors import ControlItemInvalidError, Refusal
from saga_index.layout_change.record.history import parse_history_entry
from saga_index.layout_change.record.schema import PARTS
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    Transition,
)
from saga_index.layout_change.record.times import format_time, parse_time, to_millis
from saga_index.store.dynamo.codec import deserialize, serialize

AT = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
S16 = Layout.sharded(16)


def _transition() -> Transition:
    return Transition(
        version=7,
        layout=S16,
        moving_to=LEGACY,
        previous_layout=LEGACY,
        previous_moving_to=S16,
        changed_at=to_millis(AT),
        changed_by="ops@host",
        reason="abort: parity failed",
        effective_at=to_millis(AT + timedelta(seconds=75)),
        checks_passed=(),
        checks_forced=("backfill-verified", "drift-clean"),
    )


def _full_state() -> ControlState:
    at = to_millis(AT)
    return ControlState(
        transition=_transition(),
        lease=Lease(
            "ops@host", "tok", BackfillDirection.ROLLBACK, at, at, at, 7, pace="25/s of 50/s (cap)"
        ),
        backfill_max_writes_per_second=12.5,
        backfill_paused=True,
        lease_epoch=1_767_225_600_000,
        last_backfill=BackfillCompletion(
            BackfillDirection.FORWARD, LEGACY, S16, 6, at, at, 10, 9, 1, True, False, "h", "t0"
        ),
    )


def _wire_round_trip(item: dict[str, Any]) -> dict[str, Any]:
    return deserialize(serialize(item))


def test_given_a_full_state_when_encoded_and_read_back_then_every_field_survives() -> None:
    state = _full_state()

    item = _wire_round_trip(state_item(state))

    assert item["PK"] == "RSAGA_INDEX#CONTROL"
    assert item["SK"] == "STATE"
    assert item["entityType"] == "RenewalSagaIndexControl"
    assert item["phase"] == "rolling-back"
    assert item["layout"] == "sharded"
    assert item["shardCount"] == Decimal(16)
    assert item["movingToLayout"] == "legacy"
    assert "movingToShardCount" not in item
    assert item["changedAt"] == "2026-03-01T12:00:00.123Z"
    assert parse_state_item(item) == state


def test_given_a_transition_then_its_history_item_is_keyed_by_the_zero_padded_version() -> None:
    item = _wire_round_trip(history_item(_transition()))

    assert item["SK"] == "HISTORY#0000000007"
    assert item["entityType"] == "RenewalSagaIndexControlHistory"
    assert parse_history_item(item) == _transition()


def test_given_times_then_they_are_fixed_width_utc_with_milliseconds() -> None:
    plus_two = timezone(timedelta(hours=2))

    assert format_time(datetime(2026, 1, 2, 5, 4, 3, tzinfo=plus_two)) == (
        "2026-01-02T03:04:03.000Z"
    )
    assert parse_time("2026-01-02T03:04:03.000Z") == datetime(2026, 1, 2, 3, 4, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("change", "problem", "kind", "attribute"),
    [
        ({"phase": "sharded"}, "disagrees with its layouts", "inconsistent", "phase"),
        ({"shardCount": Decimal(12)}, "power of two", "invalid-value", "shardCount"),
        ({"layout": None}, "shardCount is set but layout is not", "unexpected", "shardCount"),
        ({"layout": "hashed"}, "must be 'legacy' or 'sharded'", "invalid-value", "layout"),
        (
            {"movingToShardCount": Decimal(4)},
            "must be absent for a legacy layout",
            "unexpected",
            "movingToShardCount",
        ),
        (
            {"changedAt": "2026-03-01T12:00:00Z"},
            "changedAt must be UTC ISO-8601",
            "invalid-value",
            "changedAt",
        ),
        ({"version": "7"}, "version must be a number", "wrong-type", "version"),
        ({"version": None}, "version must be a number", "missing", "version"),
        (
            {"entityType": "RenewalSaga"},
            "not a RenewalSagaIndexControl item",
            "wrong-item",
            "entityType",
        ),
        ({"leaseDirection": "sideways"}, "leaseDirection", "invalid-value", "leaseDirection"),
        ({"leaseHolder": None}, "leaseHolder must be a string", "missing", "leaseHolder"),
        ({"checksForced": "all"}, "checksForced must be a list", "wrong-type", "checksForced"),
        (
            {"lastBackfillTargetLayout": None, "lastBackfillTargetShardCount": None},
            "lastBackfillTargetLayout is missing",
            "missing",
            "lastBackfillTargetLayout",
        ),
        (
            {"backfillPaused": "yes"},
            "backfillPaused must be a boolean",
            "wrong-type",
            "backfillPaused",
        ),
    ],
)
def test_given_a_malformed_state_item_then_it_is_refused_naming_the_attribute(
    change: dict[str, Any], problem: str, kind: str, attribute: str
) -> None:
    item = _wire_round_trip(state_item(_full_state()))
    for name, value in change.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value

    with pytest.raises(ControlItemInvalidError, match=problem) as refused:
        parse_state_item(item)
    assert (refused.value.kind, refused.value.attribute) == (Refusal(kind), attribute)


def test_given_the_schema_then_a_full_state_writes_every_state_attribute_it_declares() -> None:
    item = state_item(_full_state())

    declared = {a.name for part in PARTS if "STATE" in part.items for a in part.attributes}
    # A full state leaves out only the shard counts of its legacy layouts, the open index
    # while it is off (written as absent, which reads as off), and a layout run's lease kind
    # (absent reads as layout).
    legacy_counts = {"movingToShardCount", "previousShardCount", "lastBackfillSourceShardCount"}
    open_index = {
        "openIndex",
        "openIndexShardCount",
        "previousOpenIndex",
        "previousOpenIndexShardCount",
    }
    assert declared - set(item) == legacy_counts | open_index | {"leaseKind"}
    assert set(item) - declared == {"PK", "SK", "entityType"}


def test_given_a_naive_time_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(datetime(2026, 1, 1))


def test_given_a_history_item_under_another_version_then_it_is_refused_at_its_sort_key() -> None:
    item = {**_wire_round_trip(history_item(_transition())), "SK": "HISTORY#0000000008"}

    with pytest.raises(ControlItemInvalidError, match="holds version 7") as refused:
        parse_history_item(item)
    assert (refused.value.kind, refused.value.attribute) == (Refusal.INCONSISTENT, "SK")


@pytest.mark.parametrize(
    ("flags", "applied", "abandoned"),
    [({}, True, False), ({"applied": False}, False, False), ({"abandoned": True}, True, True)],
)
def test_given_history_flags_then_absent_ones_read_as_the_table_says(
    flags: dict[str, bool], applied: bool, abandoned: bool
) -> None:
    entry = parse_history_entry({**_wire_round_trip(history_item(_transition())), **flags})

    assert (entry.applied, entry.abandoned) == (applied, abandoned)


def test_given_a_history_flag_of_another_type_then_the_refusal_names_the_item() -> None:
    item = {**_wire_round_trip(history_item(_transition())), "applied": "yes"}

    with pytest.raises(ControlItemInvalidError, match="'HISTORY#0000000007': applied") as refused:
        parse_history_entry(item)
    assert (refused.value.kind, refused.value.attribute) == (Refusal.WRONG_TYPE, "applied")
