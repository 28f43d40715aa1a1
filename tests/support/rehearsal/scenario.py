"""The scenario: seeded sagas and a control record whose STATE item was deleted after
`legacy -> migrating(16)` (history only: every function must follow the history, the drift guard
must page), then every function invoked as its trigger would, in a deployable order (the drift
guard, the four sweeps, the record restored from its history, the backfill plan -> workers ->
verifier, a late legacy write the verifier must catch, a worker invoked after its run released
the lease, the drift guard again)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from saga_index.index import names
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.shard import DEFAULT_SHARD_COUNT
from saga_index.layout_change.record.state import ControlState
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import utc_now
from saga_index.layout_change.transitions import restore_state
from saga_index.store.dynamo.codec import deserialize
from tests.support.backends import Backend
from tests.support.control_seed import delete_state, seed_state
from tests.support.rehearsal.process import (
    DEV_ONLY_MODULES,
    FunctionUnderTest,
    Invocation,
    LambdaProcess,
    function_under_test,
)
from tests.support.rehearsal.server import World
from tests.support.rehearsal.stack import Synth

DAY = datetime(2026, 7, 10, tzinfo=UTC)
# The sweeps refuse a scheduledTime more than 15 minutes from their own clock (a payload from
# 2099 must not disable a saga's retries), so their firings are those of the current 5-minute
# slot, as Scheduler would send them now. The drift guard's run stays at the top of an hour of
# DAY: that is a scan run (layout_change.checks.drift.scan_due), which the rehearsal needs.
_SLOT = datetime.now(UTC).replace(second=0, microsecond=0)
_SLOT -= timedelta(minutes=_SLOT.minute % 5)
# The sweeps' schedule payload, as infra/schedules.py builds it (Scheduler's context
# attributes arrive as strings).
SCHEDULED = {
    names.JOB_DRIFT_GUARD: DAY.replace(hour=12, minute=0),
    names.JOB_WORKFLOW_HEALTH_SWEEP: _SLOT + timedelta(minutes=1),
    names.JOB_RETRY_FAILED_PREPARE: _SLOT + timedelta(minutes=2),
    names.JOB_STUCK_SAGA_SWEEP: _SLOT + timedelta(minutes=3),
    names.JOB_AGENT_METRICS_SNAPSHOT: _SLOT + timedelta(minutes=4),
}
DRIFT_GUARD_HANDLER = "handlers.drift_guard.handler"
SWEEP_HANDLERS = {
    names.JOB_WORKFLOW_HEALTH_SWEEP: "handlers.sweeps.workflow_health_sweep",
    names.JOB_RETRY_FAILED_PREPARE: "handlers.sweeps.retry_failed_prepare",
    names.JOB_STUCK_SAGA_SWEEP: "handlers.sweeps.stuck_saga_sweep",
    names.JOB_AGENT_METRICS_SNAPSHOT: "handlers.sweeps.agent_metrics_snapshot",
}
# The backfill execution's name: its ARN ($$.Execution.Id) is the lease's holder.
BACKFILL_EXECUTION = "rehearsal-backfill"
BACKFILL_HANDLERS = {
    "plan": "handlers.backfill_plan.handler",
    "worker": "handlers.backfill_worker.handler",
    "verify": "handlers.backfill_verify.handler",
}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def scheduler_event(job: str, attempt: int = 1) -> dict[str, Any]:
    return {
        "job": job,
        "scheduledTime": SCHEDULED[job].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "executionId": f"rehearsal-{job}-{attempt}",
        "attempt": str(attempt),
    }


@dataclass
class Rehearsal:
    functions: dict[str, FunctionUnderTest]  # by logical id
    by_handler: dict[str, str]  # handler string -> logical id
    invocations: dict[str, list[Invocation]] = field(default_factory=dict)
    probes: dict[str, dict[str, str | None]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    # Datagrams sent to the X-Ray daemon's address (AWS_XRAY_DAEMON_ADDRESS).
    segments: list[str] = field(default_factory=list)
    # The saga rows (the control record's items are not rows the backfill moves).
    rows_before: list[dict[str, Any]] = field(default_factory=list)
    rows_after: list[dict[str, Any]] = field(default_factory=list)
    # The control record after the backfill (its lease released with the run's completion).
    control_after: ControlState | None = None
    # The backfill execution's id ($$.Execution.Id): the lease's holder.
    backfill_holder: str = ""
    # A worker invoked after its run released the lease: the one invocation meant to fail.
    stale_worker: Invocation | None = None
    shard_count: int = DEFAULT_SHARD_COUNT


def _seed(backend: Backend, shard_count: int) -> None:
    health = SCHEDULED["workflow-health-sweep"]
    retry = SCHEDULED["retry-failed-prepare"]
    backend.put_saga(
        "stale-heartbeat",
        "person-1",
        workflowHeartbeatAt=iso(health - timedelta(minutes=31)),
        updatedAt=iso(health - timedelta(minutes=31)),
    )
    backend.put_saga(
        "failed-prepare",
        "person-2",
        state="PREPARE_FAILED",
        updatedAt=iso(retry - timedelta(minutes=11)),
    )
    backend.put_saga(
        "stuck",
        "person-3",
        state="PREPARING",
        updatedAt=iso(DAY - timedelta(days=3)),
        workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
    )
    for n in range(12):
        backend.put_saga(
            f"fresh-{n}",
            f"person-{10 + n}",
            updatedAt=iso(health - timedelta(minutes=1)),
            workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
        )
    # A row the backfill must leave on the legacy key (no personId to shard on): the verifier
    # re-reads it with a consistent GetItem before it counts it as left behind on purpose.
    backend.put_saga("no-person", None, updatedAt=iso(health - timedelta(minutes=1)))
    for n in range(3):  # already moved by the application's writers (migrating phase)
        backend.put_saga(
            f"sharded-{n}",
            f"person-{40 + n}",
            gsi4pk="shard",
            shard_count=shard_count,
            updatedAt=iso(health - timedelta(minutes=1)),
            workflowHeartbeatAt=iso(health - timedelta(minutes=1)),
        )


def _saga_rows(backend: Backend) -> list[dict[str, Any]]:
    """Every row but the index's own items (the record's, the backfill's fence slots, the
    drift guard's cursor)."""
    rows = (deserialize(item) for item in backend.scan_all())
    return [
        row
        for row in rows
        if row[names.TABLE_PARTITION_KEY] not in (names.CONTROL_PK, names.DRIFT_CURSOR_PK)
        and not row[names.TABLE_PARTITION_KEY].startswith(names.FENCE_PK_PREFIX)
    ]


