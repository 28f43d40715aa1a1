"""One drift-guard run, metered: the index reads the scheduled guard makes every 5 minutes (each
key paced to at most 300 read units in any second: saga_index.store.dynamo.key_pace), priced by
the capacity meter on the pacer's own clock.

The pacer's waits advance a virtual clock instead of sleeping, so the run costs the demo only its
requests, and the meter attributes each request to the virtual second the pacer sent it in: the
per-key peak it reports is the paced one. The keys are read one after another on that one clock
(a virtual timeline has no parallel workers); `paced_seconds` is what the guard's 16 workers
take, computed from the per-key units (KeyReadPace.seconds_for_keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from saga_index.index import INDEX_NAME
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import Phase, Routing
from saga_index.store.dynamo import make_client

GUARD_WORKERS = 16  # the scheduled guard's DriftChecker reads this many keys at once


class _PacedClock:
    """A clock the pacer's waits advance (the meter reads whole seconds of it)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class DriftRunLoad:
    """What one drift run read from the index: its units, per key, and at its pace."""

    rcu: float
    largest_key_rcu: float
    peak_rcu_per_key: float  # the most any key took in one (virtual) second
    units_per_key: float  # the pace's ceiling per key per second
    paced_seconds: float  # the run at its pace, 16 keys at a time
    requests: int
    healthy: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "rcu": round(self.rcu, 1),
            "largestKeyRcu": round(self.largest_key_rcu, 1),
            "peakRcuPerKey": round(self.peak_rcu_per_key, 1),
            "unitsPerKey": self.units_per_key,
            "pacedSeconds": round(self.paced_seconds, 2),
            "requests": self.requests,
            "healthy": self.healthy,
        }


def metered_drift_run(
    endpoint_url: str,
    table_name: str,
    schema: TableSchema,
    *,
    phase: Phase | str,
    shard_count: int,
) -> DriftRunLoad:
    """One drift run's index reads (no base-table scan: that runs once an hour) judged as a
    reader in `phase` with `shard_count`, metered."""
    clock = _PacedClock()
    meter = CapacityMeter(schema, reader=make_client(endpoint_url=endpoint_url), clock=clock)
    client = meter.attach(make_client(endpoint_url=endpoint_url))
    checker = DriftChecker(
        client,
        table_name,
        routing=Routing.for_phase(phase, shard_count),
        max_workers=1,
        clock=clock,
        sleep=clock.sleep,
    )
    report = checker.check(scan_unindexed=False)
    summary = meter.summary(INDEX_NAME)
    per_key = sorted((p.total_rcu for p in summary.partitions), reverse=True)
    pace = checker.index_pace
    return DriftRunLoad(
        rcu=summary.total_rcu,
        largest_key_rcu=per_key[0] if per_key else 0.0,
        peak_rcu_per_key=summary.peak_rcu_per_key,
        units_per_key=pace.units_per_key,
        paced_seconds=pace.seconds_for_keys(per_key, workers=GUARD_WORKERS) if per_key else 0.0,
        requests=meter.requests,
        healthy=report.healthy,
    )
