"""The traffic mix of ADR-0085, as a plan of events on a virtual clock, and its replay.

The ADR names what converges on the one GSI4 partition; each is an event kind here, and every
rate is a TrafficMix parameter (defaults below, documented in docs/demo.md):

  list-page     the renewals LIST page: each property manager's page polls every 3-5 s and
                every load fans out one by-person read per tenant with a renewal in flight.
  sweep         the four periodic sweeps (workflow-health-sweep, retry-failed-prepare,
                stuck-saga-sweep, agent-metrics-snapshot), each one get_all_open_sagas(). By
                default they fire together every 60 s, as unstaggered crons do.
  transition    Temporal workflow writes: a saga moves to its next open state (Poisson).
  cohort        the cohort walker opening a batch of new sagas in the same second.
  inbound       Clara's inbound paths: each message does by-person reads of its sender.

build_plan() turns a mix and a dataset into ticks (one per virtual second). Replayer.run() sends
every request of a tick to the server (concurrently, on a bounded pool), waits for all of them,
then advances the clock: so the meter attributes each request to its virtual second, while the
replay runs as fast as the server allows (faster or slower than real time).

SyntheticTable prices the same plan without a server, from item sizes alone, with the meter's
own pricing functions: the benchmarks use it for the 100x dataset, where a real run would take
far longer than the benchmark budget.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from devkit.capacity import (
    CapacityMeter,
    Charge,
    LoadLedger,
    TableSchema,
    VirtualClock,
    item_size,
    read_units,
    write_charges,
)
from devkit.seed import (
    EPOCH,
    PAD_ATTRIBUTE,
    Dataset,
    SagaRecord,
    filler_attributes,
    pad_to_size,
)
from saga_index import keys
from saga_index.dynamo import make_client, serialize
from saga_index.errors import InvalidInputError
from saga_index.model import Phase
from saga_index.repository import SagaRepository
from saga_index.writer import SagaWriter, utc_iso

log = logging.getLogger(__name__)

SWEEP_NAMES = (
    "workflow-health-sweep",
    "retry-failed-prepare",
    "stuck-saga-sweep",
    "agent-metrics-snapshot",
)
# A DynamoDB Query page ends at 1 MB of data read.
QUERY_PAGE_BYTES = 1024 * 1024
# Where a transition sends a saga: every step stays open, so the open set (what the sweeps
# read) keeps the same size through both replays.
_NEXT_STATE = {
    "OPENED": "PREPARING",
    "PREPARING": "OFFER_SENT",
    "PREPARE_FAILED": "PREPARING",
    "OFFER_SENT": "NEGOTIATING",
    "NEGOTIATING": "AWAITING_SIGNATURE",
    "AWAITING_SIGNATURE": "NEGOTIATING",
}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    period_s: int = 60
    offset_s: int = 0


@dataclass(frozen=True)
class TrafficMix:
    """Rates of the ADR's traffic mix. Defaults model one production property-management team."""

    duration_s: int = 120
    # Renewals list page: this many property managers keep it open (capped at the dataset's).
    property_managers: int = 6
    poll_interval_s: tuple[float, float] = (3.0, 5.0)
    # The four sweeps; all at offset 0 means they coincide, as the ADR describes.
    sweeps: tuple[SweepSpec, ...] = tuple(SweepSpec(name) for name in SWEEP_NAMES)
    # Workflow state transitions per second (Poisson).
    transitions_per_s: float = 2.0
    # Cohort walker: this many sagas opened in the same second, every period.
    cohort_size: int = 40
    cohort_period_s: int = 60
    cohort_offset_s: int = 0
    # Inbound messages per second (Poisson); each does this many by-person reads of its sender
    # (conversation-manager, signal-bridge, ... each read the sender's sagas).
    inbound_messages_per_s: float = 3.0
    reads_per_message: int = 2
    # Share of inbound messages from persons with a renewal in flight (the rest: anyone).
    inbound_open_share: float = 0.8
    seed: int = 85

    def validate(self) -> TrafficMix:
        if self.duration_s < 1:
            raise InvalidInputError(f"duration_s must be >= 1, got {self.duration_s}")
        low, high = self.poll_interval_s
        if not 0 < low <= high:
            raise InvalidInputError(
                f"poll_interval_s must be (low, high) with 0 < low <= high, got {(low, high)}"
            )
        for name in (
            "property_managers",
            "cohort_size",
            "reads_per_message",
            "transitions_per_s",
            "inbound_messages_per_s",
        ):
            if getattr(self, name) < 0:
                raise InvalidInputError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.cohort_period_s < 1 or any(s.period_s < 1 for s in self.sweeps):
            raise InvalidInputError("every period must be at least 1 s")
        if not 0 <= self.inbound_open_share <= 1:
            raise InvalidInputError("inbound_open_share must be a fraction of 1")
        return self

    def scaled(self, factor: int) -> TrafficMix:
        """The traffic of `factor` times the dataset: more managers, workflows and messages.

        The sweeps stay four: each reads `factor` times more rows instead.
        """
        return replace(
            self,
            property_managers=self.property_managers * factor,
            transitions_per_s=self.transitions_per_s * factor,
            cohort_size=self.cohort_size * factor,
            inbound_messages_per_s=self.inbound_messages_per_s * factor,
        )


