"""The simulated processes: each runs the REAL code on its own parked thread (scheduler.Task).

  reader    its own ControlProvider cache; by-person reads and both enumerations through the
            real SagaRepository along the provider's routing (small pages: reads interleave)
  writer    a SagaWriter following its own provider: creates, and workflow transitions that
            re-stamp GSI4PK
  worker    a backfill run: the real lease (take_run), the real segment loop (run_segment, the
            row re-stamps and their conditions), the real LeaseKeeper's heartbeat loop on a
            second task of the same process, the real read-back and release
  stamper   the open-saga index's backfill (`saga-index open-index backfill`): the worker's
            steps with a request of kind open-index, its direction the open index's state's
            (stamp in adding, remove in removing), the lease waiting for the settled switch,
            the open-index verification and release
  drift     the real DriftChecker against the record's state, now and then
  operator  the real change_phase, choosing its completion checks as for the CLI (runbook.py)

Each process has its own wall clock (skewed) and monotonic clock, injected where the code takes
clocks; every wait is a virtual sleep (Task.sleep).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import OPEN_STATES, SagaIndexError, keys
from saga_index.index.model import ALL_STATES
from saga_index.layout_change.backfill import (
    BackfillRequest,
    OpenVerify,
    TokenBucket,
    finish_backfill,
    run_segment,
)
from saga_index.layout_change.backfill.keeper import LeaseKeeper, release_with_completion, take_run
from saga_index.layout_change.backfill.open_readback import finish_open_index, release_run
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.lease import (
    LeaseDirectionError,
    LeaseLostError,
    open_index_direction,
)
from saga_index.layout_change.record import (
    BackfillDirection,
    BackfillKind,
    ControlProvider,
    ControlStore,
)
from saga_index.store import SagaRepository, SagaWriter, utc_iso
from saga_index.store.dynamo import RetryPolicy
from saga_index.store.plan import KEEP_OPEN_KEY
from tests.sim.clock import ProcessClock
from tests.sim.scheduler import Task
from tests.sim.table import TABLE

if TYPE_CHECKING:
    from tests.sim.world import Simulation

# What a process may see go wrong and carry on from (a real service logs it and retries later).
EXPECTED_ERRORS = (SagaIndexError, ClientError, BotoCoreError)
# The page sizes by default (Scenario.read_page_size, scan_page_size): small, so that reads
# and scans interleave with everything else.
READ_PAGE_SIZE = 3
SCAN_PAGE_SIZE = 2
# The open-index run's verification: the CLI's re-check delay (waited on the process's virtual
# clock), and a Scan pace far above what the simulated table's pages cost, so that its read
# limiter (on the real monotonic clock: the verification keeps its own) never waits.
OPEN_VERIFY = OpenVerify(read_units_per_second=1_000_000.0)


@dataclass
class Process:
    """One simulated process: its clocks, its own random stream, its tasks."""

    name: str
    role: str
    clock: ProcessClock
    rng: random.Random
    tasks: list[Task] = field(default_factory=list)
    paused_until: float = 0.0
    crashed: bool = False
    # Role-specific settings (a worker's direction).
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return all(t.done for t in self.tasks)


@dataclass(frozen=True)
class ReadSeen:
    """What one read returned, for the visibility invariant."""

    process: str
    kind: str  # person | all | open
    person: str | None
    began: float
    ended: float
    keys: frozenset[tuple[str, str]]
    phase: str
    writes: str
    # What an enumeration of open sagas read: "GSI4", or "open index N" (the sparse index).
    source: str = "GSI4"


def provider_for(sim: Simulation, client: Any, process: Process) -> ControlProvider:
    return ControlProvider(
        ControlStore(client, TABLE),
        timing=sim.timing,
        clock=process.clock.monotonic,
        wall_clock=process.clock.wall,
    )


def reader(sim: Simulation, process: Process, task: Task) -> Callable[[], None]:
    def body() -> None:
        client = sim.table.client_for(process.name)
        provider = provider_for(sim, client, process)
        # Processes start at different moments, so their caches expire at different moments.
        task.sleep(process.rng.uniform(0.0, sim.timing.cache_seconds))
        while True:
            kind = process.rng.choice(("person", "person", "all", "open"))
            person = process.rng.choice(sim.persons) if kind == "person" else None
            began = sim.time.now
            try:
                routing = provider.routing()
                repository = SagaRepository(
                    client,
                    TABLE,
                    plan=routing,
                    max_workers=1,
                    page_size=sim.scenario.read_page_size,
                )
                if person is not None:
                    result = repository.get_sagas_by_person(person)
                elif kind == "all":
                    result = repository.get_all_sagas()
                else:
                    result = repository.get_all_open_sagas()
            except EXPECTED_ERRORS as err:
                sim.note(process.name, f"read {kind} failed: {type(err).__name__}")
            else:
                sim.checker.on_read(
                    ReadSeen(
                        process=process.name,
                        kind=kind,
                        person=person,
                        began=began,
                        ended=sim.time.now,
                        keys=frozenset(keys.table_key_of(i) for i in result.items),
                        phase=routing.phase.value,
                        writes=str(routing.target if _switched(routing) else routing.source),
                        source=_source(routing) if kind == "open" else "GSI4",
                    )
                )
            task.sleep(process.rng.uniform(1.0, 6.0))

    return body


@dataclass(frozen=True)
class _SeededBackoff(RetryPolicy):
    """The writers' back-off (the default policy), its jitter drawn from the process's own
    random stream: a wait that passes on the virtual clock must replay with the seed."""

    draw: Callable[[], float] = field(default=random.random, compare=False)

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        del rng  # retry_transient's default, the process-wide stream: not the seed's
        return super().delay(attempt, self.draw)


class KeepsOpenKeyOnClose(SagaWriter):
    """The known-bad writer (Scenario.close_removes_open_key False): a saga it closes keeps
    its OpenSagaPK, so the closed saga stays in the open index."""

    def _keys_for(self, person_id: str, state: str) -> tuple[str, str | None]:
        gsi4pk, open_key = super()._keys_for(person_id, state)
        return gsi4pk, (open_key if state in OPEN_STATES else KEEP_OPEN_KEY)


def writer(sim: Simulation, process: Process, task: Task) -> Callable[[], None]:
    def body() -> None:
        client = sim.table.client_for(process.name)
        provider = provider_for(sim, client, process)
        kind = SagaWriter if sim.scenario.close_removes_open_key else KeepsOpenKeyOnClose
        backoff: dict[str, Any] = {}
        if sim.scenario.virtual_backoff:
            backoff = {"sleep": task.sleep, "retry": _SeededBackoff(draw=process.rng.random)}
        saga_writer = kind(client, TABLE, follow=provider.routing, **backoff)
        task.sleep(process.rng.uniform(0.0, sim.timing.cache_seconds))
        while True:
            now = utc_iso(process.clock.wall())
            try:
                if not sim.sagas or process.rng.random() < sim.scenario.create_share:
                    saga_id, person = sim.new_saga(process.rng)
                    saga_writer.create_saga(
                        saga_id=saga_id, person_id=person, lease_id="lease-sim", opened_at=now
                    )
                else:
                    saga_id, person = process.rng.choice(sim.sagas)
                    saga_writer.transition(
                        saga_id=saga_id,
                        person_id=person,
                        to_state=process.rng.choice(ALL_STATES),
                        updated_at=now,
                    )
            except EXPECTED_ERRORS as err:
                sim.note(process.name, f"write failed: {type(err).__name__}")
            burst = process.settings.get("burst", 0)
            if burst:
                process.settings["burst"] = burst - 1
            think = sim.scenario.burst_think if burst else sim.scenario.writer_think
            task.sleep(process.rng.uniform(*think))

    return body


class _VirtualDone:
    """The keeper's stop signal for its heartbeat loop, waiting on the virtual clock."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float | None = None) -> bool:
        if not self._set:
            self.task.sleep(timeout or 0.0)
        return self._set