def _by_handler(synth: Synth) -> dict[str, str]:
    return {
        resource["Properties"]["Handler"]: logical_id
        for logical_id, resource in synth.of_type("AWS::Lambda::Function").items()
    }


@contextmanager
def rehearse(
    synth: Synth, world: World, dependency_paths: tuple[Path, Path]
) -> Iterator[Rehearsal]:
    """Every function invoked as its trigger would, in a deployable order; the processes stay
    up (warm) until the block ends."""
    functions = {
        logical_id: function_under_test(synth, world.stand_in, logical_id)
        for logical_id in synth.of_type("AWS::Lambda::Function")
    }
    by_handler = _by_handler(synth)
    result = Rehearsal(functions=functions, by_handler=by_handler)
    shard_count = result.shard_count
    backend = Backend("rehearsal", world.dynamodb, world.stand_in.table_name, world.endpoint_url)
    _seed(backend, shard_count)
    # The record went legacy -> migrating(N), then its STATE item was deleted: readers follow
    # the history (legacy first, then the shards). The planted changedAt is a fixed moment long
    # past, so the state (restored below with the same transition) is past its effectiveAt and
    # the backfill may take its lease without waiting.
    planted = seed_state(world.dynamodb, backend.table_name, LEGACY, Layout.sharded(shard_count))
    assert planted.effective_at is not None
    assert planted.effective_at < utc_now(), planted
    delete_state(world.dynamodb, backend.table_name)
    result.rows_before = _saga_rows(backend)
    processes: dict[str, LambdaProcess] = {}

    def process(handler: str) -> LambdaProcess:
        logical_id = by_handler[handler]
        if logical_id not in processes:
            processes[logical_id] = LambdaProcess(functions[logical_id], world, dependency_paths)
            result.probes[logical_id] = processes[logical_id].probe(DEV_ONLY_MODULES)
        return processes[logical_id]

    def call(handler: str, event: Any) -> Invocation:
        invocation = process(handler).invoke(event)
        result.invocations.setdefault(by_handler[handler], []).append(invocation)
        return invocation

    def invoke(handler: str, event: Any) -> Any:
        invocation = call(handler, event)
        assert invocation.ok, f"{handler} failed:\n{invocation.error}\n" + "\n".join(invocation.log)
        return invocation.result

    try:
        invoke(DRIFT_GUARD_HANDLER, scheduler_event(names.JOB_DRIFT_GUARD))
        for job, handler in SWEEP_HANDLERS.items():
            invoke(handler, scheduler_event(job))
        result.events = world.drain_bus()
        # The operator restores the record from its history before the backfill (which refuses
        # to run while the record is missing).
        restore_state(ControlStore(world.dynamodb, backend.table_name))
        result.backfill_holder = world.stand_in.execution_arn(BACKFILL_EXECUTION)
        # The state machine's task inputs (infra/backfill.py): the execution input and the
        # execution's id ($$.Execution.Id, the lease's holder) to the plan; the ItemSelector's
        # template + segment + run ticket to the worker, looped with cursor and totals until the
        # worker says the segment is done; then {"request", "run", "segments"} to the verifier.
        plan = invoke(
            BACKFILL_HANDLERS["plan"],
            {
                "request": {
                    "direction": "forward",
                    "totalSegments": 2,
                    "maxWritesPerSecond": 40,
                    "dryRun": False,
                },
                "holder": result.backfill_holder,
            },
        )
        segment_results = []
        for segment in plan["segments"]:
            worker_input = {**plan["template"], "segment": segment, "run": plan["run"]}
            while True:
                output = invoke(BACKFILL_HANDLERS["worker"], worker_input)
                if output["done"]:
                    segment_results.append(output)
                    break
                worker_input = {**worker_input, "cursor": output["cursor"], "totals": output}
        verify_input = {
            "request": plan["request"],
            "run": plan["run"],
            "segments": segment_results,
        }
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        # A writer still on the old phase puts a row on the legacy key after the Scan passed:
        # the verifier must see it, confirm it with a consistent GetItem and fail the run.
        late = backend.put_saga("late-writer", "person-99")
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        world.dynamodb.delete_item(
            TableName=backend.table_name, Key={"PK": {"S": late["PK"]}, "SK": {"S": late["SK"]}}
        )
        # A worker invocation that outlived its run (the lease is released) must stop before it
        # reads a row: its heartbeat fails, the record says why, LeaseLostError.
        first_segment = {**plan["template"], "segment": plan["segments"][0], "run": plan["run"]}
        result.stale_worker = call(BACKFILL_HANDLERS["worker"], first_segment)
        assert not result.stale_worker.ok, result.stale_worker.result
        invoke(DRIFT_GUARD_HANDLER, scheduler_event(names.JOB_DRIFT_GUARD, attempt=2))
        result.rows_after = _saga_rows(backend)
        result.control_after = ControlStore(world.dynamodb, backend.table_name).read()
        result.segments = world.drain_xray()
        yield result
    finally:
        for running in processes.values():
            running.close()