# ---- events and plans -----------------------------------------------------------------------


@dataclass(frozen=True)
class ListPageLoad:
    manager: str
    persons: tuple[str, ...]
    kind: str = "list-page"


@dataclass(frozen=True)
class Sweep:
    name: str
    kind: str = "sweep"


@dataclass(frozen=True)
class Transition:
    saga_id: str
    person_id: str
    to_state: str
    kind: str = "transition"


@dataclass(frozen=True)
class NewSaga:
    number: int
    person_id: str
    manager_id: str
    size: int
    salt: int


@dataclass(frozen=True)
class CohortOpen:
    sagas: tuple[NewSaga, ...]
    kind: str = "cohort"


@dataclass(frozen=True)
class InboundMessage:
    person_id: str
    reads: int
    kind: str = "inbound"


Event = ListPageLoad | Sweep | Transition | CohortOpen | InboundMessage


@dataclass(frozen=True)
class Tick:
    second: int
    events: tuple[Event, ...]


@dataclass(frozen=True)
class Plan:
    mix: TrafficMix
    ticks: tuple[Tick, ...]

    def counts(self) -> dict[str, int]:
        return dict(Counter(event.kind for tick in self.ticks for event in tick.events))


def build_plan(mix: TrafficMix, dataset: Dataset) -> Plan:
    """The events of `mix` over `dataset`, deterministic in mix.seed."""
    mix.validate()
    rng = random.Random(mix.seed)
    events: dict[int, list[Event]] = defaultdict(list)

    managers = [m for m in dataset.managers if dataset.tenants.get(m)]
    for manager in managers[: mix.property_managers]:
        low, high = mix.poll_interval_s
        moment = rng.uniform(0, high)
        while moment < mix.duration_s:
            events[int(moment)].append(ListPageLoad(manager, dataset.tenants[manager]))
            moment += rng.uniform(low, high)

    for sweep in mix.sweeps:
        for second in range(sweep.offset_s, mix.duration_s, sweep.period_s):
            events[second].append(Sweep(sweep.name))

    open_sagas = [s for s in dataset.open_sagas if s.person_id is not None]
    states = {s.saga_id: s.state for s in open_sagas}
    if open_sagas and mix.transitions_per_s > 0:
        moment = rng.expovariate(mix.transitions_per_s)
        while moment < mix.duration_s:
            record = rng.choice(open_sagas)
            assert record.person_id is not None
            to_state = _NEXT_STATE[states[record.saga_id]]
            states[record.saga_id] = to_state
            events[int(moment)].append(Transition(record.saga_id, record.person_id, to_state))
            moment += rng.expovariate(mix.transitions_per_s)

    busy = set(dataset.persons_with_open_saga)
    idle = [p for p in dataset.persons if p not in busy]
    number = 0
    if mix.cohort_size > 0 and idle:
        for second in range(mix.cohort_offset_s, mix.duration_s, mix.cohort_period_s):
            batch = []
            for _ in range(mix.cohort_size):
                person = rng.choice(idle)
                batch.append(
                    NewSaga(
                        number=number,
                        person_id=person,
                        manager_id=dataset.person_manager[person],
                        size=rng.randint(dataset.spec.min_item_bytes, dataset.spec.max_item_bytes),
                        salt=rng.getrandbits(31),
                    )
                )
                number += 1
            events[second].append(CohortOpen(tuple(batch)))

    senders_open = sorted(busy)
    if mix.inbound_messages_per_s > 0 and mix.reads_per_message > 0:
        moment = rng.expovariate(mix.inbound_messages_per_s)
        while moment < mix.duration_s:
            if senders_open and rng.random() < mix.inbound_open_share:
                person = rng.choice(senders_open)
            else:
                person = rng.choice(dataset.persons)
            events[int(moment)].append(InboundMessage(person, mix.reads_per_message))
            moment += rng.expovariate(mix.inbound_messages_per_s)

    ticks = tuple(Tick(second, tuple(events[second])) for second in sorted(events))
    return Plan(mix=mix, ticks=ticks)


