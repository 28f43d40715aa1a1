"""The control record in a real table: transitions, the compare-and-set race, history and its
repair, missing records, and the backfill lease. One contract, run on moto here and on dynalite
in tests/conformance/test_control_dynalite.py. Clocks are injected: nothing sleeps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from saga_index.index import names
from saga_index.index.errors import InvalidInputError, RetryLaterError
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.lease import (
    LeaseDirectionError,
    LeaseHeldError,
    LeaseLostError,
    LeaseNotYetEffectiveError,
)
from saga_index.layout_change.lease.controls import pause_backfill, resume_backfill, set_throttle
from saga_index.layout_change.lease.errors import InvalidBackfillControlError
from saga_index.layout_change.lease.grant import (
    LEASE_TTL_SECONDS,
    acquire_lease,
    heartbeat_lease,
    new_lease_token,
    release_lease,
)
from saga_index.layout_change.record.errors import ControlRecordMissingError, VersionConflictError
from saga_index.layout_change.record.items import STATE_SK, history_sk
from saga_index.layout_change.record.phase import Phase
from saga_index.layout_change.record.routing import routing_for
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    RecordCondition,
    Transition,
)
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.transitions import (
    PreconditionFailedError,
    PreconditionResult,
    executor,
    restore_state,
)
from saga_index.layout_change.transitions.errors import TransitionNotAllowedError
from saga_index.layout_change.transitions.rules import Precondition
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, moto_backend, set_phase

S16 = Layout.sharded(16)


def passing(name: str) -> Precondition:
    return Precondition(name, lambda state: PreconditionResult(name, True, "clean"))


def failing(name: str, detail: str) -> Precondition:
    return Precondition(name, lambda state: PreconditionResult(name, False, detail))


class ControlContract:
    """Subclasses provide `dynamo` (a Backend with a fresh table)."""

    @pytest.fixture
    def store(self, dynamo: Backend) -> ControlStore:
        return ControlStore(dynamo.client, dynamo.table_name)

    @pytest.fixture
    def clock(self) -> Clock:
        return Clock()

    # ---- helpers ---------------------------------------------------------------------------

    def _set(self, store: ControlStore, clock: Clock, phase: str, **kwargs: Any) -> ControlState:
        kwargs.setdefault("reason", f"to {phase}")
        change = set_phase(store, phase, changed_by="ops", clock=clock, **kwargs)
        return change.state

    # ---- the writers' switch at effectiveAt -------------------------------------------------

    def test_given_an_abort_before_migrating_was_due_then_writers_stay_on_legacy_throughout(
        self, store: ControlStore, clock: Clock, dynamo: Backend
    ) -> None:
        migrating = self._set(store, clock, "migrating", shard_count=16)
        clock.advance(10)
        aborted = self._set(store, clock, "rolling-back")
        raw = dynamo.client.get_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": names.CONTROL_PK}, "SK": {"S": STATE_SK}},
            ConsistentRead=True,
        )["Item"]
        history = dynamo.client.query(
            TableName=dynamo.table_name,
            KeyConditionExpression="PK = :pk AND begins_with(SK, :history)",
            ExpressionAttributeValues={
                ":pk": {"S": names.CONTROL_PK},
                ":history": {"S": "HISTORY#"},
            },
            ConsistentRead=True,
        )["Items"]

        assert migrating.prior_write == LEGACY
        assert raw["priorWriteLayout"] == {"S": "legacy"}
        assert "priorWriteShardCount" not in raw
        assert [h["priorWriteLayout"] for h in history] == [{"S": "legacy"}, {"S": "legacy"}]
        assert aborted.effective_at is not None
        for moment in (clock.now, aborted.effective_at, aborted.effective_at + timedelta(hours=1)):
            assert routing_for(aborted, moment).write_key("p-1") == "RenewalSaga"

    def test_given_a_move_opened_then_writers_switch_to_the_target_at_its_effective_at(
        self, store: ControlStore, clock: Clock
    ) -> None:
        migrating = self._set(store, clock, "migrating", shard_count=16)
        assert migrating.effective_at is not None
        due = migrating.effective_at

        assert routing_for(migrating, due - timedelta(milliseconds=1)).writes == LEGACY
        assert routing_for(migrating, due).writes == S16
        clock.advance((due - clock.now).total_seconds() + 1)
        rolling_back = self._set(store, clock, "rolling-back")
        assert rolling_back.prior_write == S16  # the abort came after migrating was due
        assert rolling_back.effective_at is not None
        assert routing_for(rolling_back, rolling_back.effective_at).writes == LEGACY

    def _run_backfill(
        self, store: ControlStore, clock: Clock, direction: str, *, verified: bool = True
    ) -> ControlState:
        """A whole run as a runner does it: wait for effectiveAt, lease, heartbeat, release."""
        state = store.read()
        assert state.effective_at is not None
        clock.now = max(clock.now, state.effective_at)
        token = new_lease_token()
        grant = acquire_lease(store, holder="runner", token=token, direction=direction, clock=clock)
        started = clock.now
        clock.advance(30)
        heartbeat_lease(store, token=token, clock=clock)
        clock.advance(30)
        completion = BackfillCompletion(
            direction=BackfillDirection(direction),
            source=grant.source,
            target=grant.target,
            state_version=grant.lease.state_version,
            started_at=started,
            completed_at=clock.now,
            scanned=10,
            restamped=10,
            anomalies=0,
            complete=True,
            verified=verified,
            holder="runner",
            lease_token=token,
        )
        return release_lease(store, token=token, completion=completion, clock=clock)

    # ---- records and transitions -----------------------------------------------------------

    def test_given_an_empty_table_then_the_record_reads_as_never_migrated_legacy(
        self, store: ControlStore
    ) -> None:
        state = store.read()

        assert state.condition is RecordCondition.NEVER_MIGRATED
        assert (state.phase, state.version) == (Phase.LEGACY, 0)

    def test_given_the_whole_cutover_and_rollback_then_each_step_is_versioned_and_in_history(
        self, store: ControlStore, clock: Clock
    ) -> None:
        checks = [passing("drift-clean"), passing("parity")]

        migrating = self._set(store, clock, "migrating", shard_count=16)
        self._run_backfill(store, clock, "forward")
        sharded = self._set(store, clock, "sharded", checks=checks)
        self._set(store, clock, "rolling-back")
        self._run_backfill(store, clock, "rollback")
        legacy = self._set(store, clock, "legacy", checks=checks)

        assert (migrating.layout, migrating.moving_to) == (LEGACY, S16)
        assert (sharded.phase, sharded.shard_count, sharded.version) == (Phase.SHARDED, 16, 2)
        assert (legacy.phase, legacy.version) == (Phase.LEGACY, 4)
        history = store.history()
        assert [(h.version, h.previous_phase.value, h.phase.value) for h in history] == [
            (1, "legacy", "migrating"),
            (2, "migrating", "sharded"),
            (3, "sharded", "rolling-back"),
            (4, "rolling-back", "legacy"),
        ]
        assert history[1].checks_passed == ("backfill-verified", "drift-clean", "parity")
        assert history[0].effective_at == history[0].changed_at + timedelta(seconds=75)

    def test_given_migrating_when_aborted_then_source_and_target_swap_without_checks(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")

        aborted = self._set(store, clock, "rolling-back", checks=[failing("parity", "red")])
        resumed = self._set(store, clock, "migrating")

        assert (aborted.layout, aborted.moving_to) == (S16, LEGACY)
        assert (resumed.layout, resumed.moving_to) == (LEGACY, S16)

    def test_given_no_verified_backfill_then_sharded_is_refused_listing_every_failed_check(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        clock.now = (store.read().effective_at or clock.now) + timedelta(seconds=15)

        with pytest.raises(PreconditionFailedError) as refused:
            self._set(store, clock, "sharded", checks=[failing("parity", "3 differences")])

        assert refused.value.to_json() == {
            "refused": True,
            "failed": [
                {
                    "name": "backfill-verified",
                    "passed": False,
                    "detail": "no forward backfill has been recorded",
                },
                {"name": "parity", "passed": False, "detail": "3 differences"},
            ],
        }
        assert store.read().version == 1
        assert [h.version for h in store.history()] == [1]

    def test_given_an_unverified_backfill_then_sharded_is_refused(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        self._run_backfill(store, clock, "forward", verified=False)

        with pytest.raises(PreconditionFailedError, match="verification did not pass"):
            self._set(store, clock, "sharded")

    def test_given_a_completing_move_before_effective_at_plus_the_margin_then_it_waits_forced_too(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        effective_at = store.read().effective_at
        assert effective_at is not None
        clock.now = effective_at + timedelta(seconds=15 - 0.001)
        for force in (False, True):
            with pytest.raises(RetryLaterError) as later:
                set_phase(store, "sharded", changed_by="ops", reason="r", force=force, clock=clock)
            assert later.value.retry_at == effective_at + timedelta(seconds=15)
        assert store.read().version == 1

    def test_given_force_with_a_reason_then_the_checks_are_skipped_and_recorded_as_forced(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        clock.now = (store.read().effective_at or clock.now) + timedelta(seconds=15)

        change = set_phase(
            store,
            "sharded",
            changed_by="ops",
            reason="incident 42: parity tool down",
            force=True,
            checks=[failing("parity", "down")],
            clock=clock,
        )

        assert change.forced == ("backfill-verified", "parity")
        assert store.history()[-1].checks_forced == ("backfill-verified", "parity")

    def test_given_no_reason_then_nothing_changes(self, store: ControlStore, clock: Clock) -> None:
        with pytest.raises(InvalidInputError, match="reason"):
            set_phase(store, "migrating", changed_by="ops", reason="  ", force=True)

    def test_given_a_disallowed_move_then_it_is_refused_and_nothing_is_written(
        self, store: ControlStore, clock: Clock
    ) -> None:
        with pytest.raises(TransitionNotAllowedError, match="Allowed from 'legacy': migrating"):
            self._set(store, clock, "sharded")

        assert store.read().condition is RecordCondition.NEVER_MIGRATED

    def test_given_two_operators_racing_then_the_loser_is_told_the_version_it_lost_to(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        self._run_backfill(store, clock, "forward")

        def rival_aborts(state: ControlState) -> PreconditionResult:
            # The other operator's whole `phase set` lands while this one runs its checks.
            set_phase(store, "rolling-back", changed_by="rival", reason="abort")
            return PreconditionResult("parity", True, "ok")

        with pytest.raises(VersionConflictError) as lost:
            self._set(store, clock, "sharded", checks=[Precondition("parity", rival_aborts)])

        assert (lost.value.expected_version, lost.value.actual_version) == (1, 2)
        assert "version 2" in str(lost.value)
        assert "rolling-back" in str(lost.value)
        assert store.read().phase is Phase.ROLLING_BACK

    def test_given_two_operators_starting_the_migration_at_once_then_one_loses(
        self, store: ControlStore, clock: Clock
    ) -> None:
        def rival_first() -> datetime:
            if store.read().version == 0:
                set_phase(store, "migrating", changed_by="rival", reason="me first")
            return clock.now

        with pytest.raises(VersionConflictError, match="version 0 to version 1"):
            set_phase(store, "migrating", changed_by="ops", reason="go", clock=rival_first)

    def test_given_a_crash_between_state_and_history_then_the_next_change_repairs_it(
        self, store: ControlStore, clock: Clock, dynamo: Backend
    ) -> None:
        self._set(store, clock, "migrating")
        dynamo.client.delete_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": names.CONTROL_PK}, "SK": {"S": history_sk(1)}},
        )
        assert [h.version for h in store.history()] == []

        self._set(store, clock, "rolling-back")

        assert [h.version for h in store.history()] == [1, 2]
        assert store.history()[0].phase is Phase.MIGRATING

    def test_given_history_written_then_repair_is_a_no_op(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")

        assert executor.repair_history(store) is False
        assert executor.repair_history(store) is False

    def test_given_a_retried_compare_and_set_whose_first_attempt_landed_then_it_succeeds(
        self, store: ControlStore, clock: Clock
    ) -> None:
        class LostResponse(ControlStore):
            def compare_and_set(self, expected_version: int, transition: Transition) -> bool:
                super().compare_and_set(expected_version, transition)
                return super().compare_and_set(expected_version, transition)

        retrying = LostResponse(store.client, store.table_name)

        change = set_phase(retrying, "migrating", changed_by="ops", reason="go", clock=clock)

        assert change.state.version == 1

    def test_given_the_record_deleted_after_a_migration_then_it_reads_missing_and_refuses_changes(
        self, store: ControlStore, clock: Clock, dynamo: Backend
    ) -> None:
        self._set(store, clock, "migrating")
        self._run_backfill(store, clock, "forward")
        self._set(store, clock, "sharded")
        dynamo.client.delete_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": names.CONTROL_PK}, "SK": {"S": STATE_SK}},
        )

        missing = store.read()

        assert missing.condition is RecordCondition.MISSING
        assert (missing.phase, missing.version) == (Phase.SHARDED, 2)
        with pytest.raises(ControlRecordMissingError, match="version 2"):
            self._set(store, clock, "rolling-back")
        with pytest.raises(ControlRecordMissingError):
            acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)
        with pytest.raises(ControlRecordMissingError):
            pause_backfill(store, changed_by="ops", clock=clock)
        restored = restore_state(store).state
        assert (restored.condition, restored.version) == (RecordCondition.PRESENT, 2)
        assert restored.last_backfill is None

    # ---- the lease -------------------------------------------------------------------------

    def _migrating_and_effective(self, store: ControlStore, clock: Clock) -> ControlState:
        state = self._set(store, clock, "migrating")
        assert state.effective_at is not None
        clock.now = state.effective_at
        return state

    def test_given_a_fresh_state_then_a_backfill_is_refused_until_effective_at(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        clock.advance(60)

        with pytest.raises(LeaseNotYetEffectiveError) as refused:
            acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)

        assert refused.value.seconds_to_wait == 15
        assert "Wait 15 s" in str(refused.value)

    @pytest.mark.parametrize(
        ("phases", "direction"),
        [((), "forward"), (("migrating",), "rollback"), (("migrating", "rolling-back"), "forward")],
    )
    def test_given_a_direction_that_disagrees_with_the_state_then_the_lease_is_refused(
        self, store: ControlStore, clock: Clock, phases: tuple[str, ...], direction: str
    ) -> None:
        for phase in phases:
            self._set(store, clock, phase)
        clock.advance(3600)

        with pytest.raises(LeaseDirectionError) as refused:
            acquire_lease(store, holder="h", token="t", direction=direction, clock=clock)

        assert isinstance(refused.value, InvalidInputError)

    def test_given_sharded_then_a_forward_run_may_move_rows_repaired_later(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        self._run_backfill(store, clock, "forward")
        state = self._set(store, clock, "sharded")
        assert state.effective_at is not None
        clock.now = state.effective_at

        grant = acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)

        assert (grant.source, grant.target) == (LEGACY, S16)

    def test_given_a_live_lease_then_a_second_run_is_refused_naming_the_holder(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="alice@laptop", token="a", direction="forward", clock=clock)

        with pytest.raises(LeaseHeldError, match="alice@laptop") as refused:
            acquire_lease(store, holder="bob", token="b", direction="forward", clock=clock)

        assert refused.value.expires_at == format_time(clock.now + timedelta(seconds=120))

    def test_given_a_dead_holder_then_its_lease_expires_and_can_be_taken_over(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="dead", token="a", direction="forward", clock=clock)
        clock.advance(LEASE_TTL_SECONDS)

        grant = acquire_lease(store, holder="bob", token="b", direction="forward", clock=clock)

        assert grant.lease.holder == "bob"
        with pytest.raises(LeaseLostError, match="taken over by 'bob'"):
            heartbeat_lease(store, token="a", clock=clock)

    def test_given_a_retried_acquire_or_heartbeat_then_the_same_token_succeeds(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        first = acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)
        again = acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)
        clock.advance(30)
        heartbeat_lease(store, token="t", clock=clock)
        state = heartbeat_lease(store, token="t", clock=clock)

        assert again.lease == first.lease
        assert state.lease is not None
        assert state.lease.expires_at == clock.now + timedelta(seconds=120)
        assert state.version == 1  # lease changes never bump the version

    def test_given_a_running_backfill_then_a_phase_change_still_wins_and_the_run_loses_its_lease(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)
        heartbeat_lease(store, token="t", clock=clock)

        aborted = self._set(store, clock, "rolling-back")

        assert aborted.version == 2
        with pytest.raises(LeaseLostError, match="version 2"):
            heartbeat_lease(store, token="t", clock=clock)

    def test_given_a_heartbeat_landing_during_a_phase_set_then_the_phase_set_still_wins(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        self._run_backfill(store, clock, "forward")
        acquire_lease(store, holder="h", token="t2", direction="forward", clock=clock)

        def heartbeat_meanwhile(state: ControlState) -> PreconditionResult:
            heartbeat_lease(store, token="t2", clock=clock)
            return PreconditionResult("parity", True, "ok")

        sharded = self._set(
            store, clock, "sharded", checks=[Precondition("parity", heartbeat_meanwhile)]
        )

        assert (sharded.phase, sharded.version) == (Phase.SHARDED, 2)

    def test_given_a_release_then_the_completion_is_recorded_and_a_retry_is_harmless(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._set(store, clock, "migrating")
        released = self._run_backfill(store, clock, "forward")
        again = release_lease(
            store,
            token=released.last_backfill.lease_token if released.last_backfill else "",
            completion=released.last_backfill,
            clock=clock,
        )

        assert released.lease is None
        assert released.last_backfill is not None
        assert released.last_backfill.verified
        assert again.last_backfill == released.last_backfill

    def test_given_a_run_that_stops_without_a_result_then_release_frees_the_lease_only(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="a", token="a", direction="forward", clock=clock)

        released = release_lease(store, token="a", clock=clock)
        again = release_lease(store, token="a", clock=clock)
        grant = acquire_lease(store, holder="b", token="b", direction="forward", clock=clock)

        assert released.lease is None
        assert released.last_backfill is None
        assert again.lease is None
        assert grant.lease.holder == "b"

    def test_given_a_transition_since_the_lease_then_the_same_token_takes_a_fresh_lease(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="a", token="a", direction="forward", clock=clock)
        rolling_back = self._set(store, clock, "rolling-back")
        assert rolling_back.effective_at is not None
        clock.now = rolling_back.effective_at

        grant = acquire_lease(store, holder="a", token="a", direction="rollback", clock=clock)

        assert (grant.lease.state_version, grant.lease.direction) == (2, BackfillDirection.ROLLBACK)
        assert (grant.source, grant.target) == (S16, LEGACY)

    def test_given_a_taken_over_lease_then_releasing_with_a_completion_fails(
        self, store: ControlStore, clock: Clock
    ) -> None:
        state = self._migrating_and_effective(store, clock)
        grant = acquire_lease(store, holder="a", token="a", direction="forward", clock=clock)
        clock.advance(LEASE_TTL_SECONDS)
        acquire_lease(store, holder="b", token="b", direction="forward", clock=clock)
        completion = BackfillCompletion(
            BackfillDirection.FORWARD,
            grant.source,
            grant.target,
            state.version,
            clock.now,
            clock.now,
            1,
            1,
            0,
            True,
            True,
            "a",
            "a",
        )

        with pytest.raises(LeaseLostError, match="not recorded"):
            release_lease(store, token="a", completion=completion, clock=clock)

    def test_given_throttle_pause_and_resume_then_the_record_and_events_follow(
        self, store: ControlStore, clock: Clock
    ) -> None:
        self._migrating_and_effective(store, clock)
        acquire_lease(store, holder="h", token="t", direction="forward", clock=clock)

        clock.advance(1)
        set_throttle(store, 5, changed_by="ops", reason="hot partition", clock=clock)
        clock.advance(1)
        paused = pause_backfill(store, changed_by="ops", clock=clock)
        seen_by_worker = heartbeat_lease(store, token="t", clock=clock)
        clock.advance(1)
        resumed = resume_backfill(store, changed_by="ops", clock=clock)

        assert paused.backfill_paused
        assert seen_by_worker.backfill_paused
        assert seen_by_worker.backfill_max_writes_per_second == 5.0
        assert not resumed.backfill_paused
        assert resumed.version == 1
        events = [e["event"] for e in store.events()]
        assert events == ["lease-acquired", "throttle", "pause", "resume"]

    @pytest.mark.parametrize("rate", [0, -1, 1e-300, 0.09, 1000.5, float("nan"), True, "10"])
    def test_given_a_throttle_outside_the_backfills_bounds_then_it_is_refused(
        self, store: ControlStore, clock: Clock, rate: Any
    ) -> None:
        self._set(store, clock, "migrating")

        with pytest.raises(InvalidBackfillControlError, match=r"from 0\.1 to 1000"):
            set_throttle(store, rate, changed_by="ops", clock=clock)

    def test_given_no_record_yet_then_throttle_is_refused_and_creates_nothing(
        self, store: ControlStore, clock: Clock
    ) -> None:
        with pytest.raises(InvalidBackfillControlError, match="no control record yet"):
            set_throttle(store, 10, changed_by="ops", clock=clock)

        assert store.read().condition is RecordCondition.NEVER_MIGRATED


class TestControlOnMoto(ControlContract):
    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any]) -> Iterator[Backend]:
        with moto_backend("moto", synthesized_template) as backend:
            yield backend
