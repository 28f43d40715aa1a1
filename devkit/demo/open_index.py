"""The demo's open-index act: the sparse open-saga index added live, as docs/runbook.md's "Add
the open-saga index" adds it (O1-O3), through the operator's commands.

The demo's table already has the index (created from the template), so the act starts at O1:
`open-index set adding --wait` (writers stamp OpenSagaPK on every open saga they write),
`open-index backfill --dry-run` and `open-index backfill` (the open rows that predate it), then
`open-index set open --wait` (its open-index-parity check, then the sweeps read the open index).

The demo's traffic runs through the whole move on the replay's plan, its writers and readers
following the control record as the deployed functions do (a ControlProvider at the demo's T):
transitions re-stamp, by-person reads, the sweeps. Its cohort walker is held for the act, so the
open set keeps its size (the plan's transitions keep every saga open) and the sweeps' counts
before and after compare. The sweeps' cost is metered by the capacity meter, before O1 and after
O3: one round of the four sweeps, each an all-open enumeration along the record's routing,
priced on every index it read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from devkit.capacity.clock import VirtualClock
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.demo.config import DemoConfig
from devkit.demo.operator import OperatorCli
from devkit.demo.steps import DemoError, quiet
from devkit.seed import EPOCH
from devkit.traffic.events import CohortOpen
from devkit.traffic.plan import Plan, Tick
from devkit.traffic.replay import Replayer, ReplayStats
from saga_index.index import INDEX_NAME, OPEN_INDEX_NAME, OPEN_STATES
from saga_index.layout_change.record import ControlProvider, ControlStore
from saga_index.store import ReadResult, SagaRepository, SagaWriter

REASON_ADDING = "make demo: writers stamp OpenSagaPK (the sweeps' sparse open-saga index)"
REASON_OPEN = "make demo: open rows stamped, parity checked; the sweeps read the open index"
# The traffic's pace during the act: virtual seconds replayed per wall second (the move's
# commands share the machine with it).
TRAFFIC_TICKS_PER_SECOND = 4.0


class FollowingReads:
    """The sweeps' and the by-person reads along the record's routing at each call, as a
    deployed function reads (the provider re-reads the record at most every T)."""

    def __init__(self, client: Any, table: str, provider: ControlProvider) -> None:
        self.client, self.table, self.provider = client, table, provider

    def _repository(self) -> SagaRepository:
        return SagaRepository(self.client, self.table, plan=self.provider.routing())

    def get_sagas_by_person(self, person_id: str) -> ReadResult:
        return self._repository().get_sagas_by_person(person_id)

    def get_all_open_sagas(self) -> ReadResult:
        return self._repository().get_all_open_sagas()


@dataclass(frozen=True)
class SweepCost:
    """One round of the sweeps, metered: read units per enumeration on each index it read."""

    enumerations: int
    open_sagas: int
    sagas: frozenset[tuple[str, str]]
    requests: int
    rcu_by_index: dict[str, float]
    routing: str

    @property
    def rcu_per_enumeration(self) -> float:
        return sum(self.rcu_by_index.values()) / self.enumerations

    def to_json(self) -> dict[str, Any]:
        return {
            "enumerations": self.enumerations,
            "reads": self.routing,
            "openSagas": self.open_sagas,
            "rcuPerEnumeration": round(self.rcu_per_enumeration, 3),
            "rcuPerSweepMinute": round(sum(self.rcu_by_index.values()), 3),
            "requestsPerEnumeration": round(self.requests / self.enumerations, 3),
            "rcuByIndex": {name: round(rcu, 3) for name, rcu in self.rcu_by_index.items()},
        }


def metered_sweeps(
    make_client: Callable[[], Any],
    table: str,
    schema: TableSchema,
    provider: ControlProvider,
    enumerations: int,
) -> SweepCost:
    """`enumerations` all-open enumerations (one round of the sweeps) along the record's
    routing, every request priced by a capacity meter of their own."""
    meter = CapacityMeter(schema, reader=make_client())
    reads = FollowingReads(meter.attach(make_client()), table, provider)
    counts: set[int] = set()
    sagas: frozenset[tuple[str, str]] = frozenset()
    requests = 0
    for _ in range(enumerations):
        result = reads.get_all_open_sagas()
        if any(row.get("state") not in OPEN_STATES for row in result.items):
            raise DemoError("an all-open enumeration returned a closed saga")
        sagas = frozenset((row["PK"], row["SK"]) for row in result.items)
        counts.add(len(sagas))
        requests += result.requests
    if len(counts) != 1:
        raise DemoError(f"the sweeps of one round disagree on the open sagas: {sorted(counts)}")
    keys = provider.routing().open_enumeration_keys()
    return SweepCost(
        enumerations=enumerations,
        open_sagas=len(sagas),
        sagas=sagas,
        requests=requests,
        rcu_by_index={
            name: meter.summary(name).total_rcu
            for name in (INDEX_NAME, OPEN_INDEX_NAME)
            if meter.summary(name).total_rcu
        },
        routing="gsi4" if keys is None else "open-index",
    )


@contextmanager
def traffic_running(
    make_client: Callable[[], Any],
    config: DemoConfig,
    plan: Plan,
    provider: ControlProvider,
    stats: list[ReplayStats],
) -> Iterator[None]:
    """The plan's traffic (its cohort walker held), replayed in a loop on a thread while the
    block runs, writers and readers following the record; its stats appended to `stats`. A
    failed event stops the demo once the block ends."""
    client = make_client()
    writer = SagaWriter(client, config.table_name, follow=provider.routing)
    reads = FollowingReads(client, config.table_name, provider)
    ticks = [
        Tick(t.second, tuple(e for e in t.events if not isinstance(e, CohortOpen)))
        for t in plan.ticks
    ]
    stop = threading.Event()
    failures: list[BaseException] = []

    def run() -> None:
        rounds = 0
        try:
            while not stop.is_set():
                for tick in ticks:
                    if stop.is_set():
                        break
                    started = time.monotonic()
                    chunk = Plan(mix=replace(plan.mix, duration_s=1), ticks=(Tick(0, tick.events),))
                    stats.append(
                        Replayer(
                            reads,
                            writer,
                            VirtualClock(),
                            run_label="open_index_act",
                            # A new wall-clock instant per tick: each transition changes updatedAt.
                            time_base=EPOCH
                            + timedelta(days=3, seconds=rounds * 10_000 + tick.second),
                            workers=config.workers,
                        ).run(chunk)
                    )
                    stop.wait(max(0.0, 1 / TRAFFIC_TICKS_PER_SECOND - (time.monotonic() - started)))
                rounds += 1
        except BaseException as err:  # noqa: BLE001 - reported by the block's owner
            failures.append(err)

    thread = threading.Thread(target=run, name="open-index-traffic", daemon=True)
    # At N = 32 an enumeration's parallel queries outnumber a client's pool (see steps.replay).
    with quiet("urllib3.connectionpool"):
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=60)
    if failures:
        raise DemoError(f"the traffic failed during the open-index act: {failures[0]}")


def open_index_act(
    operator: OperatorCli,
    *,
    config: DemoConfig,
    schema: TableSchema,
    plan: Plan,
    make_client: Callable[[], Any],
) -> dict[str, Any]:
    """Two numbered steps: O1-O2 with the traffic running, then O3 and the sweeps after. Returns
    the report's `openIndex` section."""
    stages = operator.stages
    provider = ControlProvider(
        ControlStore(make_client(), config.table_name), timing=operator.timing
    )
    sweeps = len(plan.mix.sweeps)
    stages.step("open-saga index: sweeps metered on GSI4, then O1 adding and O2 backfill, live")
    with quiet("urllib3.connectionpool"):
        before = metered_sweeps(make_client, config.table_name, schema, provider, sweeps)
    stages.note(sweep_line("before", before))
    traffic: list[ReplayStats] = []
    with traffic_running(make_client, config, plan, provider, traffic):
        adding = operator.run(
            "open-index", "set", "adding", "--reason", REASON_ADDING, "--wait", "--json"
        ).json()
        stages.note(
            f"version {adding['version']}: open index {adding['openIndex']} (N = "
            f"{adding['openIndexShardCount']}); writers stamp {adding['routing']['stamps']}, "
            f"enumerations read {adding['routing']['enumerations']}"
        )
        # The backfill starts after effectiveAt plus the in-flight margin (exit 5 before).
        time.sleep(operator.timing.in_flight_margin_seconds + 0.05)
        dry = _backfill(operator, config, "--dry-run")
        run = _backfill(operator, config)
        stages.step("O3 open-index set open (its parity check), then the sweeps metered again")
        opened = _set_open(operator)
    with quiet("urllib3.connectionpool"):
        after = metered_sweeps(make_client, config.table_name, schema, provider, sweeps)
    stages.note(sweep_line("after", after))
    if after.routing != "open-index" or before.routing != "gsi4":
        raise DemoError(f"the sweeps read {before.routing} then {after.routing}")
    if after.sagas != before.sagas:
        raise DemoError(
            f"the sweeps returned {before.open_sagas} open sagas before and {after.open_sagas} "
            f"after: {len(before.sagas - after.sagas)} missed, {len(after.sagas - before.sagas)} "
            "extra"
        )
    ratio = before.rcu_per_enumeration / after.rcu_per_enumeration
    stages.note(
        f"the sweeps read {ratio:.1f}x fewer read units per enumeration; the same "
        f"{after.open_sagas} open sagas both times"
    )
    return {
        "before": before.to_json(),
        "after": after.to_json(),
        "rcuRatio": round(ratio, 2),
        "sameOpenSagas": True,
        "shardCount": adding["openIndexShardCount"],
        "backfill": {"dryRun": dry, "run": run, "maxWritesPerSecond": config.backfill_rate},
        "checksPassed": [c["name"] for c in opened["checks"] if c["passed"]],
        "traffic": _traffic_json(traffic),
    }


