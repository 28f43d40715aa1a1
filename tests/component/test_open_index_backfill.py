"""The open-saga index's backfill on the layout backfill's machinery, against moto (which has
TransactWriteItems: the transactional fence): the run takes the record's one lease with its
kind, stamps the open rows that predate `adding` through its fence slots at the cap, never
re-stamps a saga a writer closed meanwhile, removes every stamp in `removing`, and a paused
stale run writes nothing once a newer run armed the fence. Clocks are injected."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from saga_index.index import InvalidInputError, RetryLaterError, names
from saga_index.layout_change.backfill import (
    MAX_OPEN_STATE_MACHINE_SEGMENTS,
    BackfillRequest,
    LocalBackfill,
    OpenVerify,
    PlanRequest,
    SegmentRequest,
    TokenBucket,
    VerifyRequest,
    backfill_locally,
    run_leased_segment,
    verify_run,
)
from saga_index.layout_change.backfill.steps import plan_run
from saga_index.layout_change.lease import (
    LeaseHeldError,
    LeaseLostError,
    acquire_lease,
    new_lease_token,
    open_index_direction,
    release_lease,
)
from saga_index.layout_change.record import (
    BackfillKind,
    ControlStore,
    OpenIndexState,
    state_key,
)
from saga_index.layout_change.record.items import LEASE_KIND
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index.store.dynamo.codec import deserialize
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock
from tests.support.open_index import Moves, open_index_fixtures
from tests.support.pace_time import PaceTime

OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
dynamo, clock, store = open_index_fixtures("open-backfill")


def move(store: ControlStore, clock: Clock, to: str, *, settle: bool = True) -> None:
    Moves(store, clock)(to, settle=settle)


def run(
    store: ControlStore,
    clock: Clock,
    *,
    dry_run: bool = False,
    rate: float = 1000.0,
    segments: int = 2,
    client: Any = None,
    **kw: Any,
) -> LocalBackfill:
    request = BackfillRequest(
        direction=open_index_direction(store.read()),
        kind=BackfillKind.OPEN_INDEX,
        total_segments=segments,
        max_writes_per_second=rate,
        dry_run=dry_run,
    )
    return backfill_locally(
        client or store.client,
        store.table_name,
        request,
        holder=kw.pop("holder", "tester@host/1"),
        store=kw.pop("run_store", store),
        clock=clock,
        poll_seconds=0.05,
        open_verify=OpenVerify(recheck_delay_seconds=0),
        **kw,
    )


def row(dynamo: Backend, saga_id: str) -> dict[str, Any]:
    item = dynamo.get(f"RSAGA#{saga_id}", "META")
    assert item is not None
    return deserialize(item)


def stamped(dynamo: Backend) -> list[str]:
    return sorted(
        raw["sagaId"]["S"]
        for raw in dynamo.scan_all()
        if raw.get("entityType", {}).get("S") == "RenewalSaga" and OPEN_KEY in raw
    )


def row_writes(client: Any, on_write: Any) -> None:
    """Call on_write(table PK) before every fenced row write the run sends."""

    def hook(params: dict[str, Any], **_: Any) -> None:
        for action in params.get("TransactItems", []):
            if "Update" in action:
                on_write(action["Update"]["Key"]["PK"]["S"])

    def plain(params: dict[str, Any], **_: Any) -> None:
        # A run with the clock fence only writes a row with its own UpdateItem.
        if params["Key"]["PK"]["S"] != names.CONTROL_PK:
            on_write(params["Key"]["PK"]["S"])

    client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems", hook)
    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", plain)


def test_the_run_stamps_old_open_rows_under_its_lease_and_never_restamps_a_closed_saga(
    store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    for n in range(4):
        dynamo.put_saga(f"old{n}", f"p-{n}")
    dynamo.put_saga("stale", "p-7", state="SIGNED", **{OPEN_KEY: "RenewalSagaOpen#2"})
    with pytest.raises(InvalidInputError, match="off"):
        open_index_direction(store.read())
    move(store, clock, "adding", settle=False)
    with pytest.raises(RetryLaterError, match="in-flight margin"):
        run(store, clock)
    assert store.read().lease is None
    clock.now = store.read().effective_at + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS + 1)  # type: ignore[operator]

    dry = run(store, clock, dry_run=True).summary
    assert dry.open is not None
    # Scanned: every item of the table (the control record's too), as the layout run counts.
    assert (dry.would_restamp, dry.open.would_remove) == (5, 1)
    assert dry.scanned >= 5
    assert stamped(dynamo) == ["stale"]

    # A writer closes old1 after the Scan read it open and before its stamp.
    closed: list[str] = []
    kinds: list[str | None] = []

    def close_old1(pk: str) -> None:
        if pk == "RSAGA#old1" and not closed:
            closed.append(pk)
            dynamo.put_saga("old1", "p-1", state="DECLINED")
        state_item = dynamo.get(*state_key().values())
        kinds.append(None if state_item is None else state_item.get(LEASE_KIND, {}).get("S"))

    row_writes(dynamo.client, close_old1)
    done = run(store, clock)
    summary = done.summary
    assert closed == ["RSAGA#old1"]
    assert summary.open is not None
    assert (summary.restamped, summary.open.removed, summary.skipped) == (4, 1, 1)
    assert summary.complete
    assert summary.verified, summary.verification
    assert OPEN_KEY not in row(dynamo, "old1")
    assert stamped(dynamo) == ["old0", "old2", "old3"]
    # It ran under the one lease, recorded with its kind, through the transactional fence.
    assert set(kinds) == {"open-index"}
    assert done.fence_mode == "transactional"
    after = store.read()
    assert after.lease is None
    assert LEASE_KIND not in (dynamo.get(*state_key().values()) or {})
    # No layout completion is recorded for it: `phase set` reads the layout's alone.
    assert done.completion is None
    assert after.last_backfill is None

    move(store, clock, "open")
    assert store.read().open_index.state is OpenIndexState.OPEN
    again = run(store, clock).summary
    assert (again.restamped, again.would_restamp, again.skipped) == (0, 0, 0)


def test_one_lease_a_layout_run_and_an_open_index_run_exclude_each_other(
    store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    dynamo.put_saga("old0", "p-0")
    move(store, clock, "adding")
    token = new_lease_token()
    acquire_lease(
        store,
        holder="open@host",
        token=token,
        direction="forward",
        clock=clock,
        kind=BackfillKind.OPEN_INDEX,
    )
    assert store.read().lease.kind is BackfillKind.OPEN_INDEX  # type: ignore[union-attr]
    # The layout's clean-up run (rollback in legacy) is refused while the open index's runs.
    with pytest.raises(LeaseHeldError, match=r"'open@host' \(open-index run\)"):
        acquire_lease(store, holder="layout@host", token="t2", direction="rollback", clock=clock)
    release_lease(store, token=token, clock=clock)

    layout = new_lease_token()
    acquire_lease(store, holder="layout@host", token=layout, direction="rollback", clock=clock)
    assert store.read().lease.kind is BackfillKind.LAYOUT  # type: ignore[union-attr]
    with pytest.raises(LeaseHeldError, match="'layout@host', live until"):
        run(store, clock)
    assert OPEN_KEY not in row(dynamo, "old0")


def test_the_rollback_removes_every_stamp(
    store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    for n in range(6):
        dynamo.put_saga(f"old{n}", f"p-{n}")
    dynamo.put_saga("done", "p-9", state="DECLINED")
    move(store, clock, "adding")
    assert run(store, clock).summary.verified
    assert stamped(dynamo) == [f"old{n}" for n in range(6)]

    move(store, clock, "removing")
    back = run(store, clock)
    assert back.ticket.direction.value == "rollback"
    assert back.summary.open is not None
    assert (back.summary.restamped, back.summary.open.removed) == (6, 6)
    assert back.summary.verified, back.summary.verification
    assert stamped(dynamo) == []
    # Every other attribute is kept.
    assert row(dynamo, "old3")["personId"] == "p-3"
    move(store, clock, "off")
    assert store.read().open_index.state is OpenIndexState.OFF


def test_the_run_holds_its_write_cap(store: ControlStore, dynamo: Backend, clock: Clock) -> None:
    for n in range(30):
        dynamo.put_saga(f"old{n:02}", f"p-{n}")
    move(store, clock, "adding")
    # The pace on its own time (tests.support.pace_time), the writes dated on it: a loaded
    # machine that sends one write late cannot make the ones after it look faster than the cap.
    # Three segments asleep at once all move it, so it runs ahead of the writes, never behind:
    # "the writes took at least this long at the cap" holds on it.
    pace = PaceTime()
    times: list[float] = []
    row_writes(dynamo.client, lambda _pk: times.append(pace.now))
    cap = 20.0
    bucket = TokenBucket(cap, clock=pace, sleep=pace.sleep, segments=3)
    summary = run(store, clock, rate=cap, segments=3, bucket=bucket).summary
    assert summary.restamped == 30
    assert summary.verified
    took = times[-1] - times[0]
    assert took >= (len(times) - 1) / (cap * 1.05), f"{len(times)} writes in {took:.2f} s"


PAUSE_AT_WRITE = 3


@pytest.mark.parametrize("transactional", [True, False], ids=["fenced", "clock-fence-only"])
def test_a_paused_stale_run_writes_nothing_after_a_newer_run_armed_the_fence(
    store: ControlStore, dynamo: Backend, clock: Clock, transactional: bool
) -> None:
    """Without the transactional fence (the known-bad variant: the clock fence only, its check
    passed before the pause) the same scenario leaves a stamp in `removing`."""
    for n in range(10):
        dynamo.put_saga(f"old{n}", f"p-{n}")
    move(store, clock, "adding")
    # The stale run: its own client; it stops between its fence check and its 3rd write (the
    # process paused), its heartbeats blocked with it.
    stale_client = dynamo.new_client()
    writes: list[str] = []
    paused, resume, heartbeats = threading.Event(), threading.Event(), threading.Event()

    def before_write(pk: str) -> None:
        writes.append(pk)
        if len(writes) == PAUSE_AT_WRITE:
            paused.set()
            resume.wait(timeout=60)

    def before_heartbeat(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["PK"]["S"] == names.CONTROL_PK and paused.is_set():
            heartbeats.wait(timeout=60)

    row_writes(stale_client, before_write)
    stale_client.meta.events.register(
        "before-parameter-build.dynamodb.UpdateItem", before_heartbeat
    )
    box: dict[str, LocalBackfill] = {}

    def stale() -> None:
        box["run"] = run(
            store,
            clock,
            segments=1,
            client=stale_client,
            holder="stale@host/1",
            run_store=ControlStore(stale_client, store.table_name),
            # The clock fence's ages stand still (the fence under test refuses, not the
            # clock); the run's pace stays on real time, or its bucket would never refill.
            monotonic=lambda: 100.0,
            bucket=TokenBucket(1000.0),
            transactional_fence=transactional,
        )

    thread = threading.Thread(target=stale, name="stale-run")
    thread.start()
    assert paused.wait(timeout=30), "the stale run never reached its pause"

    # Meanwhile: its lease expires, the operator rolls the open index back and a newer run
    # removes every stamp.
    clock.advance(600)
    move(store, clock, "removing")
    newer = run(store, clock)
    assert newer.summary.verified
    assert stamped(dynamo) == []
    assert newer.ticket.lease_epoch is not None

    # The stale run resumes: its in-flight stamp (SET IF OpenSagaPK still absent, which it is
    # again) goes out and is refused by DynamoDB on its fence slot; it writes nothing more.
    resume.set()
    for _ in range(200):
        if not thread.is_alive():
            break
        time.sleep(0.01)
    heartbeats.set()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(writes) >= PAUSE_AT_WRITE
    assert box["run"].lease_lost is not None
    if not transactional:
        # The in-flight stamp landed after the newer run removed every stamp.
        assert len(stamped(dynamo)) == 1
        return
    assert box["run"].fence_mode == "transactional"
    assert stamped(dynamo) == []
    assert store.read().open_index.state is OpenIndexState.REMOVING


EXECUTION = "arn:aws:states:eu-west-1:123456789012:execution:sm:run-1"


def test_the_state_machine_steps_run_an_open_index_run_as_the_local_run_does(
    store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    """plan, a worker per segment, verify (tests/component/test_open_index_state_machine.py
    runs them in the synthesised state machine)."""
    for n in range(3):
        dynamo.put_saga(f"old{n}", f"p-{n}")
    dynamo.put_saga("stale", "p-7", state="SIGNED", **{OPEN_KEY: "RenewalSagaOpen#2"})
    move(store, clock, "adding")
    request = BackfillRequest(
        direction="forward",
        kind=BackfillKind.OPEN_INDEX,
        total_segments=MAX_OPEN_STATE_MACHINE_SEGMENTS + 1,
        dry_run=False,
        verify_read_units_per_second=10_000.0,
    )
    # More segments than the state machine's state can carry: refused before the lease.
    with pytest.raises(InvalidInputError, match="at most"):
        plan_run(dynamo.client, dynamo.table_name, PlanRequest(request=request, holder=EXECUTION))
    assert store.read().lease is None

    request = request.model_copy(update={"total_segments": 2})
    plan = plan_run(
        dynamo.client, dynamo.table_name, PlanRequest(request=request, holder=EXECUTION)
    )
    lease = store.read().lease
    assert lease is not None
    assert (lease.holder, lease.kind) == (EXECUTION, BackfillKind.OPEN_INDEX)
    assert (plan.run.kind, plan.run.open_shard_count) == (BackfillKind.OPEN_INDEX, 16)
    results = []
    for number in plan.segments:
        segment = SegmentRequest.model_validate(
            {**plan.template, "segment": number, "run": plan.run.to_json()}
        )
        outcome = run_leased_segment(
            dynamo.client, dynamo.table_name, segment, remaining_seconds=lambda: 900.0
        )
        results.append(outcome.unwrap())
    verify = VerifyRequest(request=plan.request, run=plan.run, segments=results)
    summary = verify_run(dynamo.client, dynamo.table_name, verify, index_name=names.INDEX_NAME)

    assert summary.open is not None
    assert (summary.restamped, summary.open.removed, summary.complete) == (4, 1, True)
    assert summary.verified, summary.verification
    assert stamped(dynamo) == ["old0", "old1", "old2"]
    # Released by kind: no layout completion recorded.
    after = store.read()
    assert (after.lease, after.last_backfill) == (None, None)
    # A verify step retried after its release landed reads back again, recording nothing.
    again = verify_run(dynamo.client, dynamo.table_name, verify, index_name=names.INDEX_NAME)
    assert again.verified
    assert store.read() == after
    # Any other loss of the lease fails it: its verdict would not be this run's.
    other = verify.model_copy(update={"run": plan.run.model_copy(update={"lease_token": "x"})})
    with pytest.raises(LeaseLostError):
        verify_run(dynamo.client, dynamo.table_name, other, index_name=names.INDEX_NAME)
