"""The world bench.pacing_engine runs its backfills in: a table seeded on the shard keys of a move
being rolled back (sharded(16) -> legacy), and the application's writes on the legacy key beside
the backfill, counted per engine second; and the arithmetic of those seconds the bench judges by
(the budget the traffic left, the re-stamps in the key's seconds and in the client's).

The traffic is the demo's traffic mix's writes (devkit.traffic.mix: `transition`, a workflow
moving a saga to its next open state, Poisson in the demo; here evenly spaced), through the
product's SagaWriter following the record's routing, so each stamps the legacy GSI4 key (1 WCU
on it: a saga row is under 1 KB). Each request is sent once (no retry: a throttled one is
counted, as bench.pacing's traffic), from a pool of threads on the engine's clock, but for one
DynamoDB refused because the backfill's re-stamp of the same row was in flight
(TransactionConflictException: the traffic's sagas are rows the backfill moves): that one is
sent again after the product writer's back-off (store.dynamo.DEFAULT_POLICY), as the product's
writer does, and counted apart (the seconds' `conflicts`). The mix's
reads (list pages, sweeps, inbound messages) are left out: they take read units, which do not
share the write ceiling the backfill's pace is judged by.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from bench.pace_figures import settled_after
from devkit.seed import bare_saga_row
from devkit.semantics.dilation import TimeScale
from saga_index.index import LEGACY, Layout, RetryLaterError, SagaIndexError
from saga_index.layout_change.backfill import TokenBucket
from saga_index.layout_change.record import ControlState, Routing, Transition, state_item
from saga_index.store import SagaWriter, utc_iso
from saga_index.store.dynamo import (
    DEFAULT_POLICY,
    RetryPolicy,
    error_code,
    is_throttle,
    make_client,
    serialize,
)

SHARDS = 16
TRAFFIC_THREADS = 16
# The two states a traffic saga moves between (both open, as the mix's transitions keep them).
_STATES = ("NEGOTIATING", "AWAITING_SIGNATURE")


class CountingBucket(TokenBucket):
    """The run's bucket, counting the throttled requests its segments tell the pacer of (a
    fenced re-stamp's throttle is a cancelled transaction, which the client's throttle counter
    does not see)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.throttled = 0
        # By ThrottlingReason ("none" for a throttle without one): what slowed the run.
        self.reasons: Counter[str] = Counter()

    def on_throttle(self, reasons: Iterable[str] = (), *, segment: int | None = None) -> None:
        listed = list(reasons)
        self.throttled += 1
        self.reasons.update(listed or ["none"])
        super().on_throttle(listed, segment=segment)


@dataclass
class Seconds:
    """Per-second counts of one run, on the engine's clock from `origin`."""

    clock: Callable[[], float]
    origin: float
    counts: dict[str, Counter[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_restamped: int = 0
    # The pace the run's bucket held at each second's last re-stamp (writes/s).
    pace: dict[int, float] = field(default_factory=dict)

    def add(self, name: str, n: int = 1) -> None:
        second = math.floor(self.clock() - self.origin)
        with self.lock:
            self.counts.setdefault(name, Counter())[second] += n

    def __getitem__(self, name: str) -> Counter[int]:
        return self.counts.setdefault(name, Counter())

    def on_progress(self, totals: Any, pace: float) -> None:
        """The backfill's live totals: its re-stamps since the last report, this second's; and
        the bucket's pace then."""
        delta = totals.restamped - self.last_restamped
        self.last_restamped = totals.restamped
        if delta:
            self.add("written", delta)
            self.pace[math.floor(self.clock() - self.origin)] = pace

    def pace_per_second(self, seconds: int) -> list[float | None]:
        return [None if s not in self.pace else round(self.pace[s], 1) for s in range(seconds)]


def seed(client: Any, table: str, rows: int, traffic: int) -> list[tuple[str, str]]:
    """`rows` saga rows for the backfill and `traffic` for the traffic, all on their shard
    keys (sharded(16), where the rollback moves them from); the traffic's (saga, person).
    `client` may be dynalite's own (the engine's store, behind no ceiling: the seeding is not
    the run); whatever a batch leaves unprocessed is sent again."""
    sharded = Routing.for_phase("sharded", SHARDS)
    items, sagas = [], []
    for n in range(rows + traffic):
        saga, person = (f"b{n:07}", f"p{n % 997}") if n < rows else (f"t{n:07}", f"q{n}")
        if n >= rows:
            sagas.append((saga, person))
        row = bare_saga_row(saga, person, gsi4pk=sharded.write_key(person), state=_STATES[0])
        items.append({"PutRequest": {"Item": serialize(row)}})
    for start in range(0, len(items), 25):
        batch: dict[str, Any] = {table: items[start : start + 25]}
        for _ in range(100):
            batch = client.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}
            if not batch:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"seeding {table}: a batch stayed unprocessed after 100 tries")
    return sagas


