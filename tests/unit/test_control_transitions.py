"""The allowed phase moves, every refusal, and the built-in backfill check: pure, no I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from saga_index.index.errors import InvalidInputError, InvalidShardCountError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.errors import ControlRecordMissingError
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    RecordCondition,
    Transition,
)
from saga_index.layout_change.transitions.errors import TransitionNotAllowedError
from saga_index.layout_change.transitions.rules import (
    ALLOWED_MOVES,
    backfill_verified,
    describe_reshard_targets,
    plan_move,
    reshard_targets,
)

S16 = Layout.sharded(16)
AT = datetime(2026, 3, 1, tzinfo=UTC)
EFFECTIVE = AT + timedelta(seconds=75)
STATES: dict[Phase, tuple[Layout, Layout | None]] = {
    Phase.LEGACY: (LEGACY, None),
    Phase.MIGRATING: (LEGACY, S16),
    Phase.SHARDED: (S16, None),
    Phase.ROLLING_BACK: (S16, LEGACY),
    Phase.RESHARDING: (S16, Layout.sharded(32)),
}


def _state(phase: Phase, **overrides: object) -> ControlState:
    layout, moving_to = STATES[phase]
    if phase is Phase.LEGACY and not overrides:
        return ControlState.never_migrated()
    transition = Transition(
        version=4,
        layout=layout,
        moving_to=moving_to,
        previous_layout=LEGACY,
        previous_moving_to=None if layout == LEGACY and moving_to else S16,
        changed_at=AT,
        changed_by="op",
        reason="test",
        effective_at=EFFECTIVE,
    )
    return replace(ControlState(transition=transition), **overrides)  # type: ignore[arg-type]


ALLOWED = [
    (Phase.LEGACY, Phase.MIGRATING, (LEGACY, S16), None),
    (Phase.MIGRATING, Phase.SHARDED, (S16, None), BackfillDirection.FORWARD),
    (Phase.MIGRATING, Phase.ROLLING_BACK, (S16, LEGACY), None),
    (Phase.SHARDED, Phase.ROLLING_BACK, (S16, LEGACY), None),
    (Phase.ROLLING_BACK, Phase.LEGACY, (LEGACY, None), BackfillDirection.ROLLBACK),
    (Phase.ROLLING_BACK, Phase.MIGRATING, (LEGACY, S16), None),
]


@pytest.mark.parametrize(("current", "requested", "layouts", "completes"), ALLOWED)
def test_given_an_allowed_move_then_it_leads_to_the_layouts_of_that_phase(
    current: Phase,
    requested: Phase,
    layouts: tuple[Layout, Layout | None],
    completes: BackfillDirection | None,
) -> None:
    move = plan_move(_state(current), requested.value)

    assert (move.layout, move.moving_to) == layouts
    assert move.completes is completes
    assert move.guarded is (completes is not None)


DISALLOWED = [
    (current, requested)
    for current in Phase
    for requested in Phase
    if requested not in ALLOWED_MOVES[current]
]


@pytest.mark.parametrize(("current", "requested"), DISALLOWED)
def test_given_any_other_move_then_it_is_refused_naming_the_allowed_moves(
    current: Phase, requested: Phase
) -> None:
    with pytest.raises(TransitionNotAllowedError) as refused:
        plan_move(_state(current), requested)

    assert isinstance(refused.value, InvalidInputError)  # the CLI's exit 2
    assert refused.value.allowed == tuple(p.value for p in ALLOWED_MOVES[current])
    for allowed in refused.value.allowed:
        assert allowed in str(refused.value)


def test_given_legacy_then_migrating_defaults_to_16_shards_and_takes_another_power_of_two() -> None:
    assert plan_move(_state(Phase.LEGACY), "migrating").moving_to == S16
    assert plan_move(_state(Phase.LEGACY), "migrating", shard_count=64).moving_to == Layout.sharded(
        64
    )
    with pytest.raises(InvalidShardCountError):
        plan_move(_state(Phase.LEGACY), "migrating", shard_count=12)


@pytest.mark.parametrize(
    ("current", "requested"),
    [
        (Phase.MIGRATING, Phase.SHARDED),
        (Phase.SHARDED, Phase.ROLLING_BACK),
        (Phase.ROLLING_BACK, Phase.MIGRATING),
    ],
)
def test_given_a_shard_count_that_disagrees_with_the_record_then_the_move_is_refused(
    current: Phase, requested: Phase
) -> None:
    assert plan_move(_state(current), requested, shard_count=16).to_phase is requested
    with pytest.raises(TransitionNotAllowedError, match="--shards 32 disagrees"):
        plan_move(_state(current), requested, shard_count=32)


def test_given_an_unknown_phase_name_then_it_is_an_input_error() -> None:
    with pytest.raises(InvalidInputError, match="phase must be one of"):
        plan_move(_state(Phase.LEGACY), "cutover")


def test_given_a_missing_record_then_no_move_is_planned() -> None:
    state = replace(_state(Phase.SHARDED), condition=RecordCondition.MISSING)

    with pytest.raises(ControlRecordMissingError, match="version 4"):
        plan_move(state, "rolling-back")


# ---- the built-in precondition -----------------------------------------------------------------


def _completion(**overrides: object) -> BackfillCompletion:
    completion = BackfillCompletion(
        direction=BackfillDirection.FORWARD,
        source=LEGACY,
        target=S16,
        state_version=4,
        started_at=EFFECTIVE + timedelta(seconds=1),
        completed_at=EFFECTIVE + timedelta(minutes=5),
        scanned=100,
        restamped=98,
        anomalies=2,
        complete=True,
        verified=True,
        holder="ops@host",
        lease_token="t",
    )
    return replace(completion, **overrides)  # type: ignore[arg-type]


def test_given_a_verified_forward_run_under_this_state_then_the_check_passes() -> None:
    result = backfill_verified(
        _state(Phase.MIGRATING, last_backfill=_completion()), BackfillDirection.FORWARD
    )

    assert result.passed, result.detail


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"direction": BackfillDirection.ROLLBACK}, "not forward"),
        ({"state_version": 3}, "under version 3"),
        ({"target": Layout.sharded(32)}, "not legacy -> sharded(16)"),
        ({"started_at": EFFECTIVE - timedelta(seconds=1)}, "before effectiveAt"),
        ({"completed_at": EFFECTIVE}, "not after effectiveAt"),
        ({"complete": False}, "did not complete"),
        ({"verified": False}, "verification did not pass"),
    ],
)
def test_given_a_run_that_does_not_prove_the_move_then_the_check_fails_naming_why(
    overrides: dict[str, object], problem: str
) -> None:
    state = _state(Phase.MIGRATING, last_backfill=_completion(**overrides))

    result = backfill_verified(state, BackfillDirection.FORWARD)

    assert not result.passed
    assert problem in result.detail


def test_given_no_run_recorded_then_the_check_fails() -> None:
    result = backfill_verified(_state(Phase.ROLLING_BACK), BackfillDirection.ROLLBACK)

    assert not result.passed
    assert result.detail == "no rollback backfill has been recorded"


# ---- re-shard: sharded(N) -> resharding(N -> M) -> sharded(M), and its abort --------------------

S32, S8 = Layout.sharded(32), Layout.sharded(8)


@pytest.mark.parametrize(("m", "kind"), [(32, "split"), (8, "merge")])
def test_given_sharded_then_resharding_moves_to_2n_or_n_over_2_never_blocked(
    m: int, kind: str
) -> None:
    move = plan_move(_state(Phase.SHARDED), "resharding", shard_count=m)

    assert (move.layout, move.moving_to) == (S16, Layout.sharded(m))
    assert move.completes is None
    assert reshard_targets(16)[m] == kind


@pytest.mark.parametrize(
    ("n", "allowed"), [(16, "allowed: 8 (merge) or 32 (split)"), (1, "allowed: 2 (split)")]
)
@pytest.mark.parametrize("m", [None, 4, 12, 64, 0, 2048])
def test_given_sharded_then_a_shards_that_is_not_one_factor_of_two_is_refused_naming_the_values(
    n: int, allowed: str, m: int | None
) -> None:
    sharded = _state(Phase.SHARDED)
    assert sharded.transition is not None
    state = replace(sharded, transition=replace(sharded.transition, layout=Layout.sharded(n)))
    if m is not None and m in reshard_targets(n):
        return
    with pytest.raises(TransitionNotAllowedError) as refused:
        plan_move(state, "resharding", shard_count=m)

    assert isinstance(refused.value, InvalidInputError)  # the CLI's exit 2
    assert allowed in str(refused.value)


def test_given_the_largest_n_then_only_the_merge_is_allowed() -> None:
    assert describe_reshard_targets(reshard_targets(1024)) == "512 (merge)"


def test_given_resharding_then_sharded_completes_the_move_to_m_guarded_by_a_forward_backfill() -> (
    None
):
    move = plan_move(_state(Phase.RESHARDING), "sharded")

    assert (move.layout, move.moving_to, move.completes) == (S32, None, BackfillDirection.FORWARD)
    assert plan_move(_state(Phase.RESHARDING), "sharded", shard_count=32).layout == S32
    with pytest.raises(TransitionNotAllowedError, match="--shards 16 disagrees"):
        plan_move(_state(Phase.RESHARDING), "sharded", shard_count=16)


def test_given_resharding_then_resharding_back_to_n_is_the_abort_swap_never_blocked() -> None:
    move = plan_move(_state(Phase.RESHARDING), "resharding", shard_count=16)

    assert (move.layout, move.moving_to, move.completes) == (S32, S16, None)


@pytest.mark.parametrize(("m", "problem"), [(None, "needs --shards 16"), (64, "--shards 64")])
def test_given_resharding_then_anything_but_the_abort_to_n_is_refused(
    m: int | None, problem: str
) -> None:
    with pytest.raises(TransitionNotAllowedError) as refused:
        plan_move(_state(Phase.RESHARDING), "resharding", shard_count=m)

    assert problem in str(refused.value)
    assert "allowed: 16 (abort: back to sharded(16))" in str(refused.value)


def test_given_a_resharding_state_then_the_backfill_check_wants_this_forward_move() -> None:
    run = _completion(source=S16, target=S32)
    state = _state(Phase.RESHARDING, last_backfill=run)

    assert backfill_verified(state, BackfillDirection.FORWARD).passed
    stale = _state(Phase.RESHARDING, last_backfill=_completion(source=S32, target=S16))
    result = backfill_verified(stale, BackfillDirection.FORWARD)
    assert not result.passed
    assert "not sharded(16) -> sharded(32)" in result.detail
