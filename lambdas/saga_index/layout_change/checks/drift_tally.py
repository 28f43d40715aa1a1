"""What a drift run keeps of the rows it reads: exact counts, and at most SAMPLE_LIMIT named rows
per finding, so its memory does not grow with the table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from saga_index.layout_change.checks.drift_report import SAMPLE_LIMIT, RowRef
from saga_index.layout_change.checks.expectations import Verdict

# The wrong-now verdicts whose rows a report names.
NAMED_VERDICTS = (Verdict.MISROUTED, Verdict.UNEXPECTED_LEGACY, Verdict.UNEXPECTED_SHARDED)


class ReadTally:
    """One read's exact counts by verdict, and at most SAMPLE_LIMIT named rows per finding."""

    def __init__(self) -> None:
        self.rows = 0
        self.requests = 0
        self.counts: Counter[Verdict] = Counter()
        self.samples: dict[Verdict, list[RowRef]] = {verdict: [] for verdict in NAMED_VERDICTS}

    def merge(self, other: ReadTally) -> None:
        self.requests += other.requests
        self.counts.update(other.counts)
        for verdict, refs in other.samples.items():
            sample = self.samples[verdict]
            sample.extend(refs[: max(0, SAMPLE_LIMIT - len(sample))])


class ScanFinding:
    """A scan finding: its exact count and its first rows by table key (at most SAMPLE_LIMIT,
    so the sample does not depend on the order the segments arrive in)."""

    def __init__(self) -> None:
        self.count = 0
        self._rows: list[RowRef] = []

    def add(self, item: Mapping[str, Any]) -> None:
        self.count += 1
        self._rows.append(RowRef.of(item))
        if len(self._rows) >= 2 * SAMPLE_LIMIT:  # amortised: at most 2 x SAMPLE_LIMIT held
            self._trim()

    def sample(self) -> tuple[RowRef, ...]:
        self._trim()
        return tuple(self._rows)

    def _trim(self) -> None:
        self._rows.sort(key=lambda ref: (ref.pk, ref.sk))
        del self._rows[SAMPLE_LIMIT:]
