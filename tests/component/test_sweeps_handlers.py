"""The sweep handlers on moto: open sagas read through the fan-out reader along the control
record's routing (migrating: legacy and sharded rows), events captured for real (bus -> rule ->
SQS queue, read back), EMF metrics parsed from stdout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from handlers import runtime, sweep_jobs
from handlers import sweeps as handlers
from saga_index.index import Person, names
from saga_index.index.errors import InvalidInputError
from saga_index.index.layout import Layout
from saga_index.layout_change.record.errors import ControlRecordUnavailableError
from saga_index.layout_change.record.items import history_key
from saga_index.layout_change.record.provider import ControlProvider
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import ControlTiming
from saga_index.store.dynamo.codec import serialize
from tests.component.sweeps_support import (
    SHARDS,
    SweepWorld,
    payload,
    world,
)
from tests.support.control_seed import delete_state, seed_open_index, seed_state
from tests.support.lambda_harness import (
    FakeLambdaContext,
    dimension_sets,
    emf_documents,
    metric,
    metric_unit,
)

__all__ = ["world"]  # the fixture, imported for pytest

# A run that fails before its first metric flushes none; Powertools warns about exactly that.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

T = datetime(2026, 7, 10, 12, 1, tzinfo=UTC)  # a workflow-health-sweep firing (minute 1 mod 5)
CTX = FakeLambdaContext()


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ago(delta: timedelta, now: datetime = T) -> str:
    return iso(now - delta)


# ---- workflow-health-sweep ---------------------------------------------------------------------


def test_given_stale_and_fresh_heartbeats_on_both_keys_when_the_health_sweep_runs_then_only_stale_ones_are_published(  # noqa: E501
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    b = world.backend
    b.put_saga("legacy-stale", "p-1", workflowHeartbeatAt=ago(timedelta(minutes=31)))
    b.put_saga("shard-stale", "p-2", gsi4pk="shard", updatedAt=ago(timedelta(hours=2)))
    b.put_saga("shard-fresh", "p-3", gsi4pk="shard", workflowHeartbeatAt=ago(timedelta(minutes=29)))
    b.put_saga("at-threshold", "p-4", workflowHeartbeatAt=ago(timedelta(minutes=30)))
    b.put_saga("signed", "p-5", state="SIGNED", updatedAt=ago(timedelta(days=9)))

    result = handlers.workflow_health_sweep(payload("workflow-health-sweep", T), CTX)

    published = world.events_of("SagaWorkflowUnhealthy")
    assert sorted(e["detail"]["sagaId"] for e in published) == ["legacy-stale", "shard-stale"]
    event = next(e for e in published if e["detail"]["sagaId"] == "shard-stale")
    assert event["source"] == "propflow.renewal-saga"
    assert event["detail"]["personId"] == "p-2"
    assert event["detail"]["leaseId"] == "lease-shard-stale"
    assert event["detail"]["state"] == "OPENED"
    assert "updatedAt" in event["detail"]["reason"]
    assert event["detail"]["scheduledTime"] == "2026-07-10T12:01:00.000Z"
    assert result["sagasRead"] == 4
    assert result["findings"] == {"SagaWorkflowUnhealthy": 2}
    assert result["now"] == "2026-07-10T12:01:00.000Z"

    docs = emf_documents(capsys.readouterr().out)
    dims = {"TableName": b.table_name, "IndexName": "renewal-saga-person-index"}
    assert metric(docs, "SagasRead", **dims) == [4.0]
    assert metric(docs, "SagaWorkflowUnhealthy", **dims) == [2.0]
    assert len(metric(docs, "SweepDuration", **dims)) == 1
    assert metric_unit(docs, "SweepDuration") == "Milliseconds"
    assert [set(d) for d in dimension_sets(docs, "SagasRead")] == [
        {"service", "TableName", "IndexName"}
    ]


def test_given_more_than_ten_findings_when_the_health_sweep_runs_then_every_one_is_published(
    world: SweepWorld,
) -> None:
    for n in range(23):
        world.backend.put_saga(
            f"s{n:02d}", f"p-{n}", gsi4pk="shard", updatedAt=ago(timedelta(hours=1))
        )

    result = handlers.workflow_health_sweep(payload("workflow-health-sweep", T), CTX)

    assert result["findings"] == {"SagaWorkflowUnhealthy": 23}
    assert len(world.events_of("SagaWorkflowUnhealthy")) == 23


def test_given_a_payload_without_scheduled_time_when_a_sweep_runs_then_now_is_the_invocation_time(
    world: SweepWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    invoked = datetime(2026, 7, 10, 15, 0, tzinfo=UTC)
    monkeypatch.setattr(sweep_jobs, "_invocation_time", lambda: invoked)
    # Healthy at T, unhealthy three hours later.
    world.backend.put_saga("s1", "p-1", workflowHeartbeatAt=ago(timedelta(minutes=5)))

    result = handlers.workflow_health_sweep({}, CTX)

    assert result["now"] == "2026-07-10T15:00:00.000Z"
    assert [e["detail"]["sagaId"] for e in world.events_of("SagaWorkflowUnhealthy")] == ["s1"]


def test_given_a_payload_for_another_job_when_a_sweep_runs_then_it_refuses_and_emits_nothing(
    world: SweepWorld,
) -> None:
    world.backend.put_saga("s1", "p-1", updatedAt=ago(timedelta(days=3)))

    with pytest.raises(InvalidInputError, match="stuck-saga-sweep"):
        handlers.workflow_health_sweep(payload("stuck-saga-sweep", T), CTX)

    assert world.drain() == []


def test_given_a_malformed_scheduled_time_when_a_sweep_runs_then_it_fails_naming_the_field(
    world: SweepWorld,
) -> None:
    with pytest.raises(ValidationError, match="scheduledTime"):
        handlers.workflow_health_sweep(
            {"job": "workflow-health-sweep", "scheduledTime": "tomorrow"}, CTX
        )
    assert world.drain() == []


def test_given_no_event_bus_configured_when_an_event_sweep_runs_then_the_error_names_it(
    world: SweepWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVENT_BUS_NAME")
    with pytest.raises(ValidationError, match="EVENT_BUS_NAME"):
        handlers.stuck_saga_sweep(payload("stuck-saga-sweep", T), CTX)


# ---- stuck-saga-sweep --------------------------------------------------------------------------


def test_given_sagas_idle_past_their_state_threshold_when_the_stuck_sweep_runs_then_they_are_published(  # noqa: E501
    world: SweepWorld, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STUCK_SAGA_STATE_THRESHOLDS_MINUTES", '{"PREPARING": 120}')
    b = world.backend
    b.put_saga(
        "idle-day", "p-1", state="NEGOTIATING", updatedAt=ago(timedelta(hours=24, seconds=1))
    )
    b.put_saga("idle-day-at", "p-2", gsi4pk="shard", updatedAt=ago(timedelta(hours=24)))
    b.put_saga(
        "preparing-3h", "p-3", gsi4pk="shard", state="PREPARING", updatedAt=ago(timedelta(hours=3))
    )
    b.put_saga("preparing-1h", "p-4", state="PREPARING", updatedAt=ago(timedelta(hours=1)))
    b.put_saga("declined", "p-5", state="DECLINED", updatedAt=ago(timedelta(days=40)))

    result = handlers.stuck_saga_sweep(payload("stuck-saga-sweep", T), CTX)

    published = world.events_of("SagaStuck")
    assert sorted(e["detail"]["sagaId"] for e in published) == ["idle-day", "preparing-3h"]
    assert {e["detail"]["state"] for e in published} == {"NEGOTIATING", "PREPARING"}
    assert result["findings"] == {"SagaStuck": 2}
    assert metric(emf_documents(capsys.readouterr().out), "SagaStuck") == [2.0]


def test_given_an_invalid_state_override_when_the_stuck_sweep_runs_then_it_fails_naming_it(
    world: SweepWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUCK_SAGA_STATE_THRESHOLDS_MINUTES", '{"SIGNED": 60}')
    with pytest.raises(ValidationError, match="SIGNED"):
        handlers.stuck_saga_sweep(payload("stuck-saga-sweep", T), CTX)


# ---- agent-metrics-snapshot --------------------------------------------------------------------


def test_given_open_sagas_when_the_snapshot_runs_then_counts_by_state_and_oldest_age_are_emf(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    b = world.backend
    b.put_saga("a", "p-1", state="OPENED", opened_at="2026-07-09T12:01:00.000Z")
    b.put_saga("b", "p-2", gsi4pk="shard", state="OPENED", opened_at="2026-07-10T10:00:00.000Z")
    b.put_saga(
        "c", "p-3", gsi4pk="shard", state="PREPARE_FAILED", opened_at="2026-07-10T11:00:00.000Z"
    )
    b.put_saga("d", "p-4", state="SIGNED", opened_at="2026-01-01T00:00:00.000Z")

    result = handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)

    assert result["openByState"]["OPENED"] == 2
    assert result["oldestSagaId"] == "a"
    assert result["oldestAgeSeconds"] == 86400
    docs = emf_documents(capsys.readouterr().out)
    assert metric(docs, "OpenSagas", State="OPENED") == [2.0]
    assert metric(docs, "OpenSagas", State="PREPARE_FAILED") == [1.0]
    assert metric(docs, "OpenSagas", State="AWAITING_SIGNATURE") == [0.0]
    per_state = [d for d in dimension_sets(docs, "OpenSagas") if "State" in d]
    assert len(per_state) == 6
    assert all({"service", "TableName", "IndexName", "State"} == set(d) for d in per_state)
    assert metric(docs, "OldestOpenSagaAgeSeconds") == [86400.0]
    assert metric_unit(docs, "OldestOpenSagaAgeSeconds") == "Seconds"
    assert metric(docs, "SagasRead") == [3.0]
    assert world.drain() == []  # the snapshot publishes metrics, never events


# ---- the routing comes from the control record ------------------------------------------------


class Ticks:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_given_a_record_change_when_t_has_passed_then_the_sweep_reads_the_new_states_keys(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a warm environment whose provider read `migrating` (legacy, then 16 shards)
    b = world.backend
    ticks = Ticks()
    runtime.control.use(
        ControlProvider(ControlStore(b.client, b.table_name), timing=ControlTiming(), clock=ticks)
    )
    b.put_saga("legacy", "p-1")
    b.put_saga("sharded", "p-2", gsi4pk="shard")
    snapshot = handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)
    assert snapshot["sagasRead"] == 2
    # When the record moves to `sharded` (forced: the legacy row was left behind on purpose)
    seed_state(b.client, b.table_name, Layout.sharded(SHARDS), version=2)
    # Then within T the environment still follows `migrating`, one record read per T
    ticks.now += ControlTiming().cache_seconds - 1
    assert (
        handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)["sagasRead"] == 2
    )
    # And from T on it reads the shards only, without a redeploy or a cold start
    ticks.now += 1
    assert (
        handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)["sagasRead"] == 1
    )
    capsys.readouterr()


def test_given_the_open_index_opened_when_t_has_passed_then_the_sweep_reads_it(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a warm environment whose provider read `migrating` (open index off: GSI4's keys)
    b = world.backend
    ticks = Ticks()
    runtime.control.use(
        ControlProvider(ControlStore(b.client, b.table_name), timing=ControlTiming(), clock=ticks)
    )
    open_key = {names.OPEN_INDEX_PARTITION_KEY: Person.of("p-1").open_index_pk(SHARDS)}
    b.put_saga("stamped", "p-1", gsi4pk="shard", **open_key)
    # An open saga only GSI4 holds: which index the sweep read is plain from whether it counts.
    b.put_saga("unstamped", "p-2", gsi4pk="shard")
    snapshot = handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)
    assert snapshot["sagasRead"] == 2
    # When the record's open index moves to `open` (its parity check skipped by the plant)
    seed_open_index(b.client, b.table_name, Layout.sharded(SHARDS), SHARDS, version=2)
    # Then within T the environment still enumerates over GSI4, one record read per T
    ticks.now += ControlTiming().cache_seconds - 1
    assert (
        handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)["sagasRead"] == 2
    )
    # And from T on it reads the open index's keys, without a redeploy or a cold start
    ticks.now += 1
    assert (
        handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)["sagasRead"] == 1
    )
    capsys.readouterr()


def test_given_no_control_record_at_all_then_the_sweeps_read_legacy_only(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    b = world.backend
    for sk in ("STATE", "HISTORY#0000000001"):
        b.client.delete_item(
            TableName=b.table_name,
            Key={"PK": {"S": "RSAGA_INDEX#CONTROL"}, "SK": {"S": sk}},
        )
    b.put_saga("legacy", "p-1")
    b.put_saga("sharded", "p-2", gsi4pk="shard")
    result = handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)
    assert result["sagasRead"] == 1  # never migrated: legacy
    capsys.readouterr()


# ---- the payload's clock -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scheduled",
    [
        "2099-01-01T00:00:00Z",
        "2026-07-10T12:23:00Z",
        "2026-07-10T11:41:00Z",
        "2001-01-01T00:00:00Z",
    ],
)
def test_given_a_scheduled_time_far_from_the_invocation_clock_when_the_retry_sweep_runs_then_it_refuses_and_touches_nothing(  # noqa: E501
    world: SweepWorld, scheduled: str
) -> None:
    # A manual invoke with a time in 2099 would claim with lastPrepareRetryAt in 2099: no retry
    # of that saga would ever be due again.
    world.clock.at = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)
    world.backend.put_saga(
        "s1", "p-1", state="PREPARE_FAILED", updatedAt=ago(timedelta(hours=1), world.clock.at)
    )
    before = world.backend.scan_all()

    with pytest.raises(ValidationError, match=r"scheduledTime[\s\S]*20 minutes"):
        handlers.retry_failed_prepare(
            {"job": "retry-failed-prepare", "scheduledTime": scheduled}, CTX
        )

    assert world.backend.scan_all() == before
    assert world.drain() == []


@pytest.mark.parametrize("scheduled", ["2026-07-10T12:17:00Z", "2026-07-10T11:47:00Z"])
def test_given_a_scheduled_time_within_fifteen_minutes_of_the_invocation_clock_then_the_sweep_runs(
    world: SweepWorld, scheduled: str
) -> None:
    world.clock.at = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)

    result = handlers.workflow_health_sweep(
        {"job": "workflow-health-sweep", "scheduledTime": scheduled}, CTX
    )

    assert result["now"] == scheduled.replace(":00Z", ":00.000Z")


def test_given_a_lost_state_whose_move_history_marks_abandoned_then_the_sweep_fails_loudly(
    world: SweepWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a migration whose STATE write landed but whose history intent was marked abandoned
    # (its answer was lost), rows already moved to shard keys, and then the STATE item lost
    b = world.backend
    for n in range(10):
        b.put_saga(f"moved-{n}", f"p-{n}", gsi4pk="shard")
    b.client.update_item(
        TableName=b.table_name,
        Key=serialize(history_key(1)),
        UpdateExpression="SET #a = :no, #b = :yes",
        ExpressionAttributeNames={"#a": "applied", "#b": "abandoned"},
        ExpressionAttributeValues={":no": {"BOOL": False}, ":yes": {"BOOL": True}},
    )
    delete_state(b.client, b.table_name)
    runtime.control.use(None)
    # Then the sweep does not read "never migrated" and answer 0 of 10 sagas: it fails, naming
    # the lost record
    with pytest.raises(ControlRecordUnavailableError, match="the control record is lost"):
        handlers.agent_metrics_snapshot(payload("agent-metrics-snapshot", T), CTX)
    capsys.readouterr()
