"""The simulated world, driven by one seed: build it, step it, fault it, quiesce it, judge it.

Why a seeded scheduler of our own and not hypothesis's RuleBasedStateMachine: the steps here
are not independent rules but the requests of real code running on parked threads, whose state
(a provider's cache, a worker that decided to write before it was paused) lives in those
threads. A seed reproduces a run exactly, and the trace names every step; a hypothesis machine
would have to rebuild the threads for every shrink and could not shrink inside one run of the
real code. `random.Random(seed)` decides every choice (which task runs, how far time moves, every
index delay, every fault), so `replay(seed)` is the same run, step for step.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from saga_index.index import OPEN_STATES, keys, names
from saga_index.layout_change.backfill import CONTROL_POLL_SECONDS
from saga_index.layout_change.checks import OpenIndexReader
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.lease import LEASE_TTL_SECONDS
from saga_index.layout_change.record import (
    ControlProvider,
    ControlRecordInvalidError,
    ControlState,
    ControlStore,
    ControlTiming,
    OpenIndex,
    OpenIndexState,
    Phase,
    routing_for,
)
from saga_index.store import SagaRepository
from saga_index.store.dynamo import ScanOptions, serialize
from tests.sim import processes, runbook
from tests.sim.checker import Checker
from tests.sim.clock import EPOCH, ProcessClock, VirtualTime
from tests.sim.outcome import Outcome
from tests.sim.scheduler import HarnessError, Task
from tests.sim.table import TABLE, Faults, SimTable

# A consistent Scan of the whole base table every this many steps (and at the end).
BASE_SCAN_EVERY = 500
# A backfill run is started by the operator, from a host whose clock is this close to its own
# (the services' clocks may be off by the whole in-flight margin: Scenario.max_skew).
WORKER_SKEW_SECONDS = 5.0
# The mean latency of one request (a step), in seconds.
REQUEST_SECONDS = 0.01
PERSONS = ("p-1", "alice", "bob", "carol", "p-7", "dave")


@dataclass(frozen=True)
class Scenario:
    plan: str = "forward"  # runbook.ALL_PLANS (the layout's PLANS, the open index's OPEN_PLANS)
    # The backfill's lease fence: transactional (ConditionCheck on its fence slot, moto has
    # transactions), clock (the heartbeat-age check only), none (the broken variant).
    fence: str = "transactional"
    readers: int = 3
    writers: int = 2
    seeded_sagas: int = 8
    create_share: float = 0.3
    backfill_rate: float = 2.0
    segments: int = 2
    drift_every: float = 240.0
    max_index_delay: float = 3.0
    # Fault rates, per virtual second (the chance in a step is rate x the step's time).
    storm: float = 1 / 60  # a throttle storm on one process's requests
    max_storm: float = 10.0
    lost_answer: float = 0.02
    # Per write of the control STATE item: applied, its answer lost, its resends throttled
    # (tests/sim/table.py Faults.dropped_answer). Off by default: the clean seeds stay as they
    # were; the lost-answer scenario turns it on.
    dropped_answer: float = 0.0
    pause: float = 1 / 200  # pause one process (its state intact)
    max_pause: float = 300.0
    # Per write request: pause the process parked right before it (between its check and its
    # write).
    pause_at_write: float = 0.0
    # The roles a pause may hit (empty: every role).
    pause_roles: tuple[str, ...] = ()
    crash: float = 1 / 2000  # crash one process (restarted fresh)
    # The bounds the contract states, reached: every clock but the operator's (the reference,
    # on which effectiveAt is written) is off by up to `max_skew` seconds either way, and a
    # service writer may hold a key it chose for up to what its clock's lag behind the
    # operator's leaves of the in-flight margin (the margin covers both together). None: the
    # in-flight margin itself.
    max_skew: float | None = None
    # Per service write: hold the writer right before it, as long as the margin allows.
    hold_at_write: float = 0.05
    # The operator: how often it looks whether a run ended, and how long after effectiveAt it
    # starts one (the runbook's earliest: at once, and a completing move right after the run).
    operator_poll: float = 0.5
    start_after_effective: float = 0.0
    # The open-saga index's plans: its N, and the two known-bad variants the checker is shown
    # to catch. open_completion "forced": `open` forced as soon as its settled switch allows,
    # the backfill not waited for (runbook.py); close_removes_open_key False: writers that
    # leave OpenSagaPK on the sagas they close (processes.KeepsOpenKeyOnClose).
    open_shards: int = 4
    open_completion: str = "checked"
    close_removes_open_key: bool = True
    # How long the operator waits, faults still on, after the open-index plan's last move.
    open_linger_seconds: float = 60.0
    max_steps: int = 60000
    max_seconds: float = 2400.0
    quiet_seconds: float = 150.0
    # A step's latency: exponential with this mean, plus `request_floor` (a request's least).
    # The whole world runs one request at a time, so these bound its requests per virtual
    # second: at the defaults ~95, under the backfill's rate in the schedules at production
    # rate, which shorten them.
    request_seconds: float = REQUEST_SECONDS
    request_floor: float = 0.0005
    # The worker runs its segments side by side (a task each, sharing the run's bucket, as a
    # local run's threads do), not one after the other: one segment's fenced re-stamps wait for
    # each transaction's in-flight time, so only side by side do they reach 1,000 writes/s.
    concurrent_segments: bool = False
    # A service writer's think time between writes (uniform, seconds).
    writer_think: tuple[float, float] = (2.0, 8.0)
    # When a layout run starts writing, every writer wakes and writes this many times back to
    # back, `burst_think` apart (a sweep claiming its sagas). Why: a run's re-stamp holds its
    # row for the transaction's in-flight time (10 ms), so the conflicts a run meets come to
    # about the writers' writes per second x 10 ms, however many rows and whatever its rate:
    # ~0.05 a run at the ADR's ~5 saga writes/s. A burst on the run meets them within a seed
    # without the writers writing that fast all along (each write is a step).
    writer_burst: int = 0
    burst_think: tuple[float, float] = (0.005, 0.02)
    # The readers' Query page and the backfill's and drift guard's Scan page (small by
    # default, so that they interleave with everything else; a table of hundreds of rows
    # takes larger ones for its reads to stay affordable).
    read_page_size: int = processes.READ_PAGE_SIZE
    scan_page_size: int = processes.SCAN_PAGE_SIZE
    # A service writer's back-off after a refused write (a conflict, a throttle) waits on the
    # virtual clock. Off by default: the seeds pinned before it replay as they were (their
    # writers' back-off passed no virtual time).
    virtual_backoff: bool = False
    # Bytes of payload on each seeded saga (production rows are 1-2 KB: each re-stamp then
    # costs the hot legacy key 2 WCU of its 1,000 a second).
    saga_payload: int = 0
    # The schedule's name, when it is not its plan's default (`python -m tests.sim --schedule`).
    schedule: str = ""


@dataclass
class Simulation:
    seed: int
    scenario: Scenario = field(default_factory=Scenario)
    timing: ControlTiming = field(default_factory=ControlTiming)
    lease_ttl: float = LEASE_TTL_SECONDS
    poll_seconds: float = CONTROL_POLL_SECONDS
    index_name: str = names.INDEX_NAME

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.time = VirtualTime()
        self.table = SimTable(
            self.time,
            random.Random(self.rng.getrandbits(64)),
            max_index_delay=self.scenario.max_index_delay,
            faults=Faults(
                lost_answer=self.scenario.lost_answer,
                dropped_answer=self.scenario.dropped_answer,
            ),
        )
        self.checker = Checker(self.table)
        self.audit = ControlStore(self.table.raw, TABLE)
        self.persons = PERSONS
        self.sagas: list[tuple[str, str]] = []
        self.processes: list[processes.Process] = []
        self.trace: list[str] = []
        self.phases: list[str] = ["legacy"]
        self.operator_done = False
        self._numbers: dict[str, int] = {}
        self._steps = 0
        self._record_seen: tuple[int, ControlState | None] = (-1, None)
        self._seed_rows()

    # ---- building ----------------------------------------------------------------------------

    def _seed_rows(self) -> None:
        for n in range(self.scenario.seeded_sagas):
            person = self.persons[n % len(self.persons)]
            saga_id = f"seed-{n}"
            opened = (EPOCH - timedelta(days=1, minutes=n)).isoformat(timespec="milliseconds")
            item = serialize(
                {
                    **keys.saga_table_key(saga_id),
                    "entityType": keys.ENTITY_TYPE,
                    "sagaId": saga_id,
                    "personId": person,
                    "leaseId": "lease-seed",
                    "openedAt": opened.replace("+00:00", "Z"),
                    "updatedAt": opened.replace("+00:00", "Z"),
                    "state": "OPENED",
                    "GSI4PK": keys.LEGACY_GSI4PK,
                    "GSI4SK": keys.gsi4sk(person, opened.replace("+00:00", "Z")),
                }
            )
            if self.scenario.saga_payload:
                item["payload"] = {"S": "x" * self.scenario.saga_payload}
            self.table.seed(item)
            self.checker.seed(item)
            self.sagas.append((saga_id, person))

    def new_saga(self, rng: random.Random) -> tuple[str, str]:
        saga = (f"s-{len(self.sagas)}", rng.choice(self.persons))
        self.sagas.append(saga)
        return saga

    def spawn(self, role: str, **settings: object) -> processes.Process:
        number = self._numbers[role] = self._numbers.get(role, 0) + 1
        process = processes.Process(
            name=f"{role}{number}",
            role=role,
            clock=ProcessClock(
                self.time,
                skew=self.rng.uniform(-self._skew_of(role), self._skew_of(role)),
                origin=self.rng.uniform(1_000.0, 100_000.0),
            ),
            rng=random.Random(self.rng.getrandbits(64)),
            settings=dict(settings),
        )
        if role == "worker":
            self.checker.backfill_processes.add(process.name)
        if role == "stamper":
            self.checker.stamp_processes.add(process.name)
        self.processes.append(process)
        self.add_task(process, "main", lambda task: _BODIES[role](self, process, task)())
        return process

    def add_task(self, process: processes.Process, name: str, body: Callable[[Task], None]) -> Task:
        task = Task(f"{process.name}.{name}", lambda: None, self.time)
        task.body = lambda: body(task)
        process.tasks.append(task)
        task.start()
        return task

    def start_worker(self, direction: str) -> processes.Process:
        return self.spawn("worker", direction=direction)

    def start_stamper(self) -> processes.Process:
        return self.spawn("stamper")

    def burst_writers(self) -> None:
        """A layout run starts writing: every writer cuts its think short and writes
        `writer_burst` times back to back (nothing when the scenario has no burst)."""
        if not self.scenario.writer_burst:
            return
        for process in self.processes:
            if process.role == "writer" and not process.done and not process.crashed:
                process.settings["burst"] = self.scenario.writer_burst
                for task in process.tasks:
                    if task.label.startswith("sleep"):
                        task.wake_at = min(task.wake_at, self.time.now)

    def run_finished(self, worker: processes.Process) -> bool:
        """The operator's view of a run: its process ended (released, lost or refused), and a
        crashed run's restart (the runbook: start it again) has ended too."""
        replacement = worker.settings.get("restarted_as")
        if isinstance(replacement, processes.Process):
            return self.run_finished(replacement)
        return worker.done and not worker.crashed

    def note(self, process: str, message: str) -> None:
        self.trace.append(f"{self.time.now:9.2f}  {process:<12} . {message}")

    def on_transition(self, phase: Phase, state: ControlState) -> None:
        self.phases.append(f"{phase.value}@{self.time.now:.0f}s")

    def on_open_transition(self, state: OpenIndexState) -> None:
        self.phases.append(f"open index {state.value}@{self.time.now:.0f}s")

    # ---- running -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        for role, count in (("reader", self.scenario.readers), ("writer", self.scenario.writers)):
            for _ in range(count):
                self.spawn(role)
        self.spawn("drift")
        self.spawn("operator")
        steps = 0
        quiet_from: float | None = None
        try:
            while steps < self.scenario.max_steps:
                steps += 1
                self._step(faults=quiet_from is None)
                if quiet_from is None and self.operator_done:
                    quiet_from = self._quiesce()
                if (
                    quiet_from is not None
                    and self.time.now > quiet_from + self.scenario.quiet_seconds
                ):
                    break
                if self.checker.violations or self.time.now > self.scenario.max_seconds:
                    break
            if not self.checker.violations:
                self._final_audit(finished=quiet_from is not None)
        finally:
            for process in self.processes:
                for task in process.tasks:
                    task.kill()
        errors = [t.error for p in self.processes for t in p.tasks if t.error]
        if errors:
            raise HarnessError(f"seed {self.seed}: a task raised:\n{errors[0]}")
        return Outcome(
            self.seed,
            self.scenario,
            list(self.checker.violations),
            self.trace,
            steps,
            self.checker.reads_checked,
            self.phases,
            self.checker.open_index_reads,
            self.table.semantics.stats,
        )

    def _step(self, *, faults: bool) -> None:
        # A step is one request: its latency passes (think time is each process's own sleep).
        scenario = self.scenario
        elapsed = self.rng.expovariate(1 / scenario.request_seconds) + scenario.request_floor
        self.time.advance(elapsed)
        self.table.propagate()
        live = [p for p in self.processes if not p.crashed and not p.done]
        if faults:
            self._maybe_fault(live, elapsed)
        ready = [
            t
            for p in live
            if p.paused_until <= self.time.now
            for t in p.tasks
            if not t.done and t.wake_at <= self.time.now
        ]
        if not ready:
            awake = [p for p in live if p.paused_until <= self.time.now]
            waiting = [t.wake_at for p in awake for t in p.tasks if not t.done]
            paused = [p.paused_until for p in live if p.paused_until > self.time.now]
            nxt = min(waiting + paused, default=self.time.now)
            idle = max(0.0, nxt - self.time.now)
            self.time.advance(idle)
            if faults:
                self._maybe_fault(live, idle)
            return
        task = self.rng.choice(ready)
        self.trace.append(f"{self.time.now:9.2f}  {task.name:<22} {task.label}")
        writes = self.table.writes
        task.resume()
        self._maybe_pause_at_write(task, faults=faults)
        self._steps += 1
        if self.table.writes != writes or self._steps % BASE_SCAN_EVERY == 0:
            self.checker.check_base(self._record(), scan=self._steps % BASE_SCAN_EVERY == 0)

    def _record(self) -> ControlState | None:
        """The record as it is (re-read only after a control item was written)."""
        version = self.table.control_writes
        if version != self._record_seen[0]:
            try:
                self._record_seen = (version, self.audit.read())
            except ControlRecordInvalidError:
                # The audit client is the table's own, unfaulted: the only failure is an item
                # that does not parse, which the checker judges as no readable state.
                self._record_seen = (version, None)
        return self._record_seen[1]

    def _maybe_fault(self, live: list[processes.Process], elapsed: float) -> None:
        if not live:
            return
        if self.rng.random() < self.scenario.storm * elapsed:
            victim = self.rng.choice(live)
            seconds = self.rng.uniform(0.5, self.scenario.max_storm)
            self.table.faults.storms[victim.name] = self.time.now + seconds
            self.note(victim.name, f"THROTTLE STORM for {seconds:.1f}s")
        roll = self.rng.random() / max(elapsed, 1e-9)
        if roll < self.scenario.pause:
            chosen = [
                p
                for p in live
                if p.paused_until <= self.time.now
                and (not self.scenario.pause_roles or p.role in self.scenario.pause_roles)
            ]
            if not chosen:
                return
            self._pause(self.rng.choice(chosen))
        elif roll < self.scenario.pause + self.scenario.crash:
            victim = self.rng.choice([p for p in live if p.role != "operator"] or live)
            if victim.role == "operator":
                return
            self.note(victim.name, "CRASHED (restarted fresh)")
            victim.crashed = True
            for task in victim.tasks:
                task.kill()
            replacement = self.spawn(
                victim.role, **{k: v for k, v in victim.settings.items() if k == "direction"}
            )
            victim.settings["restarted_as"] = replacement

    def _skew_of(self, role: str) -> float:
        """How far `role`'s clock may be off the operator's, either way."""
        if role == "operator":
            return 0.0
        return WORKER_SKEW_SECONDS if role in ("worker", "stamper") else self.max_skew

    @property
    def max_skew(self) -> float:
        bound = self.scenario.max_skew
        return self.timing.in_flight_margin_seconds if bound is None else bound

    def writer_hold(self, writer: processes.Process) -> float:
        """The longest `writer` may hold a key it chose: a service write has no fence, the
        contract's in-flight margin is what bounds it, together with how far the writer's clock
        runs behind the operator's (a late clock keeps stamping the prior layout that long after
        effectiveAt). A small slack for the request's own latency."""
        lag = max(0.0, -writer.clock.skew)
        return max(0.0, self.timing.in_flight_margin_seconds - lag - 0.25)

    def _pause(self, victim: processes.Process, seconds: float | None = None) -> None:
        seconds = self.rng.uniform(1.0, self.scenario.max_pause) if seconds is None else seconds
        if victim.role == "writer" and any(_at_write(t.label) for t in victim.tasks):
            seconds = min(seconds, self.writer_hold(victim))
        victim.paused_until = self.time.now + seconds
        self.note(victim.name, f"PAUSED for {seconds:.1f}s (state intact)")

    def _maybe_pause_at_write(self, task: Task, *, faults: bool) -> None:
        """The adversary's favourite moment: a process that just parked right before a write
        (between its check and its write) is paused there, with `pause_at_write` per write."""
        process = next(p for p in self.processes if task in p.tasks)
        if not faults or not _at_write(task.label) or process.paused_until > self.time.now:
            return
        hold = self.scenario.hold_at_write
        if hold > 0 and process.role == "writer" and self.rng.random() < hold:
            # A held request, to the edge of what the margin allows.
            longest = self.writer_hold(process)
            self._pause(process, self.rng.uniform(0.5 * longest, longest))
            return
        if self.scenario.pause_roles and process.role not in self.scenario.pause_roles:
            return
        if self.rng.random() < self.scenario.pause_at_write:
            self._pause(process)

    def _quiesce(self) -> float:
        """No more faults; every paused process resumes. The quiet period then lets every
        cache refresh and the index catch up while the processes go on."""
        self.table.faults.enabled = False
        for process in self.processes:
            process.paused_until = min(process.paused_until, self.time.now)
        self.note("sim", "QUIESCE: faults off, every process resumed")
        return self.time.now

    def _final_audit(self, *, finished: bool) -> None:
        if not finished:
            self.checker.fail(
                "quiesced",
                f"the plan did not finish in {self.scenario.max_steps} steps or "
                f"{self.scenario.max_seconds:.0f} s",
            )
            return
        self.table.settle()
        state = self.audit.read()
        self.checker.check_base(state, scan=True)
        # Settled: the open index's re-check need not wait.
        report = DriftChecker(
            self.table.raw, TABLE, state=state, max_workers=1, open_recheck_seconds=0
        ).check(scan_unindexed=True)
        if not report.healthy:
            self.checker.fail(
                "quiesced", f"drift not clean in {state.phase.value}: {report.findings()}"
            )
        truth = {k for k in self.checker.rows}
        for process in self.processes:
            if process.role != "reader" or process.crashed:
                continue
            provider = ControlProvider(
                ControlStore(self.table.raw, TABLE),
                timing=self.timing,
                clock=process.clock.monotonic,
                wall_clock=process.clock.wall,
            )
            repository = SagaRepository(
                self.table.raw, TABLE, plan=provider.routing(), max_workers=1
            )
            seen = {keys.table_key_of(i) for i in repository.get_all_sagas().items}
            for key in sorted(truth - seen):
                self.checker.fail(
                    "quiesced", f"{process.name} does not see {key[0]} after quiescing"
                )
            self._audit_open_reads(process, repository)
        self._audit_open_index(state)
        routing = routing_for(state, EPOCH + timedelta(seconds=self.time.now))
        for person in self.persons:
            repository = SagaRepository(self.table.raw, TABLE, plan=routing, max_workers=1)
            seen = {keys.table_key_of(i) for i in repository.get_sagas_by_person(person).items}
            own = {k for k, r in self.checker.rows.items() if r.item.get("personId") == person}
            for key in sorted(own - seen):
                self.checker.fail("quiesced", f"by-person {person} misses {key[0]} after quiescing")

    def _audit_open_reads(self, process: processes.Process, repository: SagaRepository) -> None:
        """A reader's enumeration of open sagas, quiesced: exactly the open sagas."""
        opened = {k for k, r in self.checker.rows.items() if r.item.get("state") in OPEN_STATES}
        seen = {keys.table_key_of(i) for i in repository.get_all_open_sagas().items}
        for key in sorted(opened - seen):
            self.checker.fail(
                "quiesced", f"{process.name}'s open sagas miss {key[0]} after quiescing"
            )
        for key in sorted(seen - opened):
            self.checker.fail(
                "quiesced", f"{process.name}'s open sagas hold the closed {key[0]} after quiescing"
            )

    def _audit_open_index(self, state: ControlState) -> None:
        """The open index as its completing move's check judges it (the real OpenIndexReader):
        in `open` every open saga in it and nothing else; back `off` after the open index was
        used, no row carrying OpenSagaPK and nothing in it."""
        index = state.open_index
        if index.is_off:
            if self.scenario.plan not in runbook.OPEN_PLANS:
                return
            index, expected = (
                OpenIndex.of(OpenIndexState.REMOVING, self.scenario.open_shards),
                False,
            )
        else:
            expected = index.stamps
        reader = OpenIndexReader(self.table.raw, TABLE, ScanOptions(segments=1), sleep=_no_wait)
        report = reader.check(index, stamps_expected=expected)
        if not report.ok:
            self.checker.fail(
                "quiesced", f"the open index is not right in {index}: {report.examples()}"
            )


def _no_wait(_: float) -> None:
    """The audit runs on a settled table: its re-check need not wait."""


def _at_write(label: str) -> bool:
    return label.startswith(("UpdateItem RSAGA#", "PutItem RSAGA#", "TransactWriteItems"))


_BODIES: dict[str, Callable[..., Callable[[], None]]] = {
    "reader": processes.reader,
    "writer": processes.writer,
    "worker": processes.worker,
    "stamper": processes.worker,
    "drift": processes.drift_guard,
    "operator": runbook.operator,
}


def simulate(seed: int, scenario: Scenario | None = None, **overrides: object) -> Outcome:
    """One run of the world under `seed` (inside moto's mock: the caller provides it)."""
    return Simulation(seed, scenario or Scenario(), **overrides).run()  # type: ignore[arg-type]