def worker(sim: Simulation, process: Process, task: Task) -> Callable[[], None]:
    """A local backfill run, the steps of backfill_locally, with its heartbeat on a second task
    of the same process (so a pause stops both, as SIGSTOP does). A stamper is the same run of
    kind open-index, its direction the open index's state's (as the CLI's command takes it)."""
    kind = BackfillKind.OPEN_INDEX if process.role == "stamper" else BackfillKind.LAYOUT
    rate = sim.scenario.backfill_rate

    def body() -> None:
        client = sim.table.client_for(process.name)
        store = ControlStore(client, TABLE)
        if kind is BackfillKind.OPEN_INDEX:
            direction = _open_direction(sim, process, task, store)
            if direction is None:
                return
        else:
            direction = BackfillDirection.parse(process.settings["direction"])
        request = BackfillRequest(
            direction=direction,
            kind=kind,
            total_segments=sim.scenario.segments,
            max_writes_per_second=rate,
            dry_run=False,
        )
        token = f"sim-{process.rng.getrandbits(64):016x}"
        # An open-index run's lease waits for its state's settled switch (effectiveAt + margin).
        timing = {"timing": sim.timing} if kind is BackfillKind.OPEN_INDEX else {}
        while True:
            try:
                ticket, state = take_run(
                    store,
                    request,
                    holder=process.name,
                    token=token,
                    clock=process.clock.wall,
                    ttl_seconds=sim.lease_ttl,
                    # Fence slots are armed only for the transactional fence that checks them.
                    arm=sim.scenario.fence == "transactional",
                    **timing,
                )
                break
            except EXPECTED_ERRORS as err:
                sim.note(process.name, f"lease refused: {type(err).__name__}")
                if isinstance(err, LeaseDirectionError):
                    return
                task.sleep(3.0)
        sim.note(process.name, f"lease taken: {ticket.move().describe()} v{state.version}")
        stop = threading.Event()
        # Side by side, a key range slows a segment to its share of the run's rate, as in a
        # local run's bucket (local.paced_bucket).
        shares = {"segments": request.total_segments} if sim.scenario.concurrent_segments else {}
        bucket = TokenBucket(rate, clock=process.clock.monotonic, sleep=_sleep_here, **shares)
        try:
            fence = _fence(sim, process, task, client, token, state.version)
        except EXPECTED_ERRORS as err:
            # The command exits (its lease left to expire); the operator runs it again.
            sim.note(process.name, f"fence not built, run not started: {type(err).__name__}")
            return
        beat_task = sim.add_task(process, "heartbeat", lambda t: _heartbeat_loop(sim, process, t))
        keeper = LeaseKeeper(
            store,
            token,
            bucket,
            own_rate=rate,
            stop=stop,
            clock=process.clock.wall,
            ttl_seconds=sim.lease_ttl,
            poll_seconds=sim.poll_seconds,
            monotonic=process.clock.monotonic,
            **({} if fence is None else {"fence": fence}),
        )
        # The keeper's loop waits on this between heartbeats: the virtual clock, not real time.
        keeper._done = _VirtualDone(beat_task)  # type: ignore[assignment]
        try:
            keeper.heartbeat()  # as entering the keeper does: the run starts on a good one only
        except (LeaseLostError, *EXPECTED_ERRORS) as err:
            sim.note(process.name, f"first heartbeat failed, run not started: {err}")
            keeper._done.set()
            # No keeper is handed over: the heartbeat task ends too, so the process ends (as
            # backfill_locally raises out of its `with keeper:` and the command exits). A flag,
            # not creating the task after the first heartbeat: that would reorder every seed's
            # schedule, and the seeds the tests pin would no longer replay what they check.
            process.settings["run_not_started"] = True
            return
        process.settings["keeper"] = keeper
        if kind is BackfillKind.LAYOUT:
            sim.burst_writers()
        segments = request.segment_requests(ticket)
        if sim.scenario.concurrent_segments:
            results = _side_by_side(sim, process, task, client, segments, stop, bucket, fence)
        else:
            results = [
                _segment(sim, process, task, client, segment, stop, bucket, fence)
                for segment in segments
            ]
        keeper._done.set()
        if keeper.lost is not None or any(r is None or not r.done for r in results):
            sim.note(process.name, f"run stopped: {keeper.lost}")
            return
        if kind is BackfillKind.OPEN_INDEX:
            _finish_open(sim, process, task, client, store, request, results, ticket)
            return
        for _attempt in range(5):  # the state machine retries its verify step
            try:
                summary = finish_backfill(
                    client,
                    TABLE,
                    request,
                    [r for r in results if r is not None],
                    index_name=sim.index_name,
                    move=ticket.move(),
                )
                completion = release_with_completion(
                    store, ticket, summary, clock=process.clock.wall
                )
            except LeaseLostError as err:
                sim.note(process.name, f"release refused: {err}")
                return
            except EXPECTED_ERRORS as err:
                sim.note(process.name, f"release failed: {type(err).__name__}")
                task.sleep(5.0)
                continue
            sim.note(
                process.name,
                f"released: complete={completion.complete} verified={completion.verified} "
                f"restamped={completion.restamped}",
            )
            return

    return body


