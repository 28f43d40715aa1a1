"""The operator: `saga-index phase set` as the runbook drives it, through the REAL operation
(`change_phase`, which chooses the move's completion checks and first-move guard itself, as for
the CLI), with backfill runs started in between.

A plan is a list of moves. A move that opens (`migrating`, `rolling-back`, `resharding`) is set
at once; then the operator waits for the state's effectiveAt by its own clock (the reference
clock: effectiveAt is written on it), starts a backfill run and watches for it to end; a
completing move (`sharded`, `legacy`) is tried the moment the run ended, as early as the
refusals allow: told to retry later (the settled switch), it waits until `retry_at` and tries
again; refused by the real checks, it runs the backfill again, as the runbook says. The "abort"
plan opens a move, starts its run and, while the run is going, aborts it (`rolling-back`) and
rolls back.

The open-saga index's plans (OPEN_PLANS) drive `saga-index open-index set` the same way, through
its real operation (`change_open_index`: readiness from DescribeTable, the settled switch, the
parity or no-keys check of a completing move): `adding`, then the open-index backfill (the
worker's run of kind open-index, as `saga-index open-index backfill` runs it on the layout
backfill's machinery: its lease waits for the settled switch), then `open` the moment the
run ended; refused by its check, the backfill runs again. "open-abort" sets `removing` while the
stamping run goes, runs the removing backfill, then `off`. Scenario.open_completion "forced" is
the known-bad runbook: `open` forced (--force: no parity check) as soon as the settled switch
allows, without waiting for the backfill to stamp the older open sagas.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from saga_index.index import RetryLaterError
from saga_index.layout_change.checks import probe_keys
from saga_index.layout_change.record import ControlState, ControlStore, OpenIndexState, Phase
from saga_index.layout_change.transitions import (
    CompletionCheckOptions,
    PhaseChange,
    PreconditionFailedError,
    change_open_index,
    change_phase,
)
from tests.sim.processes import EXPECTED_ERRORS, Process
from tests.sim.scheduler import Task
from tests.sim.table import TABLE

if TYPE_CHECKING:
    from tests.sim.world import Simulation

COMPLETING = (Phase.SHARDED, Phase.LEGACY)
# The parity re-check waits on the real clock: the simulation's index does not move between
# the two passes of one check, so the wait would only cost real time.
CHECK_OPTIONS = CompletionCheckOptions(recheck_delay_seconds=0.0, segments=1, scan_rate=100_000.0)
# The first move's guard reads the shard keys a plan can name (no plan goes past sharded(8)),
# not all 1,024: each read is a scheduled request of the simulation.
SHARD_KEY_PROBE = partial(probe_keys, include_legacy=False, to_shard=16)


PLANS: dict[str, list[tuple[Phase, int | None]]] = {
    "forward": [(Phase.MIGRATING, 4), (Phase.SHARDED, None)],
    "reshard": [
        (Phase.MIGRATING, 4),
        (Phase.SHARDED, None),
        (Phase.RESHARDING, 8),
        (Phase.SHARDED, None),
    ],
    "abort": [(Phase.MIGRATING, 4), (Phase.ROLLING_BACK, None), (Phase.LEGACY, None)],
}
OFF, ADDING, OPEN, REMOVING = (
    OpenIndexState.OFF,
    OpenIndexState.ADDING,
    OpenIndexState.OPEN,
    OpenIndexState.REMOVING,
)
OPEN_PLANS: dict[str, list[OpenIndexState]] = {
    "open": [ADDING, OPEN],
    "open-abort": [ADDING, REMOVING, OFF],
}
OPEN_COMPLETING = (OPEN, OFF)
# The open index's checks re-read what differs after the CLI's default delay, waited on the
# operator's virtual clock (change_open_index takes the sleep): the index moves meanwhile, as
# DynamoDB's does, so a row stamped just before the check is not refused for its index lag.
OPEN_CHECK_OPTIONS = CompletionCheckOptions(segments=1, scan_rate=100_000.0)
ALL_PLANS = (*PLANS, *OPEN_PLANS)


def operator(sim: Simulation, process: Process, task: Task) -> Callable[[], None]:
    def body() -> None:
        client = sim.table.client_for(process.name)
        store = ControlStore(client, TABLE)
        task.sleep(process.rng.uniform(5.0, 30.0))
        if sim.scenario.plan in OPEN_PLANS:
            _open_plan(sim, process, task, store, OPEN_PLANS[sim.scenario.plan])
            sim.operator_done = True
            sim.note(process.name, "plan done")
            return
        plan = PLANS[sim.scenario.plan]
        for number, (phase, shards) in enumerate(plan):
            if phase in COMPLETING:
                _complete(sim, process, task, store, phase)
                continue
            _set(sim, process, task, store, phase, shards)
            _wait_effective(sim, process, task, store)
            direction = "rollback" if phase is Phase.ROLLING_BACK else "forward"
            worker = sim.start_worker(direction)
            aborting = sim.scenario.plan == "abort" and number == 0
            if aborting:
                # Abort while the run is going (once it holds its lease): it must notice and
                # stop, paused or not.
                while "keeper" not in worker.settings and not sim.run_finished(worker):
                    task.sleep(1.0)
                task.sleep(process.rng.uniform(1.0, 10.0))
                continue
            _wait_for_run(sim, task, worker)
        sim.operator_done = True
        sim.note(process.name, "plan done")

    return body


def _set(
    sim: Simulation,
    process: Process,
    task: Task,
    store: ControlStore,
    phase: Phase,
    shards: int | None,
) -> bool:
    for _attempt in range(20):
        before = sim.audit.read()
        try:
            change = change_phase(
                store,
                phase,
                changed_by=process.name,
                reason="simulated runbook step",
                shard_count=shards,
                options=CHECK_OPTIONS,
                probe=SHARD_KEY_PROBE,
                clock=process.clock.wall,
                timing=sim.timing,
            )
        except PreconditionFailedError as err:
            sim.note(process.name, f"phase set {phase.value} refused: {err}")
            return False
        except RetryLaterError as err:
            sim.note(process.name, f"phase set {phase.value}: not yet: {err}")
            if _landed_anyway(sim, process, phase, before, err):
                return True
            if err.retry_at is None:
                raise AssertionError("a refusal to retry later must say when") from err
            task.sleep(max(0.0, (err.retry_at - process.clock.wall()).total_seconds()))
            continue
        except EXPECTED_ERRORS as err:
            sim.note(process.name, f"phase set {phase.value} failed: {type(err).__name__}: {err}")
            current = _read(store, task)
            if current is not None and current.phase is phase:
                sim.on_transition(phase, current)
                return True
            task.sleep(5.0)
            continue
        warned = "".join(f"; {warning}" for warning in change.warnings)
        sim.note(
            process.name, f"phase set {phase.value}: version {change.transition.version}{warned}"
        )
        sim.on_transition(phase, change.state)
        return True
    raise AssertionError(f"phase set {phase.value} never went through")


def _landed_anyway(
    sim: Simulation, process: Process, phase: Phase, before: ControlState, err: RetryLaterError
) -> bool:
    """A "not yet" (nothing applied, run it again) over a move whose STATE write landed is a
    report the operator acts on wrongly: checked against the record as the table holds it."""
    after = sim.audit.read()
    transition = after.transition
    if (
        after.version != before.version + 1
        or after.phase is not phase
        or transition is None
        or transition.changed_by != process.name
    ):
        return False
    sim.checker.fail(
        "report",
        f"phase set {phase.value} by {process.name} answered 'not yet' ({err}) while the STATE "
        f"item holds its move (version {after.version}, {after.phase.value})",
    )
    sim.on_transition(phase, after)
    return True


def _complete(
    sim: Simulation, process: Process, task: Task, store: ControlStore, phase: Phase
) -> None:
    for _attempt in range(6):
        if _set(sim, process, task, store, phase, None):
            return
        direction = "rollback" if phase is Phase.LEGACY else "forward"
        _wait_for_run(sim, task, sim.start_worker(direction))
    sim.note(process.name, f"gave up on {phase.value}: its checks kept failing")


def _wait_effective(sim: Simulation, process: Process, task: Task, store: ControlStore) -> None:
    state = None
    while state is None:
        state = _read(store, task)
    transition = state.transition
    if transition is not None:
        wait = (transition.effective_at - process.clock.wall()).total_seconds()
        task.sleep(max(0.0, wait) + sim.scenario.start_after_effective)


def _wait_for_run(sim: Simulation, task: Task, worker: Process) -> None:
    # Watched closely: the completing move follows the run's end as early as it may.
    while not sim.run_finished(worker):
        task.sleep(sim.scenario.operator_poll)


def _read(store: ControlStore, task: Task) -> ControlState | None:
    try:
        return store.read()
    except EXPECTED_ERRORS:
        task.sleep(2.0)
        return None


# ---- the open-saga index -----------------------------------------------------------------------


def _open_plan(
    sim: Simulation, process: Process, task: Task, store: ControlStore, plan: list[OpenIndexState]
) -> None:
    forced = sim.scenario.open_completion == "forced"
    for number, state in enumerate(plan):
        if state in OPEN_COMPLETING:
            _complete_open(sim, process, task, store, state)
            continue
        _set_open(sim, process, task, store, state)
        stamper = sim.start_stamper()
        if forced and state is ADDING:
            continue  # the known-bad runbook: `open` at once, forced, the run still going
        if sim.scenario.plan == "open-abort" and number == 0:
            # Roll back while the stamping run goes (its lease waits for effectiveAt plus the
            # margin): the run loses its lease to the new version and must write nothing more.
            settles = (
                sim.timing.effective_delay.total_seconds() + sim.timing.in_flight_margin_seconds
            )
            task.sleep(settles + process.rng.uniform(1.0, 10.0))
            continue
        _wait_for_run(sim, task, stamper)
    # The world goes on under its faults a while after the last move: readers that switch to
    # the open index late, and writers opening and closing sagas meanwhile.
    task.sleep(sim.scenario.open_linger_seconds)


def _set_open(
    sim: Simulation, process: Process, task: Task, store: ControlStore, state: OpenIndexState
) -> bool:
    """`saga-index open-index set STATE --wait` (forced when the scenario says so); False: its
    check refused it."""
    force = state is OPEN and sim.scenario.open_completion == "forced"
    for _attempt in range(20):
        try:
            change = _change_open_index(sim, process, task, store, state, force=force)
        except PreconditionFailedError as err:
            sim.note(process.name, f"open-index set {state.value} refused: {err}")
            return False
        except RetryLaterError as err:
            sim.note(process.name, f"open-index set {state.value}: not yet: {err}")
            if err.retry_at is None:
                raise AssertionError("a refusal to retry later must say when") from err
            task.sleep(max(0.0, (err.retry_at - process.clock.wall()).total_seconds()))
            continue
        except EXPECTED_ERRORS as err:
            sim.note(process.name, f"open-index set {state.value} failed: {type(err).__name__}")
            current = _read(store, task)
            if current is not None and current.open_index.state is state:
                sim.on_open_transition(state)
                return True
            task.sleep(5.0)
            continue
        warned = "".join(f"; {warning}" for warning in change.warnings)
        forced = f" forced {list(change.transition.checks_forced)}" if force else ""
        sim.note(
            process.name,
            f"open-index set {state.value}: version {change.transition.version}{forced}{warned}",
        )
        sim.on_open_transition(state)
        return True
    raise AssertionError(f"open-index set {state.value} never went through")


def _change_open_index(
    sim: Simulation,
    process: Process,
    task: Task,
    store: ControlStore,
    state: OpenIndexState,
    *,
    force: bool,
) -> PhaseChange:
    return change_open_index(
        store,
        state,
        changed_by=process.name,
        reason="simulated runbook step",
        shard_count=sim.scenario.open_shards if state is ADDING else None,
        force=force,
        options=OPEN_CHECK_OPTIONS,
        sleep=task.sleep,
        probe=SHARD_KEY_PROBE,
        clock=process.clock.wall,
        timing=sim.timing,
    )


def _complete_open(
    sim: Simulation, process: Process, task: Task, store: ControlStore, state: OpenIndexState
) -> None:
    for _attempt in range(6):
        if _set_open(sim, process, task, store, state):
            return
        _wait_for_run(sim, task, sim.start_stamper())
    sim.note(process.name, f"gave up on open index {state.value}: its checks kept failing")
