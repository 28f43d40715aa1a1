"""The load of a metered run: capacity units per (target, partition key, second), summarised."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from devkit.capacity.pricing import Charge
from devkit.capacity.units import PARTITION_RCU_CEILING, PARTITION_WCU_CEILING


@dataclass(frozen=True)
class PartitionLoad:
    """One partition key's load over a metered run."""

    target: str
    partition_key: str
    total_rcu: float
    total_wcu: float
    peak_rcu: float
    peak_wcu: float
    peak_rcu_second: int | None
    peak_wcu_second: int | None
    requests: int

    @property
    def total_units(self) -> float:
        return self.total_rcu + self.total_wcu

    def to_json(self) -> dict[str, Any]:
        return {
            "partitionKey": self.partition_key,
            "totalRcu": round(self.total_rcu, 3),
            "totalWcu": round(self.total_wcu, 3),
            "peakRcu": round(self.peak_rcu, 3),
            "peakWcu": round(self.peak_wcu, 3),
            "peakRcuSecond": self.peak_rcu_second,
            "peakWcuSecond": self.peak_wcu_second,
            "requests": self.requests,
        }


@dataclass(frozen=True)
class LoadSummary:
    """The load of one table or index over a metered run, and how close it came to the ceiling.

    hottest_key_share: the hottest key's share of all capacity units (RCU + WCU) the target
    consumed, a fraction of 1. peak_rcu_per_key / peak_wcu_per_key: the highest per-second
    load any single partition key took. headroom: how many times the traffic could grow before
    that key reaches 3,000 RCU/s or 1,000 WCU/s, whichever comes first.
    """

    target: str
    partitions: tuple[PartitionLoad, ...]
    seconds: int

    @property
    def total_rcu(self) -> float:
        return sum(p.total_rcu for p in self.partitions)

    @property
    def total_wcu(self) -> float:
        return sum(p.total_wcu for p in self.partitions)

    @property
    def hottest(self) -> PartitionLoad | None:
        return max(self.partitions, key=lambda p: (p.total_units, p.partition_key), default=None)

    @property
    def hottest_key_share(self) -> float:
        total = self.total_rcu + self.total_wcu
        hottest = self.hottest
        return hottest.total_units / total if hottest and total else 0.0

    @property
    def hottest_read_share(self) -> float:
        total = self.total_rcu
        return max((p.total_rcu for p in self.partitions), default=0.0) / total if total else 0.0

    @property
    def hottest_write_share(self) -> float:
        total = self.total_wcu
        return max((p.total_wcu for p in self.partitions), default=0.0) / total if total else 0.0

    @property
    def peak_rcu_per_key(self) -> float:
        return max((p.peak_rcu for p in self.partitions), default=0.0)

    @property
    def peak_wcu_per_key(self) -> float:
        return max((p.peak_wcu for p in self.partitions), default=0.0)

    @property
    def read_headroom(self) -> float | None:
        peak = self.peak_rcu_per_key
        return PARTITION_RCU_CEILING / peak if peak else None

    @property
    def write_headroom(self) -> float | None:
        peak = self.peak_wcu_per_key
        return PARTITION_WCU_CEILING / peak if peak else None

    @property
    def headroom(self) -> float | None:
        candidates = [h for h in (self.read_headroom, self.write_headroom) if h is not None]
        return min(candidates) if candidates else None

    def to_json(self) -> dict[str, Any]:
        hottest = self.hottest
        return {
            "target": self.target,
            "hottestKey": hottest.partition_key if hottest else None,
            "hottestKeyShare": round(self.hottest_key_share, 6),
            "hottestKeyReadShare": round(self.hottest_read_share, 6),
            "hottestKeyWriteShare": round(self.hottest_write_share, 6),
            "peakRcuPerKey": round(self.peak_rcu_per_key, 3),
            "peakWcuPerKey": round(self.peak_wcu_per_key, 3),
            "readHeadroom": _round_or_none(self.read_headroom),
            "writeHeadroom": _round_or_none(self.write_headroom),
            "headroom": _round_or_none(self.headroom),
            "totalRcu": round(self.total_rcu, 3),
            "totalWcu": round(self.total_wcu, 3),
            "partitionKeys": len(self.partitions),
            "seconds": self.seconds,
            "partitions": [p.to_json() for p in self.partitions],
        }


def _round_or_none(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


class LoadLedger:
    """Capacity units per (target, partition key, second). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._units: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(dict)
        self._requests: dict[tuple[str, str], int] = defaultdict(int)
        self._seconds: set[int] = set()

    def add(self, second: int, charges: Iterable[Charge]) -> None:
        with self._lock:
            self._seconds.add(second)
            for charge in charges:
                key = (charge.target, charge.partition_key)
                cell = self._units[key].setdefault(second, [0.0, 0.0])
                cell[0] += charge.rcu
                cell[1] += charge.wcu
                self._requests[key] += 1

    def targets(self) -> list[str]:
        with self._lock:
            return sorted({target for target, _ in self._units})

    def series(self, target: str) -> dict[str, dict[int, tuple[float, float]]]:
        """partition key -> second -> (RCU, WCU) for one target."""
        with self._lock:
            return {
                key: {second: (cell[0], cell[1]) for second, cell in seconds.items()}
                for (t, key), seconds in self._units.items()
                if t == target
            }

    def summary(self, target: str) -> LoadSummary:
        with self._lock:
            partitions = []
            for (t, key), seconds in self._units.items():
                if t != target:
                    continue
                peak_rcu_second = max(seconds, key=lambda s: (seconds[s][0], -s))
                peak_wcu_second = max(seconds, key=lambda s: (seconds[s][1], -s))
                peak_rcu = seconds[peak_rcu_second][0]
                peak_wcu = seconds[peak_wcu_second][1]
                partitions.append(
                    PartitionLoad(
                        target=target,
                        partition_key=key,
                        total_rcu=sum(cell[0] for cell in seconds.values()),
                        total_wcu=sum(cell[1] for cell in seconds.values()),
                        peak_rcu=peak_rcu,
                        peak_wcu=peak_wcu,
                        peak_rcu_second=peak_rcu_second if peak_rcu else None,
                        peak_wcu_second=peak_wcu_second if peak_wcu else None,
                        requests=self._requests[(t, key)],
                    )
                )
            partitions.sort(key=lambda p: (-p.total_units, p.partition_key))
            return LoadSummary(
                target=target, partitions=tuple(partitions), seconds=len(self._seconds)
            )
