"""The write caps a run actually ran at: each segment's sequence (what its lease keeper applied,
in the run's total units), carried from invocation to invocation within the payload budget, and
the run's sequence merged from its segments' for the report.

Every segment follows the same control record, so each one's sequence is the record's history
(its throttles, their clearing, the fence's limit) as that segment saw it at its heartbeats: a
segment that ended before a change never saw it, one that started after it never saw what came
before. The run's sequence is the shortest one in which every segment's sequence appears in
order (a shortest common supersequence): it holds each cap some segment applied, in the order
the segments applied them, and repeats a value only where some segment went back to it.

Pure arithmetic over lists of floats, apart from the payloads (layout_change.backfill.wire) that
carry its results: the supersequence is an algorithm with its own exact tests, and the payloads
import it, not the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# The write caps a Lambda segment applied travel in its result (wire.SegmentResult) too, so
# the run's report can say what it ran at: at most MAX_APPLIED_CAPS per segment, and the
# whole run at most APPLIED_CAP_BUDGET across its segments (2 each at 1,000 segments: the
# first and the latest), each rounded to APPLIED_CAP_DECIMALS (a handful of bytes).
MAX_APPLIED_CAPS = 16
MIN_APPLIED_CAPS = 2
APPLIED_CAP_BUDGET = 2000
APPLIED_CAP_DECIMALS = 3


def applied_cap_limit(total_segments: int, budget: int | None = APPLIED_CAP_BUDGET) -> int:
    """How many caps one segment's result carries: its share of the run's budget, at least the
    first and the latest (None: no budget, as in a local run, whose results stay in memory)."""
    if budget is None:
        return MAX_APPLIED_CAPS
    return max(MIN_APPLIED_CAPS, min(MAX_APPLIED_CAPS, budget // total_segments))


def extend_caps(carried: Sequence[float], applied: Iterable[float], *, limit: int) -> list[float]:
    """A segment's sequence after one more invocation: `carried` (the earlier invocations'),
    then what this one applied, without repeating the cap an invocation started at when it is the
    one the previous ended at. Past `limit`, the first cap and the latest `limit - 1` are kept."""
    caps = list(carried)
    for cap in applied:
        value = round(cap, APPLIED_CAP_DECIMALS)
        if not caps or caps[-1] != value:
            caps.append(value)
    if len(caps) > limit:
        caps = caps[:1] + caps[len(caps) - (limit - 1) :]
    return caps


def merge_caps(sequences: Iterable[Sequence[float]]) -> list[float]:
    """The run's sequence from its segments' (the module docstring): a shortest common
    supersequence, folded one segment at a time."""
    merged: list[float] = []
    for sequence in sequences:
        merged = _shortest_supersequence(merged, list(sequence))
    return merged


def _shortest_supersequence(a: list[float], b: list[float]) -> list[float]:
    # The classic dynamic programme: lcs[i][j] is the longest common subsequence of a[i:], b[j:].
    # Both are short (a segment carries at most MAX_APPLIED_CAPS; the merge grows only where
    # segments disagree), so the table is small.
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            lcs[i][j] = lcs[i + 1][j + 1] + 1 if a[i] == b[j] else max(lcs[i + 1][j], lcs[i][j + 1])
    merged: list[float] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            merged.append(a[i])
            i, j = i + 1, j + 1
        elif lcs[i + 1][j] >= lcs[i][j + 1]:
            merged.append(a[i])
            i += 1
        else:
            merged.append(b[j])
            j += 1
    return merged + a[i:] + b[j:]
