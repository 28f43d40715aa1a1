"""The three backfill handlers on moto: parsed input, the run's lease in the control record
(taken by the plan, heartbeated by the worker, released with the completion by the verifier),
one domain call, metrics as EMF."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from moto import mock_aws
from pydantic import ValidationError

from handlers import backfill_plan, backfill_verify, backfill_worker
from saga_index.index import keys, names
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.backfill.keeper import token_for_execution
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.slots import arm_fence
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.lease import (
    LeaseDirectionError,
    LeaseHeldError,
    LeaseLostError,
    LeaseNotYetEffectiveError,
)
from saga_index.layout_change.lease.controls import clear_throttle, pause_backfill, set_throttle
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import utc_now
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import ANOMALIES, VALID, N, data_rows, plant, seed
from tests.support.control_seed import transition
from tests.support.lambda_harness import FakeLambdaContext, as_function, emf_documents

# A refused input publishes no metrics; Powertools warns about that, by design here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Backfill:run-1"
TOKEN = token_for_execution(EXECUTION)


@pytest.fixture
def dynamo(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("handlers", synthesized_template, endpoint_url=None)
        monkeypatch.setenv("SAGA_TABLE_NAME", backend.table_name)
        monkeypatch.setenv("SAGA_INDEX_NAME", names.INDEX_NAME)
        with as_function(monkeypatch, service=None):
            yield backend


def store(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.new_client(), dynamo.table_name)


def leased(dynamo: Backend, phase: str = "migrating") -> RunTicket:
    """The record in `phase`, and a lease taken for EXECUTION with its fence slots armed (what
    the plan step does)."""
    plant(dynamo, phase)
    grant = acquire_lease(store(dynamo), holder=EXECUTION, token=TOKEN, direction="forward")
    arm_fence(
        dynamo.client,
        dynamo.table_name,
        epoch=grant.epoch,
        token=TOKEN,
        state_version=grant.state.version,
        segments=1,
        armed_by=EXECUTION,
    )
    return RunTicket.of(
        Move(grant.lease.direction, grant.source, grant.target),
        state_version=grant.state.version,
        holder=EXECUTION,
        lease_token=TOKEN,
        lease_epoch=grant.epoch,
        started_at=format_time(grant.lease.acquired_at),
    )


def worker_event(run: RunTicket, **overrides: Any) -> dict[str, Any]:
    return {
        "run": run.to_json(),
        "segment": 0,
        "totalSegments": 1,
        "cursor": None,
        "maxWritesPerSecond": 1000,
        "dryRun": False,
        **overrides,
    }


def emf(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return emf_documents(capsys.readouterr().out)


def test_given_a_segment_when_the_worker_runs_then_it_returns_counts_and_publishes_emf(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    run = leased(dynamo)
    heartbeat_before = store(dynamo).read().lease
    capsys.readouterr()

    result = backfill_worker.handler(worker_event(run), FakeLambdaContext())

    assert result["cursor"] is None
    assert result["done"] is True
    assert (result["restamped"], result["anomalies"], result["skipped"]) == (
        len(VALID),
        len(ANOMALIES),
        0,
    )
    assert len(result["anomalyKeys"]) == len(ANOMALIES)
    # the worker's output says why each one is an anomaly (forward too, not only rollback)
    assert all(set(k) == {"PK", "SK", "reason"} and k["reason"] for k in result["anomalyKeys"])
    [blob] = emf(capsys)
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "RenewalSagaIndex"
    assert {"TableName", "IndexName"} <= set(directive["Dimensions"][0])
    assert blob["TableName"] == dynamo.table_name
    assert blob["IndexName"] == names.INDEX_NAME
    metric_names = {m["Name"] for m in directive["Metrics"]}
    assert {"Restamped", "Skipped", "Anomalies", "Throttles", "Scanned"} <= metric_names
    assert blob["Restamped"] == [float(len(VALID))]
    assert blob["Anomalies"] == [float(len(ANOMALIES))]
    assert blob["Throttles"] == [0.0]
    # the invocation heartbeated the run's lease
    heartbeat_after = store(dynamo).read().lease
    assert heartbeat_before is not None
    assert heartbeat_after is not None
    assert heartbeat_after.token == TOKEN
    assert heartbeat_after.heartbeat_at >= heartbeat_before.heartbeat_at


def test_given_little_time_left_when_the_worker_runs_then_it_stops_with_a_cursor_and_totals(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deadline 3 s past the 60 s safety margin, one second per check
    seed(dynamo)
    run = leased(dynamo)
    capsys.readouterr()
    event = worker_event(run)
    invocations = 0
    while True:
        result = backfill_worker.handler(
            event, FakeLambdaContext(remaining_ms=63_000, step_ms=1000)
        )
        invocations += 1
        if result["done"]:
            break
        assert set(result["cursor"]) == {"PK", "SK"}
        event = worker_event(run, cursor=result["cursor"], totals=result)
    # Then the last result holds the whole segment's totals
    assert invocations > 3
    assert result["restamped"] == len(VALID)
    # and each invocation published only its own counts
    published = sum(blob["Restamped"][0] for blob in emf(capsys))
    assert published == len(VALID)


def test_given_a_throttle_between_invocations_then_the_result_carries_the_runs_caps_in_order(
    dynamo: Backend,
) -> None:
    # Given a segment of a 4-segment run at 40 writes/s in all (10/s each), worked by several
    # invocations, and a throttle set (then cleared) between them
    seed(dynamo)
    run = leased(dynamo)
    event = worker_event(run, totalSegments=4, maxWritesPerSecond=10.0, runMaxWritesPerSecond=40.0)
    controls = [
        lambda: set_throttle(store(dynamo), 8, changed_by="operator"),
        lambda: clear_throttle(store(dynamo), changed_by="operator"),
    ]
    caps_after: list[list[float]] = []
    while True:
        result = backfill_worker.handler(event, FakeLambdaContext(remaining_ms=61_500, step_ms=500))
        caps_after.append(result["appliedCaps"])
        if result["done"]:
            break
        if controls:
            controls.pop(0)()
        event = {**event, "cursor": result["cursor"], "totals": result}
    # Then each result carries the caps so far in the run's total units (not the segment's
    # share), each change once, whatever the number of invocations at one cap
    assert caps_after[0] == [40.0]
    assert caps_after[1] == [40.0, 8.0]
    assert caps_after[-1] == [40.0, 8.0, 40.0]
    assert len(caps_after) > 3


def test_given_the_record_paused_then_the_worker_writes_nothing_and_returns_not_done(
    dynamo: Backend,
) -> None:
    dynamo.put_saga("a", "p-a")
    dynamo.put_saga("b", "p-b")
    run = leased(dynamo)
    pause_backfill(store(dynamo), changed_by="operator")
    before = data_rows(dynamo)

    result = backfill_worker.handler(
        worker_event(run), FakeLambdaContext(remaining_ms=61_000, step_ms=250)
    )

    # paused before its first row: no cursor yet, and not done (the loop invokes it again)
    assert (result["cursor"], result["done"], result["restamped"]) == (None, False, 0)
    assert data_rows(dynamo) == before


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"run": {"direction": "sideways"}}, "run.direction"),
        ({"segment": 4, "totalSegments": 4}, "segment must be less than totalSegments (4)"),
        ({"segment": -1}, "segment"),
        ({"totalSegments": 0}, "totalSegments"),
        ({"totalSegments": 1001}, "totalSegments"),
        ({"maxWritesPerSecond": 0}, "maxWritesPerSecond"),
        ({"maxWritesPerSecond": "50"}, "maxWritesPerSecond"),
        ({"dryRun": "yes"}, "dryRun"),
        ({"run": {"target": {"kind": "sharded", "shardCount": 12}}}, "power of two"),
        ({"run": {"leaseToken": None}}, "needs run.leaseToken"),
        ({"cursor": {"PK": "RSAGA#x"}}, "cursor"),
        ({"cursor": {"PK": {"S": "RSAGA#x"}, "SK": {"N": "1"}}}, "cursor.SK"),
        ({"segmnet": 0}, "segmnet"),
    ],
)
def test_given_a_bad_worker_input_when_invoked_then_it_fails_naming_the_problem(
    dynamo: Backend, overrides: dict[str, Any], problem: str
) -> None:
    seed(dynamo, VALID[:2])
    run = leased(dynamo)
    before = dynamo.scan_all()
    event = worker_event(run)
    for name, value in overrides.items():
        event[name] = {**event[name], **value} if name == "run" else value
    with pytest.raises(ValidationError) as caught:
        backfill_worker.handler(event, FakeLambdaContext())
    assert problem in str(caught.value)
    assert dynamo.scan_all() == before


def test_given_a_lease_that_is_not_the_runs_then_the_worker_refuses_before_writing(
    dynamo: Backend,
) -> None:
    seed(dynamo, VALID[:2])
    run = leased(dynamo)
    before = dynamo.scan_all()
    stranger = run.model_copy(update={"lease_token": "someone-elses"})
    with pytest.raises(LeaseLostError, match="taken over by"):
        backfill_worker.handler(worker_event(stranger), FakeLambdaContext())
    assert dynamo.scan_all() == before


def test_given_a_transition_since_the_plan_then_the_worker_refuses_before_writing(
    dynamo: Backend,
) -> None:
    seed(dynamo, VALID[:2])
    run = leased(dynamo)
    abort = transition(Layout.sharded(N), LEGACY, version=2, previous=(LEGACY, Layout.sharded(N)))
    assert store(dynamo).compare_and_set(1, abort)
    before = dynamo.scan_all()
    with pytest.raises(LeaseLostError, match="moved to version 2"):
        backfill_worker.handler(worker_event(run), FakeLambdaContext())
    assert dynamo.scan_all() == before


def test_given_a_run_when_planned_then_the_lease_is_taken_and_each_segment_gets_its_share(
    dynamo: Backend,
) -> None:
    plant(dynamo, "migrating")
    event = {
        "request": {"direction": "forward", "totalSegments": 40, "maxWritesPerSecond": 80},
        "holder": EXECUTION,
    }
    event["request"]["dryRun"] = False
    plan = backfill_plan.handler(event, FakeLambdaContext())
    assert plan["segments"] == list(range(40))
    # at most 16 segments run at once: each may write 80 / 16 per second
    assert plan["template"] == {
        "totalSegments": 40,
        "maxWritesPerSecond": 5.0,
        "runMaxWritesPerSecond": 80.0,  # the unit the report names the caps in
        "dryRun": False,
        "anomalyKeyLimit": 10,  # 400 keys over 40 segments keeps the Map state small
        "appliedCapLimit": 16,  # 2,000 caps over 40 segments: every segment's full 16
        "paceFloor": 0.015625,  # the default: 1/64 of the cap
        "openExampleLimit": 0,  # 20 example rows over 40 segments: none (open-index runs only)
    }
    assert plan["request"]["maxWritesPerSecond"] == 80
    # the move is the record's, the lease the execution's
    run = plan["run"]
    assert (run["source"], run["target"]) == (
        {"kind": "legacy", "shardCount": None},
        {"kind": "sharded", "shardCount": N},
    )
    assert (run["holder"], run["leaseToken"], run["stateVersion"]) == (EXECUTION, TOKEN, 1)
    lease = store(dynamo).read().lease
    assert lease is not None
    assert (lease.holder, lease.token) == (EXECUTION, TOKEN)
    assert run["startedAt"] == format_time(lease.acquired_at)
    # a retried plan step (same execution) finds its own lease
    assert backfill_plan.handler(event, FakeLambdaContext())["run"] == run


def test_given_a_dry_run_when_planned_then_no_lease_is_taken(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    event = {"request": {"direction": "forward", "dryRun": True}, "holder": EXECUTION}
    plan = backfill_plan.handler(event, FakeLambdaContext())
    assert plan["run"]["leaseToken"] is None
    assert store(dynamo).read().lease is None


def test_given_a_plan_without_dry_run_then_it_is_refused(dynamo: Backend) -> None:
    with pytest.raises(ValidationError, match="dryRun"):
        backfill_plan.handler(
            {"request": {"direction": "forward"}, "holder": EXECUTION}, FakeLambdaContext()
        )


def test_given_a_direction_the_record_disagrees_with_then_the_plan_refuses(
    dynamo: Backend,
) -> None:
    plant(dynamo, "legacy")
    event = {"request": {"direction": "forward", "dryRun": False}, "holder": EXECUTION}
    with pytest.raises(LeaseDirectionError, match="needs the record in phase migrating"):
        backfill_plan.handler(event, FakeLambdaContext())


def test_given_another_runs_live_lease_then_the_plan_refuses_naming_it(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    acquire_lease(store(dynamo), holder="alice@laptop/1", token="hers", direction="forward")
    event = {"request": {"direction": "forward", "dryRun": False}, "holder": EXECUTION}
    with pytest.raises(LeaseHeldError, match="alice@laptop/1"):
        backfill_plan.handler(event, FakeLambdaContext())


def test_given_a_state_younger_than_its_effective_at_then_the_plan_refuses(
    dynamo: Backend,
) -> None:
    # `phase set migrating` a moment ago: effectiveAt is 75 s away (the handlers' real clock)
    changed = utc_now()
    fresh = replace(
        transition(LEGACY, Layout.sharded(N)),
        changed_at=changed,
        effective_at=changed + timedelta(seconds=75),
    )
    assert store(dynamo).compare_and_set(0, fresh)
    event = {"request": {"direction": "forward", "dryRun": False}, "holder": EXECUTION}
    with pytest.raises(LeaseNotYetEffectiveError, match="Wait"):
        backfill_plan.handler(event, FakeLambdaContext())


def test_given_an_unfinished_segment_when_verified_then_the_run_is_not_ok_and_recorded_so(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    run = leased(dynamo)
    request = {"direction": "forward", "totalSegments": 2, "dryRun": False}
    done = {"segment": 0, "cursor": None, "done": True, "restamped": 0}

    summary = backfill_verify.handler(
        {"request": request, "run": run.to_json(), "segments": [done]}, FakeLambdaContext()
    )

    assert summary["complete"] is False
    assert summary["verification"]["ok"] is False
    assert "segment(s) [1] did not finish" in summary["verification"]["message"]
    [blob] = emf(capsys)
    assert blob["UnexpectedSourceKeyRows"] == [2.0]
    state = store(dynamo).read()
    assert state.lease is None
    assert state.last_backfill is not None
    assert (state.last_backfill.holder, state.last_backfill.complete) == (EXECUTION, False)


def test_given_the_whole_run_when_verified_then_the_lease_is_released_with_the_completion(
    dynamo: Backend,
) -> None:
    seed(dynamo, VALID[:3])
    run = leased(dynamo)
    result = backfill_worker.handler(worker_event(run), FakeLambdaContext())
    request = {"direction": "forward", "totalSegments": 1, "dryRun": False}

    summary = backfill_verify.handler(
        {"request": request, "run": run.to_json(), "segments": [result]}, FakeLambdaContext()
    )

    assert summary["verification"]["ok"] is True
    recorded = store(dynamo).read().last_backfill
    assert recorded is not None
    assert (recorded.complete, recorded.verified, recorded.restamped) == (True, True, 3)
    assert recorded.lease_token == TOKEN
    assert all(
        raw["GSI4PK"]["S"] != keys.LEGACY_GSI4PK
        for raw in dynamo.scan_all()
        if raw["PK"]["S"] in {f"RSAGA#{s}" for s in VALID[:3]}
    )


def test_given_a_verify_step_retried_after_its_release_landed_then_it_answers_again(
    dynamo: Backend,
) -> None:
    # Step Functions retries a task whose response was lost: the release already happened.
    seed(dynamo, VALID[:2])
    run = leased(dynamo)
    result = backfill_worker.handler(worker_event(run), FakeLambdaContext())
    event = {
        "request": {"direction": "forward", "totalSegments": 1, "dryRun": False},
        "run": run.to_json(),
        "segments": [result],
    }
    first = backfill_verify.handler(event, FakeLambdaContext())
    recorded = store(dynamo).read().last_backfill
    again = backfill_verify.handler(event, FakeLambdaContext())
    assert again == first
    assert store(dynamo).read().last_backfill == recorded
