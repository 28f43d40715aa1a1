"""A local server for one benchmark, tables on it created from the synthesised template, and a
backfill at the highest cap on one of them."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from devkit.capacity.table_schema import TableSchema
from devkit.dynalite import DynaliteServer
from devkit.local_env import local_credentials
from devkit.schema import create_table, load_template
from devkit.seed import Dataset, seed_table
from saga_index.index import INDEX_NAME, MAX_WRITES_PER_SECOND
from saga_index.layout_change.backfill import (
    BackfillRequest,
    BackfillSummary,
    Move,
    RunTicket,
    finish_backfill,
    run_backfill,
)
from saga_index.layout_change.record import BackfillDirection
from saga_index.store.dynamo import make_client

_tables = itertools.count()


@contextmanager
def local_server(endpoint_url: str | None = None) -> Iterator[str]:
    """A dynalite process for one benchmark; stopped on exit, Ctrl-C included. Benchmarks only
    talk to a local server: dummy credentials, no AWS endpoint. `endpoint_url`: a local server
    already running (the test session's), used as it is and left running."""
    with local_credentials():
        if endpoint_url is not None:
            yield endpoint_url
            return
        # Expected warnings (the seeded anomalies, skipped rows) would drown the tables; the
        # tables report their counts. Not when given a server: a test session keeps its
        # logging as it is.
        logging.getLogger("saga_index").setLevel(logging.ERROR)
        server = DynaliteServer()
        try:
            server.start()
            yield server.endpoint_url
        finally:
            server.stop()


class Tables:
    """Tables on one server, created from the synthesised template."""

    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url
        self.template = load_template()
        self.client = make_client(endpoint_url=endpoint_url)

    def create(self, prefix: str) -> tuple[str, TableSchema]:
        name = f"{prefix}-{next(_tables)}"
        create_table(self.client, name, self.template)
        return name, TableSchema.from_template(self.template, name)

    def seeded(
        self,
        prefix: str,
        dataset: Dataset,
        *,
        shard_count: int | None = None,
        include_other_entities: bool = True,
    ) -> tuple[str, TableSchema]:
        name, schema = self.create(prefix)
        seed_table(
            self.client,
            name,
            dataset,
            shard_count=shard_count,
            include_other_entities=include_other_entities,
        )
        return name, schema


@dataclass(frozen=True)
class TimedBackfill:
    summary: BackfillSummary
    backfill_seconds: float
    verify_seconds: float


def backfill_at_cap(
    client: Any, table: str, move: Move, *, segments: int, label: str
) -> TimedBackfill:
    """A forward backfill of `move` in `segments` segments at MAX_WRITES_PER_SECOND, then its
    readback, each timed. The bench owns its table: no control record, no lease. RuntimeError
    naming `label` when a segment failed."""
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=segments,
        max_writes_per_second=MAX_WRITES_PER_SECOND,
        dry_run=False,
    )
    started = time.monotonic()
    local = run_backfill(client, table, request, run=RunTicket.unleased(move))
    backfill_seconds = time.monotonic() - started
    if not local.complete:
        raise RuntimeError(f"{label} failed: {local.failures}")
    summary = finish_backfill(
        client,
        table,
        request,
        local.results,
        index_name=INDEX_NAME,
        move=move,
        throttles=local.throttles,
    )
    verify_seconds = time.monotonic() - started - backfill_seconds
    return TimedBackfill(summary, backfill_seconds, verify_seconds)
