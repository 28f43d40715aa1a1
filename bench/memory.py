"""Peak memory of the drift check, the backfill's verifier and one worker invocation, at 1x,
10x and 100x the seed's saga rows, side by side in one run.

    python -m bench.memory [--scales 1,10,100]

Measured with tracemalloc (Python allocations, the part that grows with rows; the interpreter
and boto3 themselves are a constant ~70 MB in Lambda). The table is served by a fake client that
builds each page on demand and honours ProjectionExpression and Select=COUNT, not by dynalite: a
100x seed (168,100 rows) takes several minutes to load on two cores, and what is measured here
is what the code keeps between pages, which a server does not change. Rows are shaped like the
seed's (about 1 KB on the wire each); pages hold 1,000 rows (the drift scan's page size).

A flat or logarithmic peak means nothing proportional to the rows is kept. Until each reader's
partition or segment fills a page (1x holds less) the peak grows with it; past that it is about
two pages per concurrent reader. `ok` requires the last 10x step in rows to grow each peak by
less than MAX_STEP_RATIO.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import re
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench.output import emit, num, progress, save
from saga_index.index import INDEX_NAME, keys, shard
from saga_index.layout_change.backfill import (
    BackfillRequest,
    Move,
    RunTicket,
    TokenBucket,
    run_segment,
    verify_source_drained,
)
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import BackfillDirection
from saga_index.store.dynamo import ScanOptions

NAME = "memory"
# Every check at two sizes; no reader fills a page at this size, so the peaks mean nothing.
TINY: dict[str, Any] = {"scales": (1, 2), "rows_at_1x": 200}
ROWS_AT_1X = 1681  # the seed's saga rows (SeedSpec()): 100x is the 168,100
PAGE_ROWS = 1000
SHARDS = 16
SEGMENTS = 4
PEOPLE = 1200
# 10x the rows per step: a peak proportional to rows grows 10x. The first step may grow up to a
# full page per reader (at 1x a shard or segment holds less than a page), so only the last step
# is judged.
MAX_STEP_RATIO = 3.0
_PROJECTED = re.compile(r"#\w+")


def _people_by_shard() -> dict[int, list[str]]:
    people: dict[int, list[str]] = {n: [] for n in range(SHARDS)}
    for n in range(PEOPLE):
        people[shard(f"person-{n:05}", SHARDS)].append(f"person-{n:05}")
    return people


class SyntheticTable:
    """`rows` saga rows, all on their shard keys (the drift check's and a rollback's view) or
    all on the legacy key (the verifier's dry run and the forward worker), served page by page."""

    def __init__(self, rows: int, *, on_legacy: bool) -> None:
        self.rows = rows
        self.on_legacy = on_legacy
        self.people = _people_by_shard()
        self._scans: dict[int, Iterator[dict[str, Any]]] = {}
        self._queries: dict[str, Iterator[dict[str, Any]]] = {}

    def _row(self, n: int, number: int) -> dict[str, Any]:
        people = self.people[number]
        person = people[n % len(people)]
        gsi4pk = keys.LEGACY_GSI4PK if self.on_legacy else keys.sharded_gsi4pk(number)
        return {
            "PK": {"S": f"RSAGA#saga-{n:07}"},
            "SK": {"S": "META"},
            "entityType": {"S": keys.ENTITY_TYPE},
            "sagaId": {"S": f"saga-{n:07}"},
            "personId": {"S": person},
            "leaseId": {"S": f"lease-{n:07}"},
            "state": {"S": "OPENED"},
            "openedAt": {"S": "2026-01-01T00:00:00.000Z"},
            "updatedAt": {"S": "2026-01-02T00:00:00.000Z"},
            "attempts": {"N": "1"},
            "history": {"L": [{"M": {"state": {"S": "OPENED"}, "at": {"S": "2026-01-01"}}}] * 8},
            "notes": {"S": "n" * 400},
            "GSI4PK": {"S": gsi4pk},
            "GSI4SK": {"S": f"{person}#2026-01-01T00:00:00.000Z"},
        }

    def _pages(
        self, numbers: range, request: dict[str, Any], count_only: bool
    ) -> Iterator[dict[str, Any]]:
        names = request.get("ExpressionAttributeNames", {})
        projection = request.get("ProjectionExpression")
        keep = None if projection is None else {names[a] for a in _PROJECTED.findall(projection)}
        size = min(PAGE_ROWS, request.get("Limit") or PAGE_ROWS)
        # An empty partition still answers with one page (Count 0, no Items), as DynamoDB does:
        # the drift check probes shard keys past the table's shard count and reads that page.
        for start in range(0, max(len(numbers), 1), size):
            chunk = numbers[start : start + size]  # a range: no row exists before its page
            page: dict[str, Any] = {"Count": len(chunk), "ScannedCount": len(chunk)}
            if not count_only:
                built = (self._row(n, n % SHARDS) for n in chunk)
                page["Items"] = [
                    item if keep is None else {k: v for k, v in item.items() if k in keep}
                    for item in built
                ]
            if start + size < len(numbers):
                page["LastEvaluatedKey"] = {"PK": {"S": f"p{start}"}, "SK": {"S": "META"}}
            yield page

    def get_paginator(self, operation: str) -> Any:
        table = self

        class _Paginator:
            def paginate(self, **request: Any) -> Iterator[dict[str, Any]]:
                return table._query(request)

        return _Paginator()

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        partition = request["ExpressionAttributeValues"][":pk"]["S"]
        if partition == keys.LEGACY_GSI4PK:
            numbers = range(self.rows) if self.on_legacy else range(0)
        else:
            wanted = keys.parse_gsi4pk(partition)
            on_it = not self.on_legacy and wanted is not None and wanted < SHARDS
            numbers = range(wanted or 0, self.rows, SHARDS) if on_it else range(0)
        return self._pages(numbers, request, request.get("Select") == "COUNT")

    def query(self, **request: Any) -> dict[str, Any]:
        # Page by page (the drift check's paced reads send each request themselves): a request
        # without ExclusiveStartKey starts the partition's pages, one with it takes the next.
        partition = request["ExpressionAttributeValues"][":pk"]["S"]
        if "ExclusiveStartKey" not in request:
            self._queries[partition] = self._query(request)
        # An empty partition still answers one empty page.
        page = next(self._queries[partition], {"Count": 0, "ScannedCount": 0, "Items": []})
        page["ConsumedCapacity"] = {"CapacityUnits": 1.0}
        return page

    def scan(self, **request: Any) -> dict[str, Any]:
        segment, total = request["Segment"], request["TotalSegments"]
        if "ExclusiveStartKey" not in request:
            self._scans[segment] = self._pages(range(segment, self.rows, total), request, False)
        page = next(self._scans[segment])
        page["ConsumedCapacity"] = {"CapacityUnits": 1.0}
        return page

    def update_item(self, **_: Any) -> dict[str, Any]:
        return {}

    def get_item(self, **_: Any) -> dict[str, Any]:
        return {}


def _peak(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _drift(rows: int) -> object:
    checker = DriftChecker(
        SyntheticTable(rows, on_legacy=False),  # type: ignore[arg-type]
        "bench",
        phase="sharded",
        shard_count=SHARDS,
        scan_options=ScanOptions(read_units_per_second=1e9),
    )
    report = checker.check(scan_unindexed=True)
    if report.sharded_rows != rows or report.scanned_saga_rows != rows:
        raise RuntimeError(f"drift check miscounted {rows} rows: {report.to_dict()}")
    return report


def _verify(rows: int) -> object:
    # A dry run's read-back: every row is still on the source (legacy) key and is read.
    move = Move.between_legacy_and(BackfillDirection.FORWARD, SHARDS)
    table = SyntheticTable(rows, on_legacy=True)
    result = verify_source_drained(table, "bench", index_name=INDEX_NAME, move=move, dry_run=True)
    if result.remaining != rows:
        raise RuntimeError(f"verifier read {result.remaining} of {rows} rows")
    return result


def _worker(rows: int) -> object:
    # One invocation with no deadline: it re-stamps its whole segment (a quarter of the rows).
    move = Move.between_legacy_and(BackfillDirection.FORWARD, SHARDS)
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=SEGMENTS,
        max_writes_per_second=1000.0,
        dry_run=False,
    ).segment_requests(RunTicket.unleased(move))[0]
    table = SyntheticTable(rows, on_legacy=True)
    result = run_segment(table, "bench", request, bucket=TokenBucket(1e12), page_size=PAGE_ROWS)
    if not result.done or result.restamped != len(range(0, rows, SEGMENTS)):
        raise RuntimeError(f"worker did not re-stamp its segment of {rows} rows: {result}")
    return result


CHECKS: dict[str, Callable[[int], object]] = {
    "drift check (index + scan)": _drift,
    "verifier (dry-run read-back)": _verify,
    "worker invocation (1 segment of 4)": _worker,
}


def run(*, scales: Sequence[int] = (1, 10, 100), rows_at_1x: int = ROWS_AT_1X) -> dict[str, Any]:
    out: dict[str, Any] = {"rowsAt1x": rows_at_1x, "scales": list(scales), "checks": {}}
    ok = True
    for name, check in CHECKS.items():
        peaks: dict[str, int] = {}
        for scale in scales:
            rows = rows_at_1x * scale
            progress(f"memory: {name}: {scale}x ({rows:,} rows)")
            peaks[str(scale)] = _peak(functools.partial(check, rows))
        # Each step's growth: rows grow 10x per step, so a linear peak would grow 10x too.
        ratios = {
            f"{bigger}x/{smaller}x": peaks[str(bigger)] / peaks[str(smaller)]
            for smaller, bigger in itertools.pairwise(scales)
        }
        out["checks"][name] = {"peakBytes": peaks, "ratios": ratios}
        # Judged on the last step: past a page per reader, more rows must not mean more memory.
        ok = ok and (not ratios or list(ratios.values())[-1] < MAX_STEP_RATIO)
    out["maxStepRatio"] = MAX_STEP_RATIO
    out["ok"] = ok
    return out


def render(result: dict[str, Any]) -> None:
    scales = result["scales"]
    steps = list(next(iter(result["checks"].values()))["ratios"]) if result["checks"] else []
    headers = ["", *[f"{s}x ({s * result['rowsAt1x']:,} rows)" for s in scales], *steps]
    rows = [
        [
            name,
            *[num(check["peakBytes"][str(s)] / 2**20, 2, " MiB") for s in scales],
            *[num(check["ratios"][step], 2, "x") for step in steps],
        ]
        for name, check in result["checks"].items()
    ]
    emit("peak traced memory (tracemalloc) by rows", headers, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1,10,100")
    args = parser.parse_args(argv)
    result = run(scales=[int(s) for s in args.scales.split(",")])
    render(result)
    save(NAME, result)


if __name__ == "__main__":
    main()
