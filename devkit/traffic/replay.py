"""A plan replayed against a server, every request metered.

Replayer.run() sends every request of a tick to the server (concurrently, on a bounded pool),
waits for all of them, then advances the clock: so the meter attributes each request to its
virtual second, while the replay runs as fast as the server allows (faster or slower than real
time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from devkit.capacity.clock import VirtualClock
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.seed import EPOCH, PAD_ATTRIBUTE, SagaRecord, filler_attributes, pad_to_size
from devkit.traffic.events import (
    CohortOpen,
    Event,
    InboundMessage,
    ListPageLoad,
    Sweep,
    Transition,
    new_saga_record,
)
from devkit.traffic.plan import Plan
from saga_index.index import InvalidInputError, keys
from saga_index.layout_change.record import Phase, Routing
from saga_index.store import ReadResult, SagaRepository, SagaWriter, utc_iso
from saga_index.store.dynamo import make_client, serialize


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
    # The hottest index key's read units in each virtual second (what the chart draws).
    timeline: dict[int, float] = field(default_factory=dict)

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


class SagaReads(Protocol):
    """What a replay reads through: SagaRepository, or a bench's reader of another layout."""

    def get_sagas_by_person(self, person_id: str) -> ReadResult: ...

    def get_all_open_sagas(self) -> ReadResult: ...


class SagaWrites(Protocol):
    """What a replay writes through: SagaWriter, or a bench's writer of another layout."""

    def create_saga(
        self,
        *,
        saga_id: str,
        person_id: str,
        lease_id: str,
        opened_at: str,
        extra: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]: ...

    def transition(
        self, *, saga_id: str, person_id: str, to_state: str, updated_at: str
    ) -> dict[str, Any]: ...


class Replayer:
    """Sends a plan's requests through a repository and a writer on metered clients."""

    def __init__(
        self,
        repository: SagaReads,
        writer: SagaWrites,
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
    repository = SagaRepository(
        client,
        table_name,
        plan=Routing.for_phase(phase, shard_count),
    )
    writer = SagaWriter(
        client,
        table_name,
        plan=Routing.for_phase(phase, shard_count),
    )
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