def _sleep_here(seconds: float) -> None:
    """A virtual sleep of whichever task is calling (a run's segments share its bucket)."""
    task = Task.current()
    if task is None:
        raise RuntimeError("a simulated process slept outside its tasks")
    task.sleep(seconds)


def _side_by_side(
    sim: Simulation,
    process: Process,
    task: Task,
    client: Any,
    segments: list[Any],
    stop: threading.Event,
    bucket: TokenBucket,
    fence: Any,
) -> list[Any]:
    """Every segment on a task of its own, as run_backfill's threads: the run's one bucket and
    fence shared, the main task waiting for them all (a crash or pause of the process stops
    them all alike). A failed segment stops the others, as run_backfill's first failure does."""
    results: dict[int, Any] = {}

    def one(segment: Any) -> None:
        result = _segment(sim, process, task, client, segment, stop, bucket, fence)
        results[segment.segment] = result
        if result is None:
            stop.set()

    runs = [sim.add_task(process, f"segment{s.segment}", lambda _t, s=s: one(s)) for s in segments]
    while not all(run.done for run in runs):
        task.sleep(0.1)
    return [results.get(s.segment) for s in segments]


def _open_direction(
    sim: Simulation, process: Process, task: Task, store: ControlStore
) -> BackfillDirection | None:
    """The open-index run's direction, from the record as the command reads it (None: the open
    index is off, the command's refusal)."""
    while True:
        try:
            return open_index_direction(store.read())
        except LeaseDirectionError as err:
            sim.note(process.name, f"open index backfill refused: {err}")
            return None
        except EXPECTED_ERRORS as err:
            sim.note(process.name, f"record read failed: {type(err).__name__}")
            task.sleep(3.0)


