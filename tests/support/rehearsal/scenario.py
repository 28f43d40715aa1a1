"""The scenario: seeded sagas and a control record whose STATE item was deleted after
`legacy -> migrating(16)` (history only: every function must follow the history, the drift guard
must page), then every function invoked as its trigger would, in a deployable order (the drift
guard, the four sweeps, the record restored from its history, the backfill plan -> workers ->
verifier, a late legacy write the verifier must catch, the drift guard again)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from saga_index import names
from saga_index.control import executor
from saga_index.control.layout import LEGACY, Layout
from saga_index.control.store import ControlStore
from saga_index.dynamo.codec import deserialize
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
# The sweeps' schedule payload, as infra/schedules.py builds it (Scheduler's context
# attributes arrive as strings).
SCHEDULED = {
    names.JOB_DRIFT_GUARD: DAY.replace(hour=12, minute=0),
    names.JOB_WORKFLOW_HEALTH_SWEEP: DAY.replace(hour=12, minute=1),
    names.JOB_RETRY_FAILED_PREPARE: DAY.replace(hour=12, minute=2),
    names.JOB_STUCK_SAGA_SWEEP: DAY.replace(hour=12, minute=3),
    names.JOB_AGENT_METRICS_SNAPSHOT: DAY.replace(hour=12, minute=4),
}
DRIFT_GUARD_HANDLER = "handlers.drift_guard.handler"
SWEEP_HANDLERS = {
    names.JOB_WORKFLOW_HEALTH_SWEEP: "handlers.sweeps.workflow_health_sweep",
    names.JOB_RETRY_FAILED_PREPARE: "handlers.sweeps.retry_failed_prepare",
    names.JOB_STUCK_SAGA_SWEEP: "handlers.sweeps.stuck_saga_sweep",
    names.JOB_AGENT_METRICS_SNAPSHOT: "handlers.sweeps.agent_metrics_snapshot",
}
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
    segments: list[dict[str, Any]] = field(default_factory=list)
    rows_before: list[dict[str, Any]] = field(default_factory=list)
    rows_after: list[dict[str, Any]] = field(default_factory=list)
    shard_count: int = names.DEFAULT_SHARD_COUNT


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
    # The record went legacy -> migrating(N) (long past its effectiveAt), then its STATE item
    # was deleted: readers follow the history (legacy first, then the shards).
    seed_state(world.dynamodb, backend.table_name, LEGACY, Layout.sharded(shard_count))
    delete_state(world.dynamodb, backend.table_name)
    result.rows_before = [deserialize(i) for i in backend.scan_all()]
    processes: dict[str, LambdaProcess] = {}

    def process(handler: str) -> LambdaProcess:
        logical_id = by_handler[handler]
        if logical_id not in processes:
            processes[logical_id] = LambdaProcess(functions[logical_id], world, dependency_paths)
            result.probes[logical_id] = processes[logical_id].probe(DEV_ONLY_MODULES)
        return processes[logical_id]

    def invoke(handler: str, event: Any) -> Any:
        invocation = process(handler).invoke(event)
        result.invocations.setdefault(by_handler[handler], []).append(invocation)
        assert invocation.ok, f"{handler} failed:\n{invocation.error}\n" + "\n".join(invocation.log)
        return invocation.result

    try:
        invoke(DRIFT_GUARD_HANDLER, scheduler_event(names.JOB_DRIFT_GUARD))
        for job, handler in SWEEP_HANDLERS.items():
            invoke(handler, scheduler_event(job))
        result.events = world.drain_bus()
        # The operator restores the record from its history before the backfill (which refuses
        # to run while the record is missing).
        executor.restore_state(ControlStore(world.dynamodb, backend.table_name))
        # The state machine's task inputs (infra/backfill.py): the execution input to the plan,
        # the ItemSelector's template + segment to the worker, looped with cursor and totals,
        # then {"request", "segments"} to the verifier.
        plan = invoke(
            BACKFILL_HANDLERS["plan"],
            {"direction": "forward", "totalSegments": 2, "maxWritesPerSecond": 40, "dryRun": False},
        )
        segment_results = []
        for segment in plan["segments"]:
            worker_input = {**plan["template"], "segment": segment}
            while True:
                output = invoke(BACKFILL_HANDLERS["worker"], worker_input)
                if output["cursor"] is None:
                    segment_results.append(output)
                    break
                worker_input = {**worker_input, "cursor": output["cursor"], "totals": output}
        verify_input = {"request": plan["request"], "segments": segment_results}
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        # A writer still on the old phase puts a row on the legacy key after the Scan passed:
        # the verifier must see it, confirm it with a consistent GetItem and fail the run.
        late = backend.put_saga("late-writer", "person-99")
        invoke(BACKFILL_HANDLERS["verify"], verify_input)
        world.dynamodb.delete_item(
            TableName=backend.table_name, Key={"PK": {"S": late["PK"]}, "SK": {"S": late["SK"]}}
        )
        invoke(DRIFT_GUARD_HANDLER, scheduler_event(names.JOB_DRIFT_GUARD, attempt=2))
        result.rows_after = [deserialize(i) for i in backend.scan_all()]
        result.segments = world.drain_xray()
        yield result
    finally:
        for running in processes.values():
            running.close()
