"""Memory does not grow with the table: the read-back and the drift check
hold one page at a time (plus bounded samples), on fake clients that serve any number of pages.

The bound is structural: the peak traced allocation for 10x the pages stays within a small
margin of the peak for 1x, so nothing proportional to the rows read is kept. The drift check
reads its keys one at a time (one worker) on a clock that only its own sleeps move: with a
worker per key, how many pages were held at once depended on how a loaded machine scheduled
the readers' threads, differently in the two runs compared.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

from saga_index.index import keys
from saga_index.index.shard import shard
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.readback import verify_source_drained
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.checks.drift._report import SAMPLE_LIMIT
from saga_index.store.dynamo.key_pace import KeyReadPace
from saga_index.store.dynamo.scan import ScanOptions

ROWS_PER_PAGE = 40
N = 4
# person ids by the shard they route to under N = 4
PEOPLE: dict[int, list[str]] = {n: [] for n in range(N)}
for _i in range(400):
    _person = f"p-{_i}"
    PEOPLE[shard(_person, N)].append(_person)


def saga_row(n: int, person: str, gsi4pk: str | None, *, sort_key: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {
        "PK": {"S": f"RSAGA#s{n:08}"},
        "SK": {"S": "META"},
        "entityType": {"S": keys.ENTITY_TYPE},
        "sagaId": {"S": f"s{n:08}"},
        "personId": {"S": person},
        "state": {"S": "OPENED"},
        # what a full row carries besides: a projection leaves it out
        "payload": {"S": "x" * 200},
    }
    if gsi4pk is not None:
        row["GSI4PK"] = {"S": gsi4pk}
    if sort_key:
        row["GSI4SK"] = {"S": f"{person}#2026-01-01T00:00:00.000Z"}
    return row


def paged(pages: int, make_page: Callable[[int], list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    for number in range(pages):
        page: dict[str, Any] = {"Items": make_page(number), "Count": ROWS_PER_PAGE}
        if number + 1 < pages:
            page["LastEvaluatedKey"] = {"PK": {"S": f"page-{number}"}, "SK": {"S": "META"}}
        yield page


class Paginator:
    def __init__(self, serve: Callable[[dict[str, Any]], Iterator[dict[str, Any]]]) -> None:
        self.serve = serve

    def paginate(self, **request: Any) -> Iterator[dict[str, Any]]:
        return self.serve(request)


class ManyPagesClient:
    """Serves `pages` pages of `ROWS_PER_PAGE` rows per partition (and per scan segment),
    building each page on demand: the fake itself holds nothing."""

    def __init__(self, pages: int, *, shards_empty: bool = False) -> None:
        self.pages = pages
        # The read-back of a forward move reads the target's keys too (misrouted rows): with
        # this, only the legacy key has rows, so every row it counts is a legacy one.
        self.shards_empty = shards_empty
        self.requests: list[dict[str, Any]] = []
        self._scan_pages: Iterator[dict[str, Any]] | None = None
        self._query_pages: dict[str, Iterator[dict[str, Any]]] = {}

    # ---- the index ----

    def get_paginator(self, operation: str) -> Paginator:
        assert operation == "query"
        return Paginator(self._query)

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        self.requests.append({k: v for k, v in request.items() if k != "ExclusiveStartKey"})
        partition = request["ExpressionAttributeValues"][":pk"]["S"]
        if partition == keys.LEGACY_GSI4PK:
            # legacy sagas, each to move (the verifier's forward read-back)
            return paged(self.pages, lambda p: self._legacy_page(p))
        number = keys.parse_gsi4pk(partition)
        assert number is not None
        if number >= N or self.shards_empty:
            # the keys above N the drift check probes: empty
            return iter([{"Items": [], "Count": 0}])
        return paged(self.pages, lambda p: self._shard_page(number, p))

    def query(self, **request: Any) -> dict[str, Any]:
        # Page by page (the paced reads send each request themselves): a request without
        # ExclusiveStartKey starts the partition's pages again, one with it takes the next.
        self.requests.append(request)
        partition = request["ExpressionAttributeValues"][":pk"]["S"]
        if "ExclusiveStartKey" not in request:
            self._query_pages[partition] = iter(self._query(request))
        return next(self._query_pages[partition])

    def _legacy_page(self, page: int) -> list[dict[str, Any]]:
        base = page * ROWS_PER_PAGE
        return [
            saga_row(base + n, PEOPLE[n % N][n % 20], keys.LEGACY_GSI4PK)
            for n in range(ROWS_PER_PAGE)
        ]

    def _shard_page(self, number: int, page: int) -> list[dict[str, Any]]:
        base = (number * self.pages + page) * ROWS_PER_PAGE
        rows = []
        for n in range(ROWS_PER_PAGE):
            # the last row of each page is misrouted: someone of the next shard
            owner = number if n else (number + 1) % N
            rows.append(saga_row(base + n, PEOPLE[owner][n % 20], keys.sharded_gsi4pk(number)))
        return rows

    def get_item(self, **request: Any) -> dict[str, Any]:
        # the base table says every row the index still shows on legacy has moved since
        moved_to = keys.shard_gsi4pk_for_person("p", 16)  # its key under the move's target
        return {"Item": {"GSI4PK": {"S": moved_to}, "personId": {"S": "p"}}}

    # ---- the base table ----

    def scan(self, **request: Any) -> dict[str, Any]:
        self.requests.append({k: v for k, v in request.items() if k != "ExclusiveStartKey"})
        if "ExclusiveStartKey" not in request:
            self._scan_pages = paged(self.pages, self._scan_page)
        assert self._scan_pages is not None
        page = next(self._scan_pages)
        page["ConsumedCapacity"] = {"CapacityUnits": 1.0}
        return page

    def _scan_page(self, page: int) -> list[dict[str, Any]]:
        base = page * ROWS_PER_PAGE
        rows = [
            saga_row(base + n, PEOPLE[0][n % 20], keys.sharded_gsi4pk(0))
            for n in range(1, ROWS_PER_PAGE)
        ]
        # one unindexed row per page: a finding with more rows than its sample
        rows.append(saga_row(base, "p-0", None))
        return rows


def peak_bytes(run: Callable[[], object]) -> int:
    """The peak traced allocation of `run()`, after a first untraced run (what any first call
    builds once, caches and lazy imports, is not the rows' memory) and a collection."""
    run()
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def verify(client: ManyPagesClient) -> object:
    move = Move.between_legacy_and("forward", 16)
    result = verify_source_drained(client, "t", index_name="GSI4", move=move)
    assert result.remaining == client.pages * ROWS_PER_PAGE
    assert result.unexpected == 0
    return result


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def drift(client: ManyPagesClient) -> object:
    clock = FakeClock()
    checker = DriftChecker(
        client,  # type: ignore[arg-type]
        "t",
        phase="sharded",
        shard_count=N,
        scan_options=ScanOptions(segments=1, read_units_per_second=1e9),
        # The fake reports no ConsumedCapacity, so each page is charged a whole page's
        # reservation: a 1-unit page keeps its hundreds of pages from waiting.
        index_pace=KeyReadPace(units_per_key=3000, page_units=1),
        max_workers=1,
        clock=clock,
        sleep=clock.sleep,
    )
    report = checker.check(scan_unindexed=True)
    rows = client.pages * ROWS_PER_PAGE
    assert report.sharded_rows == N * rows
    assert report.misrouted_rows == N * client.pages
    assert len(report.misrouted) == min(SAMPLE_LIMIT, N * client.pages)
    assert report.unindexed_rows == client.pages
    assert len(report.unindexed) == min(SAMPLE_LIMIT, client.pages)
    assert report.scanned_saga_rows == rows
    return report


def test_the_read_back_holds_one_page_whatever_the_number_of_pages() -> None:
    small = peak_bytes(lambda: verify(ManyPagesClient(pages=5, shards_empty=True)))
    large = peak_bytes(lambda: verify(ManyPagesClient(pages=50, shards_empty=True)))
    # 10x the rows; a read-back that kept them would need about 10x the memory
    assert large < small * 1.5 + 200_000, (small, large)


def test_the_drift_check_holds_a_page_per_reader_plus_its_samples() -> None:
    small = peak_bytes(lambda: drift(ManyPagesClient(pages=5)))
    large = peak_bytes(lambda: drift(ManyPagesClient(pages=50)))
    assert large < small * 1.5 + 200_000, (small, large)


def test_the_drift_check_projects_its_reads_and_counts_where_a_count_is_enough() -> None:
    client = ManyPagesClient(pages=2)
    drift(client)
    for request in client.requests:
        if request.get("Select") == "COUNT":
            continue
        projected = set(request["ExpressionAttributeNames"].values())
        assert "ProjectionExpression" in request, request
        unread = {"payload", "entityType"}
        if "KeyConditionExpression" in request:
            # An index Query needs a saga's keys and person only; the table's Scan reads
            # `state` too: the open index's rule judges which sagas are open.
            unread.add("state")
        assert not projected & unread, projected
    assert any(r.get("Select") == "COUNT" for r in client.requests)