def new_saga_record(
    saga: NewSaga, run_label: str, second: int, time_base: datetime = EPOCH
) -> SagaRecord:
    """The row a cohort opens; ids carry the run label so two replays never collide."""
    opened = utc_iso(time_base + timedelta(seconds=second))
    return SagaRecord(
        saga_id=f"rs_{run_label}_cohort_{saga.number:06d}",
        person_id=saga.person_id,
        lease_id=f"lease_{run_label}_cohort_{saga.number:06d}",
        manager_id=saga.manager_id,
        opened_at=opened,
        state="OPENED",
        size=saga.size,
        salt=saga.salt,
    )


# ---- replay against a server ------------------------------------------------------------------


class ReplayError(RuntimeError):
    """Some events of a replay failed: the replay stopped, the measurement is void."""


@dataclass
class ReplayStats:
    label: str
    virtual_seconds: int
    wall_seconds: float = 0.0
    events: dict[str, int] = field(default_factory=dict)
    by_person_reads: int = 0
    by_person_requests: int = 0
    enumerations: int = 0
    enumeration_requests: int = 0
    writes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "virtualSeconds": self.virtual_seconds,
            "wallSeconds": round(self.wall_seconds, 2),
            "speedup": round(self.virtual_seconds / self.wall_seconds, 2)
            if self.wall_seconds
            else None,
            "events": dict(sorted(self.events.items())),
            "byPersonReads": self.by_person_reads,
            "byPersonRequests": self.by_person_requests,
            "requestsPerByPersonRead": round(self.by_person_requests / self.by_person_reads, 3)
            if self.by_person_reads
            else None,
            "enumerations": self.enumerations,
            "enumerationRequests": self.enumeration_requests,
            "writes": self.writes,
        }


