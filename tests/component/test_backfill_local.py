"""backfill_locally, the one local orchestration the CLI and the demo call, against moto: the
control record names the move, the run takes its lease, follows the record's throttle and pause
while it runs, and records its completion when it releases the lease.

The write pace runs on its own time (tests.support.pace_time): no test waits for the rate it
sets. Where a test needs the record's change to reach the run before the run could end, a
re-stamp waits for it (hold_restamps), rather than the test hoping the run is slow enough."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.backfill import BackfillRequest
from saga_index.layout_change.backfill.local import LocalBackfill, backfill_locally
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.wire import SegmentCounts
from saga_index.layout_change.lease import (
    LeaseDirectionError,
    LeaseHeldError,
    LeaseNotYetEffectiveError,
)
from saga_index.layout_change.lease.controls import pause_backfill, resume_backfill, set_throttle
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.transitions.rules import backfill_verified
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    CHANGED_AT,
    VALID,
    Clock,
    N,
    assert_every_valid_saga_on_its_shard,
    data_rows,
    plant,
    request,
    seed,
)
from tests.support.control_seed import transition
from tests.support.pace_time import PaceTime

FAST_POLL = 0.02  # seconds between heartbeats: the record's changes reach the run at once


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("local-backfill", synthesized_template, endpoint_url=None)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def operator(dynamo: Backend) -> ControlStore:
    """Another process's view of the record (its own client): the operator's CLI."""
    return ControlStore(dynamo.new_client(), dynamo.table_name)


def run_locally(
    dynamo: Backend,
    clock: Clock,
    req: BackfillRequest | None = None,
    *,
    holder: str = "alice@laptop/4242",
    pace: PaceTime | None = None,
    **kwargs: Any,
) -> LocalBackfill:
    req = req or request(segments=3)
    pace = pace or PaceTime()
    return backfill_locally(
        dynamo.client,
        dynamo.table_name,
        req,
        holder=holder,
        # The lease's writes on a client of their own: hooks on dynamo.client see re-stamps only.
        store=ControlStore(dynamo.new_client(), dynamo.table_name),
        clock=clock,
        poll_seconds=FAST_POLL,
        # Heartbeat ages on a clock that stands still: a loaded machine's slow heartbeat thread
        # cannot trip the clock fence (its own tests move it); the transactional fence and the
        # heartbeats still decide.
        monotonic=lambda: 0.0,
        # The run's own bucket (as paced_bucket makes it) on the pace's own time.
        bucket=TokenBucket(
            req.max_writes_per_second,
            clock=pace,
            sleep=pace.sleep,
            rules=req.pace_rules(),
            segments=req.total_segments,
        ),
        **kwargs,
    )


def count_restamps(dynamo: Backend) -> list[int]:
    writes: list[int] = []
    # On moto every re-stamp is fenced: a TransactWriteItems (the lease's heartbeats are
    # UpdateItems of the STATE item).
    dynamo.client.meta.events.register(
        "after-call.dynamodb.TransactWriteItems", lambda **_: writes.append(1)
    )
    return writes


def test_given_the_record_migrating_then_the_run_moves_reads_back_and_records_its_completion(
    dynamo: Backend, clock: Clock
) -> None:
    # Given legacy sagas, anomalies and other entities, and the record in `migrating`
    seed(dynamo)
    planted = plant(dynamo, "migrating")
    totals: list[SegmentCounts] = []
    inside = threading.Event()
    queries_inside: list[str] = []

    def count_queries(**_: Any) -> None:
        if inside.is_set():
            queries_inside.append("Query")

    @contextlib.contextmanager
    def while_running() -> Iterator[None]:
        inside.set()
        yield
        inside.clear()

    dynamo.client.meta.events.register("before-call.dynamodb.Query", count_queries)

    # When it runs with a progress callback and a context around the run
    outcome = run_locally(
        dynamo,
        clock,
        on_progress=lambda t: totals.append(t.model_copy()),
        while_running=while_running(),
    )

    # Then the run moved legacy -> sharded(16) as the record says, and verified it
    summary = outcome.summary
    assert outcome.run.complete
    assert (outcome.move.source, outcome.move.target) == (LEGACY, Layout.sharded(N))
    assert summary.complete
    assert summary.verified
    assert (summary.restamped, summary.anomalies) == (len(VALID), len(ANOMALIES))
    assert queries_inside == []
    assert_every_valid_saga_on_its_shard(dynamo)
    handled = [t.handled for t in totals]
    assert handled == sorted(handled)
    assert handled[-1] == summary.restamped + summary.anomalies
    # and the record holds its completion, which is what `phase set sharded` checks
    state = operator(dynamo).read()
    assert state.lease is None
    recorded = state.last_backfill
    assert recorded is not None
    assert recorded == outcome.completion
    assert (recorded.holder, recorded.state_version) == ("alice@laptop/4242", planted.version)
    assert (recorded.restamped, recorded.anomalies, recorded.complete, recorded.verified) == (
        len(VALID),
        len(ANOMALIES),
        True,
        True,
    )
    assert backfill_verified(state, BackfillDirection.FORWARD).passed
    events = [e["event"] for e in operator(dynamo).events()]
    assert sorted(events) == ["lease-acquired", "lease-released"]  # one instant: any order


@pytest.mark.parametrize(
    ("phase", "direction", "problem"),
    [
        ("legacy", "forward", "needs the record in phase migrating or sharded"),
        ("migrating", "rollback", "needs the record in phase rolling-back"),
        ("rolling-back", "forward", "needs the record in phase migrating or sharded"),
        ("sharded", "rollback", "needs the record in phase rolling-back"),
    ],
)
def test_given_a_direction_the_record_disagrees_with_then_nothing_runs(
    dynamo: Backend, clock: Clock, phase: str, direction: str, problem: str
) -> None:
    seed(dynamo)
    plant(dynamo, phase)
    before = dynamo.scan_all()
    entered: list[bool] = []

    @contextlib.contextmanager
    def while_running() -> Iterator[None]:
        entered.append(True)
        yield

    for dry_run in (False, True):
        with pytest.raises(LeaseDirectionError, match=problem):
            run_locally(
                dynamo,
                clock,
                request(direction, dry_run=dry_run),
                while_running=while_running(),
            )

    assert entered == []
    assert dynamo.scan_all() == before  # no lease taken either


def test_given_the_record_sharded_then_a_forward_run_moves_rows_repaired_later(
    dynamo: Backend, clock: Clock
) -> None:
    seed(dynamo, VALID[:3])
    plant(dynamo, "sharded")
    outcome = run_locally(dynamo, clock)
    assert (outcome.move.source, outcome.move.target) == (LEGACY, Layout.sharded(N))
    assert outcome.summary.restamped == 3
    assert outcome.completion is not None


def test_given_a_state_younger_than_its_effective_at_then_the_run_is_refused_with_the_wait(
    dynamo: Backend,
) -> None:
    seed(dynamo, VALID[:3])
    plant(dynamo, "migrating")
    before = dynamo.scan_all()
    early = Clock(CHANGED_AT + timedelta(seconds=10))  # effectiveAt is changedAt + 75 s

    with pytest.raises(LeaseNotYetEffectiveError, match="Wait 65 s and start again"):
        run_locally(dynamo, early)

    assert dynamo.scan_all() == before
    # a dry run writes nothing, so it need not wait
    dry = run_locally(dynamo, early, request(dry_run=True))
    assert dry.summary.would_restamp == 3
    assert dry.completion is None
    assert dynamo.scan_all() == before


def test_given_another_runs_live_lease_then_refused_naming_it_and_allowed_once_it_expired(
    dynamo: Backend, clock: Clock
) -> None:
    # Given a run elsewhere that took the lease and then died (it never heartbeats again)
    seed(dynamo, VALID[:4])
    plant(dynamo, "migrating")
    dead = acquire_lease(
        operator(dynamo),
        holder="bob@ci/77",
        token="bobs-run",
        direction="forward",
        clock=clock,
    )
    # When another run starts within its TTL
    with pytest.raises(LeaseHeldError) as held:
        run_locally(dynamo, clock)
    # Then it is refused, naming the holder and its expiry, and nothing moved
    assert "'bob@ci/77'" in str(held.value)
    assert held.value.expires_at in str(held.value)
    assert all(
        raw["GSI4PK"]["S"] == keys.LEGACY_GSI4PK
        for raw in data_rows(dynamo)
        if raw["PK"]["S"].startswith("RSAGA#")
    )
    # When the dead run's lease has expired (the clock, not a sleep)
    clock.now = dead.lease.expires_at
    outcome = run_locally(dynamo, clock)
    # Then the new run takes it over and converges
    assert outcome.summary.verified
    assert outcome.summary.restamped == 4
    state = operator(dynamo).read()
    assert state.last_backfill is not None
    assert state.last_backfill.holder == "alice@laptop/4242"


def run_in_thread(
    target: Callable[[], LocalBackfill],
) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["outcome"] = target()
        except BaseException as err:  # noqa: BLE001 - handed back to the test
            box["error"] = err
            # What the test's assertion shows: where it was raised, not only what.
            box["traceback"] = traceback.format_exc()

    thread = threading.Thread(target=work)
    thread.start()
    return thread, box


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def hold_restamps(dynamo: Backend, *, after: int, until: Callable[[], bool]) -> None:
    """Every re-stamp past the first `after` waits, before it is sent, until `until()` (once
    true, no re-stamp waits again): the run cannot end before what the test does meanwhile
    reached it, however loaded the machine."""
    attempts: list[int] = []
    released = threading.Event()
    lock = threading.Lock()

    def hold(**_: Any) -> None:
        with lock:
            attempts.append(1)
            held = len(attempts) > after
        if held and not released.is_set():
            wait_for(until)
            released.set()

    dynamo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", hold)


def test_given_a_pause_from_another_process_then_the_run_stops_writing_until_resumed(
    dynamo: Backend, clock: Clock
) -> None:
    # Given a run re-stamping 24 rows at 40 writes/s (its fourth re-stamp on waits for the pause)
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    writes = count_restamps(dynamo)
    applied: list[bool] = []  # the pause flag of every record state the run applied
    hold_restamps(dynamo, after=3, until=lambda: bool(applied) and applied[-1])
    pace = PaceTime()
    thread, box = run_in_thread(
        lambda: run_locally(
            dynamo,
            clock,
            request(segments=2, rate=40),
            pace=pace,
            on_control=lambda state: applied.append(state.backfill_paused),
        )
    )
    wait_for(lambda: len(writes) >= 3)
    # When the operator pauses it (another client, another process)
    pause_backfill(operator(dynamo), changed_by="operator", reason="peak traffic")
    # Then, once a heartbeat brought the pause to the run, no segment starts another write: at
    # most the one each of the two segments had begun lands (waiting on the run's own signal,
    # not a fixed time: on a loaded machine a heartbeat can come late)
    wait_for(lambda: bool(applied) and applied[-1])
    paused_at = len(writes)
    since = pace.now
    wait_for(lambda: pace.now >= since + 0.5)  # 20 writes' worth at the run's pace
    assert len(writes) <= paused_at + 2
    assert len(writes) < len(VALID)
    assert thread.is_alive()
    # and it still holds (and heartbeats) its lease
    held = operator(dynamo).read().lease
    assert held is not None
    assert held.holder == "alice@laptop/4242"
    # When it is resumed
    resume_backfill(operator(dynamo), changed_by="operator")
    thread.join(timeout=30)
    # Then it finishes, converges and records its completion
    assert "error" not in box, box
    outcome: LocalBackfill = box["outcome"]
    assert outcome.summary.verified
    assert outcome.summary.restamped == len(VALID)
    assert_every_valid_saga_on_its_shard(dynamo)
    recorded = operator(dynamo).read().last_backfill
    assert recorded is not None
    assert (recorded.complete, recorded.verified, recorded.restamped) == (True, True, len(VALID))


def test_given_a_throttle_above_the_runs_own_cap_then_the_run_keeps_its_own(
    dynamo: Backend, clock: Clock
) -> None:
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    writes = count_restamps(dynamo)
    throttles: list[float | None] = []  # the throttle of every record state the run applied
    hold_restamps(dynamo, after=2, until=lambda: 1000 in throttles)
    pace = PaceTime()
    thread, box = run_in_thread(
        lambda: run_locally(
            dynamo,
            clock,
            request(segments=2, rate=10),
            pace=pace,
            on_control=lambda state: throttles.append(state.backfill_max_writes_per_second),
        )
    )
    wait_for(lambda: len(writes) >= 2)
    # A throttle is a ceiling: 1,000/s from another process does not raise the run's 10/s
    started = pace.now
    set_throttle(operator(dynamo), 1000, changed_by="operator", reason="off-peak")
    thread.join(timeout=30)
    assert "error" not in box, box
    outcome: LocalBackfill = box["outcome"]
    assert outcome.summary.applied_max_writes_per_second == [10.0]
    # the 22 rows left still took their time at 10/s (at 1,000/s: a few hundredths): the two
    # held re-stamps had their tokens, one more was banked, 19 came a tenth of a second apart
    assert pace.now - started >= 1.9 - 1e-9
    assert outcome.summary.verified
    assert outcome.completion is not None


def test_given_a_record_throttled_and_paused_before_the_run_then_it_starts_that_way(
    dynamo: Backend, clock: Clock
) -> None:
    seed(dynamo, VALID[:6])
    plant(dynamo, "migrating")
    set_throttle(operator(dynamo), 7, changed_by="operator")
    pause_backfill(operator(dynamo), changed_by="operator")
    writes = count_restamps(dynamo)
    pace = PaceTime()
    thread, box = run_in_thread(lambda: run_locally(dynamo, clock, pace=pace))
    wait_for(lambda: pace.now >= 1.0)  # 7 writes' worth at the record's throttle
    assert writes == []
    resume_backfill(operator(dynamo), changed_by="operator")
    thread.join(timeout=30)
    assert "error" not in box, box
    assert box["outcome"].summary.applied_max_writes_per_second == [7.0]
    assert box["outcome"].summary.restamped == 6


def test_given_a_transition_while_the_run_is_in_flight_then_it_stops_and_records_nothing(
    dynamo: Backend, clock: Clock
) -> None:
    # Given a run of the forward move at 10 writes/s (its third re-stamp on waits for its stop)
    seed(dynamo, VALID)
    plant(dynamo, "migrating")
    writes = count_restamps(dynamo)
    stop = threading.Event()
    hold_restamps(dynamo, after=2, until=stop.is_set)
    thread, box = run_in_thread(
        lambda: run_locally(dynamo, clock, request(segments=2, rate=10), stop=stop)
    )
    wait_for(lambda: len(writes) >= 2)
    # When the operator aborts the migration (`phase set rolling-back`: version 2)
    abort = transition(Layout.sharded(N), LEGACY, version=2, previous=(LEGACY, Layout.sharded(N)))
    assert operator(dynamo).compare_and_set(1, abort)
    thread.join(timeout=30)
    # Then the run lost its lease at its next heartbeat, stopped, and recorded nothing
    assert "error" not in box, box
    outcome: LocalBackfill = box["outcome"]
    assert outcome.lease_lost is not None
    assert "moved to version 2" in outcome.lease_lost
    assert outcome.completion is None
    assert not outcome.summary.complete
    assert outcome.summary.restamped < len(VALID)
    assert operator(dynamo).read().last_backfill is None


def test_given_a_stopped_run_then_it_is_incomplete_without_a_read_back_and_records_so(
    dynamo: Backend, clock: Clock
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    stop = threading.Event()
    stop.set()

    outcome = run_locally(dynamo, clock, stop=stop)

    assert outcome.run.interrupted
    assert not outcome.summary.complete
    assert outcome.summary.verification is None
    assert outcome.summary.restamped == 0
    state = operator(dynamo).read()
    assert state.lease is None  # released, so the next run need not wait for its TTL
    assert state.last_backfill is not None
    assert (state.last_backfill.complete, state.last_backfill.verified) == (False, False)
    assert not backfill_verified(state, BackfillDirection.FORWARD).passed


def test_given_a_dry_run_then_no_lease_is_taken_and_nothing_is_recorded(
    dynamo: Backend, clock: Clock
) -> None:
    seed(dynamo)
    plant(dynamo, "migrating")
    before = dynamo.scan_all()
    outcome = run_locally(dynamo, clock, request(dry_run=True))
    assert outcome.summary.would_restamp == len(VALID)
    assert outcome.ticket.lease_token is None
    assert outcome.completion is None
    assert dynamo.scan_all() == before
    assert operator(dynamo).events() == []


def test_given_sharded_then_a_forward_run_moves_a_misrouted_row_to_its_write_key(
    dynamo: Backend, clock: Clock
) -> None:
    # Given sharded(16), a saga on its person's key, and one misrouted onto #8 (its person's
    # key is another one): a reader of the person never looks at #8
    plant(dynamo, "sharded")
    home = keys.shard_gsi4pk_for_person("p-3", N)
    wrong = next(k for k in keys.all_shard_gsi4pks(N) if k != home)
    dynamo.put_saga("right", "p-3", gsi4pk=home)
    dynamo.put_saga("misrouted", "p-3", gsi4pk=wrong)

    # When the forward run runs in sharded
    outcome = run_locally(dynamo, clock, request(segments=2))

    # Then it moved the misrouted row to the write key, touched nothing else, and verified
    assert outcome.summary.restamped == 1
    assert outcome.summary.verified
    assert outcome.summary.verification is not None
    assert keys.sharded_gsi4pk(0) in outcome.summary.verification.partitions
    for saga_id in ("right", "misrouted"):
        raw = dynamo.get(f"RSAGA#{saga_id}", "META")
        assert raw is not None
        assert raw["GSI4PK"]["S"] == home