def _finish_open(
    sim: Simulation,
    process: Process,
    task: Task,
    client: Any,
    store: ControlStore,
    request: BackfillRequest,
    results: list[Any],
    ticket: Any,
) -> None:
    """backfill_locally's end of an open-index run: verify the open index, release the lease."""
    for _attempt in range(5):
        try:
            summary = finish_open_index(
                client, TABLE, request, results, ticket, options=OPEN_VERIFY, sleep=task.sleep
            )
            release_run(store, ticket, summary, clock=process.clock.wall)
        except LeaseLostError as err:
            sim.note(process.name, f"release refused: {err}")
            return
        except EXPECTED_ERRORS as err:
            sim.note(process.name, f"open index verify or release failed: {type(err).__name__}")
            task.sleep(5.0)
            continue
        verification = summary.verification
        sim.note(
            process.name,
            f"open index run released: complete={summary.complete} "
            f"verified={summary.verified} restamped={summary.restamped} "
            f"({'' if verification is None else verification.message})",
        )
        return


def _fence(
    sim: Simulation, process: Process, task: Task, client: Any, token: str, version: int
) -> Any:
    """The run's lease fence as backfill_locally builds it (None: the fence is switched off,
    the deliberately broken variant), on the process's clocks."""
    if sim.scenario.fence == "none":
        return None
    from saga_index.layout_change.backfill.leased import fence_for_run

    return fence_for_run(
        client,
        TABLE,
        token=token,
        state_version=version,
        ttl_seconds=sim.lease_ttl,
        poll_seconds=sim.poll_seconds,
        transactional=sim.scenario.fence == "transactional",
        clock=process.clock.wall,
        monotonic=process.clock.monotonic,
        sleep=_sleep_here,
    )


def _segment(
    sim: Simulation,
    process: Process,
    task: Task,
    client: Any,
    segment: Any,
    stop: threading.Event,
    bucket: TokenBucket,
    fence: Any,
) -> Any:
    """One segment to its end; a throttled segment is run again (rows it moved are skipped),
    as the state machine's Retry does."""
    for _attempt in range(5):
        if stop.is_set():
            return None
        try:
            return run_segment(
                client,
                TABLE,
                segment,
                stop=stop,
                bucket=bucket,
                page_size=sim.scenario.scan_page_size,
                **({} if fence is None else {"fence": fence}),
            )
        except EXPECTED_ERRORS as err:
            sim.note(process.name, f"segment {segment.segment} failed: {type(err).__name__}")
            _sleep_here(5.0)
    return None


def _heartbeat_loop(sim: Simulation, process: Process, task: Task) -> None:
    keeper = process.settings.get("keeper")
    while keeper is None:  # the worker hands its keeper over right after creating this task
        if process.settings.get("run_not_started"):
            return
        task.sleep(0.1)
        keeper = process.settings.get("keeper")
    keeper._beat()  # the real loop: every poll_seconds, LeaseLostError stops the run


def drift_guard(sim: Simulation, process: Process, task: Task) -> Callable[[], None]:
    def body() -> None:
        client = sim.table.client_for(process.name)
        store = ControlStore(client, TABLE)
        while True:
            task.sleep(sim.scenario.drift_every)
            try:
                # The open index's re-check does not wait: a real wait would stop the whole
                # simulation, and a lag it would have absorbed is only noted here.
                report = DriftChecker(
                    client,
                    TABLE,
                    state=store.read(),
                    max_workers=1,
                    page_size=sim.scenario.scan_page_size,
                    open_recheck_seconds=0,
                    # The record's switches are judged settled on the simulation's clock, as
                    # every other process judges them, not on this machine's.
                    now=process.clock.wall(),
                ).check(scan_unindexed=True)
            except EXPECTED_ERRORS as err:
                sim.note(process.name, f"drift run failed: {type(err).__name__}")
                continue
            sim.note(process.name, f"drift healthy={report.healthy} {report.findings()}")

    return body


def _source(routing: Any) -> str:
    keys_ = routing.open_enumeration_keys()
    return "GSI4" if keys_ is None else f"open index {len(keys_)}"


def _switched(routing: Any) -> bool:
    return bool(getattr(routing, "switched", True))
