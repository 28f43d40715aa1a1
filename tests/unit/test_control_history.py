"""Which history item a lost STATE is rebuilt from (`restore_point`), and what the rows say
when no history is left (`infer_layout`): pure rules, no table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from saga_index.index import keys
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.shard import shard
from saga_index.layout_change.checks.drift import RowRef
from saga_index.layout_change.checks.layout_probe import RowsSeen, infer_layout
from saga_index.layout_change.record.history import HistoryEntry, restore_point
from saga_index.layout_change.record.state import Transition

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
S16, S32 = Layout.sharded(16), Layout.sharded(32)


def move(
    version: int, layout: Layout, moving_to: Layout | None, previous: tuple[Layout, Layout | None]
) -> Transition:
    return Transition(
        version=version,
        layout=layout,
        moving_to=moving_to,
        previous_layout=previous[0],
        previous_moving_to=previous[1],
        changed_at=AT,
        changed_by="t",
        reason="r",
        effective_at=AT + timedelta(seconds=75),
    )


MIGRATING = move(1, LEGACY, S16, (LEGACY, None))
SHARDED = move(2, S16, None, (LEGACY, S16))
RESHARDING = move(3, S16, S32, (S16, None))


def entry(t: Transition, applied: bool, abandoned: bool = False) -> HistoryEntry:
    return HistoryEntry(transition=t, applied=applied, abandoned=abandoned)


def test_an_applied_newest_item_is_followed() -> None:
    assert restore_point([entry(SHARDED, True), entry(MIGRATING, True)]) == entry(SHARDED, True)


def test_an_undecided_opening_intent_is_followed_it_reads_what_the_state_before_read() -> None:
    newest = entry(RESHARDING, False)
    assert restore_point([newest, entry(SHARDED, True)]) == newest


def test_an_undecided_completing_intent_is_skipped_for_the_moving_state_before_it() -> None:
    before = entry(MIGRATING, True)
    assert restore_point([entry(SHARDED, False), before]) == before


def test_an_abandoned_intent_is_never_followed() -> None:
    before = entry(SHARDED, True)
    assert restore_point([entry(RESHARDING, False, abandoned=True), before]) == before
    assert restore_point([entry(MIGRATING, False, abandoned=True)]) is None


def test_no_history_is_no_restore_point() -> None:
    assert restore_point([]) is None


def row(gsi4pk: str, person: object) -> RowRef:
    return RowRef(pk="RSAGA#x", sk="META", saga_id="x", person_id=person, gsi4pk=gsi4pk)


def people_on(n: int, count: int) -> dict[int, RowRef]:
    """One row per key of sharded(n), each on its person's key."""
    found: dict[int, RowRef] = {}
    i = 0
    while len(found) < n:
        person = f"p-{i}"
        found.setdefault(shard(person, n), row(keys.sharded_gsi4pk(shard(person, n)), person))
        i += 1
    return dict(list(found.items())[:count])


def test_no_shard_row_is_never_migrated() -> None:
    inferred = infer_layout(RowsSeen(legacy=row(keys.LEGACY_GSI4PK, "p")))
    assert (inferred.layout, inferred.moving_to, inferred.problem) == (LEGACY, None, None)


@pytest.mark.parametrize("n", [16, 32, 1024])
def test_one_row_per_key_of_sharded_n_names_n(n: int) -> None:
    inferred = infer_layout(RowsSeen(legacy=None, sharded=people_on(n, n)))
    assert (inferred.layout, inferred.moving_to, inferred.problem) == (
        Layout.sharded(n),
        None,
        None,
    )


def test_rows_on_both_sides_are_migrating_n_which_reads_both() -> None:
    inferred = infer_layout(
        RowsSeen(legacy=row(keys.LEGACY_GSI4PK, "p"), sharded=people_on(16, 16))
    )
    assert (inferred.layout, inferred.moving_to) == (LEGACY, S16)


def test_too_few_rows_to_tell_n_are_refused_naming_every_n_they_fit() -> None:
    person = next(f"p-{i}" for i in range(10_000) if shard(f"p-{i}", 1024) == 0)
    inferred = infer_layout(RowsSeen(legacy=None, sharded={0: row(keys.sharded_gsi4pk(0), person)}))
    assert inferred.layout is None
    assert inferred.problem is not None
    assert "fit N = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024" in inferred.problem


def test_a_row_on_a_key_that_is_not_its_persons_under_any_n_is_refused() -> None:
    rows = people_on(16, 16)
    person = next(f"q-{i}" for i in range(10_000) if shard(f"q-{i}", 16) != 3)
    rows[3] = row(keys.sharded_gsi4pk(3), person)
    inferred = infer_layout(RowsSeen(legacy=None, sharded=rows))
    assert inferred.problem is not None
    assert "no shard count N puts every one of them on its person's key" in inferred.problem
    assert "RenewalSaga#3 (RSAGA#x)" in inferred.problem  # the first five keys are named


def test_an_unusable_person_does_not_vote_on_n() -> None:
    rows = people_on(16, 16)
    rows[5] = row(keys.sharded_gsi4pk(5), None)
    inferred = infer_layout(RowsSeen(legacy=None, sharded=rows))
    assert inferred.layout == S16