class Replayer:
    """Sends a plan's requests through a repository and a writer on metered clients."""

    def __init__(
        self,
        repository: SagaRepository,
        writer: SagaWriter,
        clock: VirtualClock,
        *,
        run_label: str,
        time_base: datetime = EPOCH,
        workers: int = 8,
        on_tick: Callable[[int, int], None] | None = None,
    ) -> None:
        """time_base: the wall-clock instant of virtual second 0. Give each replay of the same
        plan its own, so a repeated transition still changes updatedAt (an update that changes
        nothing writes no index entry, which would flatter the second run)."""
        if workers < 1:
            raise InvalidInputError(f"workers must be >= 1, got {workers}")
        if not run_label or not run_label.isidentifier():
            raise InvalidInputError(f"run_label must be a short identifier, got {run_label!r}")
        self.repository = repository
        self.writer = writer
        self.clock = clock
        self.run_label = run_label
        self.time_base = time_base
        self.workers = workers
        self.on_tick = on_tick
        self._lock = threading.Lock()

    def run(self, plan: Plan) -> ReplayStats:
        stats = ReplayStats(label=self.run_label, virtual_seconds=plan.mix.duration_s)
        stats.events = plan.counts()
        started = time.monotonic()
        errors: list[str] = []
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="replay") as pool:
            try:
                for tick in plan.ticks:
                    self.clock.set(tick.second)
                    futures: list[Future[None]] = [
                        pool.submit(self._execute, event, tick.second, stats)
                        for event in tick.events
                    ]
                    wait(futures)
                    for future in futures:
                        error = future.exception()
                        if error is not None:
                            errors.append(f"second {tick.second}: {type(error).__name__}: {error}")
                    if errors:
                        raise ReplayError(
                            f"{len(errors)} event(s) failed in the {self.run_label} replay, "
                            f"first: {errors[0]}"
                        )
                    if self.on_tick is not None:
                        self.on_tick(tick.second, plan.mix.duration_s)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        stats.wall_seconds = time.monotonic() - started
        return stats

    def _execute(self, event: Event, second: int, stats: ReplayStats) -> None:
        if isinstance(event, ListPageLoad):
            for person in event.persons:
                self._by_person(person, stats)
        elif isinstance(event, InboundMessage):
            for _ in range(event.reads):
                self._by_person(event.person_id, stats)
        elif isinstance(event, Sweep):
            result = self.repository.get_all_open_sagas()
            with self._lock:
                stats.enumerations += 1
                stats.enumeration_requests += result.requests
        elif isinstance(event, Transition):
            self.writer.transition(
                saga_id=event.saga_id,
                person_id=event.person_id,
                to_state=event.to_state,
                updated_at=utc_iso(self.time_base + timedelta(seconds=second)),
            )
            with self._lock:
                stats.writes += 1
        elif isinstance(event, CohortOpen):
            for saga in event.sagas:
                record = new_saga_record(saga, self.run_label, second, self.time_base)
                assert record.person_id is not None
                extra = filler_attributes(record, record.opened_at)
                padded = _padding_for(record, extra)
                self.writer.create_saga(
                    saga_id=record.saga_id,
                    person_id=record.person_id,
                    lease_id=record.lease_id,
                    opened_at=record.opened_at,
                    extra={**extra, **padded},
                )
                with self._lock:
                    stats.writes += 1
        else:  # pragma: no cover - the Event union is closed
            raise TypeError(f"unknown event {event!r}")

    def _by_person(self, person_id: str, stats: ReplayStats) -> None:
        result = self.repository.get_sagas_by_person(person_id)
        with self._lock:
            stats.by_person_reads += 1
            stats.by_person_requests += result.requests