def _backfill(operator: OperatorCli, config: DemoConfig, *extra: str) -> dict[str, Any]:
    """`open-index backfill [--dry-run] --json` at the demo's backfill rate (exit 0: complete,
    and a run verified against the open index)."""
    document = operator.run(
        "open-index",
        "backfill",
        "--max-writes-per-second",
        f"{config.backfill_rate:g}",
        "--segments",
        str(config.backfill_segments),
        *extra,
        "--json",
    ).json()
    verb = "would stamp" if document["dryRun"] else "stamped"
    operator.stages.note(
        f"open-index backfill{' (dry run)' if document['dryRun'] else ''}: scanned "
        f"{document['scanned']}, {verb} {document['stamped']}, removed {document['removed']}, "
        f"changed by a writer meanwhile {document['changed']}"
    )
    return document


def _set_open(operator: OperatorCli) -> dict[str, Any]:
    """`open-index set open --wait` (a 'not yet', the settled switch, is waited out by --wait
    itself); its checks are noted."""
    document = operator.run(
        "open-index",
        "set",
        "open",
        "--reason",
        REASON_OPEN,
        "--recheck-delay",
        "0",
        "--wait",
        "--json",
    ).json()
    for check in document["checks"]:
        operator.stages.note(f"check {check['name']}: {'passed' if check['passed'] else 'FAILED'}")
    operator.stages.note(
        f"version {document['version']}: enumerations read {document['routing']['enumerations']}"
        f" ({len(document['routing']['openIndexKeys'])} keys)"
    )
    return document


def _traffic_json(stats: list[ReplayStats]) -> dict[str, Any]:
    return {
        "ticks": len(stats),
        "writes": sum(s.writes for s in stats),
        "enumerations": sum(s.enumerations for s in stats),
        "byPersonReads": sum(s.by_person_reads for s in stats),
        "cohortWalker": "held (the open set keeps its size)",
    }


def sweep_line(when: str, cost: SweepCost) -> str:
    indexes = ", ".join(f"{name} {rcu:,.1f}" for name, rcu in cost.rcu_by_index.items())
    return (
        f"sweeps {when} ({cost.routing}): {cost.enumerations} enumerations, "
        f"{cost.rcu_per_enumeration:,.1f} RCU each ({indexes} RCU in all), "
        f"{cost.requests / cost.enumerations:g} requests each, {cost.open_sagas} open sagas"
    )