def plant_rolling_back(client: Any, table: str) -> None:
    """The record rolling back sharded(16) -> legacy, effective long ago (an abort of a
    migration, without waiting for effectiveAt)."""
    changed_at = datetime.now(UTC) - timedelta(hours=1)
    change = Transition(
        version=2,
        layout=Layout.sharded(SHARDS),
        moving_to=LEGACY,
        previous_layout=LEGACY,
        previous_moving_to=Layout.sharded(SHARDS),
        changed_at=changed_at,
        changed_by="bench",
        reason="bench.pacing_engine",
        effective_at=changed_at + timedelta(seconds=1),
    )
    client.put_item(TableName=table, Item=serialize(state_item(ControlState(transition=change))))


# DynamoDB's refusal of a plain write to an item a transaction is writing.
CONFLICT = "TransactionConflictException"


class Traffic:
    """The application's transitions at loads[i] x ceiling per engine second in phase i, each
    request sent once on a pool of threads (again only after a conflict with a re-stamp of its
    row); sent, throttled and other outcomes counted by the engine second it was sent in."""

    def __init__(
        self,
        endpoint_url: str,
        table: str,
        sagas: list[tuple[str, str]],
        seconds: Seconds,
        scale: TimeScale,
        rates: Sequence[float],
        phase_seconds: float,
    ) -> None:
        client = make_client(endpoint_url=endpoint_url, max_attempts=1, max_pool_connections=64)
        self.writer = SagaWriter(
            client,
            table,
            plan=Routing.for_phase("rolling-back", SHARDS),
            retry=RetryPolicy(attempts=1),
        )
        self.sagas, self.seconds, self.scale = sagas, seconds, scale
        self.rates, self.phase_seconds = rates, phase_seconds
        self.errors: Counter[str] = Counter()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def due(self, elapsed: float) -> int:
        """Requests due in the first `elapsed` engine seconds."""
        total = 0.0
        for index, rate in enumerate(self.rates):
            start = index * self.phase_seconds
            total += rate * min(max(0.0, elapsed - start), self.phase_seconds)
        return math.floor(total)

    def _run(self) -> None:
        end = self.phase_seconds * len(self.rates)
        sent = 0
        with ThreadPoolExecutor(TRAFFIC_THREADS, thread_name_prefix="traffic") as pool:
            while not self.stop.is_set():
                elapsed = self.scale.monotonic() - self.seconds.origin
                if elapsed >= end:
                    break
                for n in range(sent, self.due(elapsed)):
                    pool.submit(self._send, n)
                sent = max(sent, self.due(elapsed))
                time.sleep(0.002)

    def _send(self, n: int) -> None:
        saga, person = self.sagas[n % len(self.sagas)]
        self.seconds.add("sent")
        for attempt in range(DEFAULT_POLICY.attempts):
            try:
                self.writer.transition(
                    saga_id=saga,
                    person_id=person,
                    to_state=_STATES[(n // len(self.sagas) + 1) % 2],
                    updated_at=utc_iso(self.scale.wall()),
                )
                return
            except (ClientError, SagaIndexError, BotoCoreError) as err:
                # The writer's refusal after its one attempt (RetryLaterError) carries DynamoDB's.
                refusal = err.__cause__ if isinstance(err, RetryLaterError) else err
                code = error_code(refusal) if isinstance(refusal, ClientError) else None
                if isinstance(refusal, ClientError) and is_throttle(refusal):
                    self.seconds.add("throttled")
                elif code == CONFLICT and attempt + 1 < DEFAULT_POLICY.attempts:
                    # Refused unapplied: sent again, as the product's writer would (counted
                    # as "conflicts"; the request still counts once as sent).
                    self.seconds.add("conflicts")
                    time.sleep(DEFAULT_POLICY.delay(attempt))
                    continue
                else:
                    self.errors[code or type(refusal).__name__] += 1
                return

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def left_by_traffic(sent: Counter[int], ceiling: float, bounds: Sequence[int]) -> list[float]:
    """Each phase's budget: the ceiling less the traffic's measured rate in it."""
    return [
        ceiling - sum(sent[s] for s in range(a, b)) / max(1, b - a)
        for a, b in itertools.pairwise(bounds)
    ]


def client_counted(
    written: Counter[int], bounds: Sequence[int], budgets: Sequence[float]
) -> dict[str, Any]:
    """The re-stamps per second as the backfill's progress reports counted them on the
    client's clock (what this bench judged before it read the key's own seconds: a report late
    by a fraction of a second moves writes into the next second), and the settling they give."""
    steps = list(zip(itertools.pairwise(bounds), budgets, strict=True))[1:]
    return {
        "client_per_second": [written[s] for s in range(bounds[-1])],
        "client_settle_seconds": [settled_after(written, a, b, budget) for (a, b), budget in steps],
    }


def key_seconds(writes: Counter[tuple[str, int]], origin: float) -> Counter[int]:
    """The backfill's re-stamps per second of the run, as the key's ceiling counted them: the
    proxy's TransactWriteItems on the run's table (every fenced re-stamp is one; the traffic's
    writes are single UpdateItems and PutItems) in each of the engine's whole seconds, placed on
    the run's second nearest its start (`origin`: the engine's clock at the run's second 0)."""
    out: Counter[int] = Counter()
    for (operation, second), n in writes.items():
        if operation == "TransactWriteItems":
            out[round(second - origin)] += n
    return out