def _padding_for(record: SagaRecord, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The padding attribute that makes the row the writer will build record.size bytes."""
    assert record.person_id is not None
    plain = {
        **keys.saga_table_key(record.saga_id),
        "entityType": keys.ENTITY_TYPE,
        "sagaId": record.saga_id,
        "personId": record.person_id,
        "leaseId": record.lease_id,
        "openedAt": record.opened_at,
        "state": record.state,
        "updatedAt": record.opened_at,
        # Both layouts' keys are the longest they can be: the legacy key is shorter than a
        # shard key by at most 5 bytes, which the 1-2 KB spread absorbs.
        "GSI4PK": keys.LEGACY_GSI4PK,
        "GSI4SK": record.gsi4sk,
        **extra,
    }
    padded = pad_to_size(serialize(plain), record.size)
    return {PAD_ATTRIBUTE: padded[PAD_ATTRIBUTE]["S"]}


# ---- the same plan priced without a server ----------------------------------------------------


@dataclass
class _Row:
    saga_id: str
    person_id: str | None
    gsi4pk: str
    gsi4sk: str
    state: str
    size: int


class SyntheticTable:
    """An in-memory model of the saga rows that prices a plan like the meter would.

    Reads follow the repository's routing for the phase (a by-person read queries the person's
    partition(s) with begins_with on GSI4SK; an enumeration queries every partition to its last
    1 MB page); each Query page is priced from the sizes of the rows it reads, with the meter's
    read_units. Writes are priced with the meter's write_charges on items of the row's size.
    Only the index (GSI4) and the base table are modelled: it is the index load that matters.
    """

    def __init__(
        self,
        dataset: Dataset,
        schema: TableSchema,
        *,
        phase: Phase | str,
        shard_count: int,
        layout_shard_count: int | None = None,
    ) -> None:
        self.schema = schema
        self.index = schema.index(keys.INDEX_NAME)
        self.phase = Phase.parse(phase)
        self.shard_count = shard_count
        self.ledger = LoadLedger()
        self.requests: Counter[str] = Counter()
        self._rows: dict[str, _Row] = {}
        self._by_partition: dict[str, dict[str, _Row]] = defaultdict(dict)
        self._by_person: dict[str, list[_Row]] = defaultdict(list)
        self._shard_keys: dict[str, str] = {}
        layout: dict[str, str] = {}  # person -> key in the seeded layout (one hash each)
        for record in dataset.sagas:
            person = record.person_id
            if person is None or layout_shard_count is None:
                gsi4pk = record.gsi4pk(layout_shard_count)
            else:
                gsi4pk = layout.get(person) or layout.setdefault(
                    person, record.gsi4pk(layout_shard_count)
                )
            self._insert(
                _Row(record.saga_id, person, gsi4pk, record.gsi4sk, record.state, record.size)
            )

    def _insert(self, row: _Row) -> None:
        self._rows[row.saga_id] = row
        self._by_partition[row.gsi4pk][row.saga_id] = row
        if row.person_id is not None:
            self._by_person[row.person_id].append(row)

    # ---- what the repository would read ------------------------------------------------

    def _partitions(self, shard_keys: Sequence[str]) -> list[str]:
        legacy = [keys.LEGACY_GSI4PK] if self.phase.reads_legacy else []
        shards = list(shard_keys) if self.phase.reads_shards else []
        return legacy + shards

    def _shard_key(self, person_id: str) -> str:
        key = self._shard_keys.get(person_id)
        if key is None:
            key = self._shard_keys[person_id] = keys.shard_gsi4pk_for_person(
                person_id, self.shard_count
            )
        return key

    def by_person(self, person_id: str, second: int) -> int:
        partitions = self._partitions([self._shard_key(person_id)])
        for partition in partitions:
            size = sum(r.size for r in self._by_person[person_id] if r.gsi4pk == partition)
            self._read(second, partition, [size])
        self.requests["by-person"] += len(partitions)
        return len(partitions)

    def enumerate_open(self, second: int) -> int:
        requests = 0
        for partition in self._partitions(keys.all_shard_gsi4pks(self.shard_count)):
            pages = _pages([r.size for r in self._by_partition[partition].values()])
            for page in pages:
                self._read(second, partition, page)
            requests += len(pages)
        self.requests["enumeration"] += requests
        return requests

    def _read(self, second: int, partition: str, sizes: Iterable[int]) -> None:
        units = read_units(sum(sizes), consistent=False)
        self.ledger.add(second, [Charge(self.index.name, partition, rcu=units)])

    # ---- writes ---------------------------------------------------------------------------

    def _gsi4pk_for(self, person_id: str) -> str:
        if self.phase.writes_sharded:
            return self._shard_key(person_id)
        return keys.LEGACY_GSI4PK

    def create(self, record: SagaRecord, second: int) -> None:
        assert record.person_id is not None
        row = _Row(
            record.saga_id,
            record.person_id,
            self._gsi4pk_for(record.person_id),
            record.gsi4sk,
            "OPENED",
            record.size,
        )
        self._insert(row)
        self.ledger.add(second, write_charges(self.schema, None, _item(row)))
        self.requests["write"] += 1

    def transition(self, saga_id: str, to_state: str, second: int) -> None:
        row = self._rows[saga_id]
        old = _item(row)
        del self._by_partition[row.gsi4pk][saga_id]
        assert row.person_id is not None
        row.gsi4pk = self._gsi4pk_for(row.person_id)
        row.state = to_state
        self._by_partition[row.gsi4pk][saga_id] = row
        self.ledger.add(second, write_charges(self.schema, old, _item(row)))
        self.requests["write"] += 1

    def run(self, plan: Plan, run_label: str) -> LoadLedger:
        for tick in plan.ticks:
            for event in tick.events:
                if isinstance(event, ListPageLoad):
                    for person in event.persons:
                        self.by_person(person, tick.second)
                elif isinstance(event, InboundMessage):
                    for _ in range(event.reads):
                        self.by_person(event.person_id, tick.second)
                elif isinstance(event, Sweep):
                    self.enumerate_open(tick.second)
                elif isinstance(event, Transition):
                    self.transition(event.saga_id, event.to_state, tick.second)
                elif isinstance(event, CohortOpen):
                    for saga in event.sagas:
                        self.create(new_saga_record(saga, run_label, tick.second), tick.second)
        return self.ledger


def _pages(sizes: Sequence[int]) -> list[list[int]]:
    """Split a partition's rows into Query pages of at most 1 MB read (at least one page)."""
    pages: list[list[int]] = [[]]
    total = 0
    for size in sizes:
        if total + size > QUERY_PAGE_BYTES and pages[-1]:
            pages.append([])
            total = 0
        pages[-1].append(size)
        total += size
    return pages


