"""The figures benchmarks report: a layout's hot-key load, medians and percentiles."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from devkit.capacity.ledger import LoadSummary


def load_row(summary: LoadSummary) -> dict[str, Any]:
    """The hot-key figures of one layout (shares as fractions of 1)."""
    return {
        "partitionKeys": len(summary.partitions),
        "hottestKey": summary.hottest.partition_key if summary.hottest else None,
        "hottestKeyShare": round(summary.hottest_key_share, 4),
        "peakRcuPerKey": round(summary.peak_rcu_per_key, 2),
        "peakWcuPerKey": round(summary.peak_wcu_per_key, 2),
        "headroom": None if summary.headroom is None else round(summary.headroom, 3),
        "totalRcu": round(summary.total_rcu, 1),
        "totalWcu": round(summary.total_wcu, 1),
    }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return float(ordered[index])