def _item(row: _Row) -> dict[str, Any]:
    """A wire item of the row's size, with the attributes the index prices."""
    item: dict[str, Any] = {
        "PK": {"S": keys.saga_table_key(row.saga_id)["PK"]},
        "SK": {"S": keys.SAGA_SK},
        "GSI4PK": {"S": row.gsi4pk},
        "GSI4SK": {"S": row.gsi4sk},
        "state": {"S": row.state},
    }
    return pad_to_size(item, max(row.size, _minimum_size(item)))


def _minimum_size(item: Mapping[str, Any]) -> int:
    return item_size(item) + len(PAD_ATTRIBUTE)


# ---- one metered replay on a local server -------------------------------------------------------


def metered_replay(
    endpoint_url: str,
    table_name: str,
    schema: TableSchema,
    plan: Plan,
    *,
    phase: Phase | str,
    shard_count: int,
    run_label: str,
    time_base: datetime = EPOCH,
    workers: int = 8,
    on_tick: Callable[[int, int], None] | None = None,
) -> tuple[ReplayStats, CapacityMeter]:
    """Replay `plan` through a repository and a writer in `phase`, every request metered.

    The meter reads old items through its own un-metered client; the replay's clock is virtual.
    """
    clock = VirtualClock()
    meter = CapacityMeter(schema, reader=make_client(endpoint_url=endpoint_url), clock=clock.now)
    client = meter.attach(make_client(endpoint_url=endpoint_url))
    repository = SagaRepository(client, table_name, phase=phase, shard_count=shard_count)
    writer = SagaWriter(client, table_name, phase=phase, shard_count=shard_count)
    stats = Replayer(
        repository,
        writer,
        clock,
        run_label=run_label,
        time_base=time_base,
        workers=workers,
        on_tick=on_tick,
    ).run(plan)
    return stats, meter
