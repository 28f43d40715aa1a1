"""A local server for one benchmark, and tables on it created from the synthesised template."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from devkit.capacity.table_schema import TableSchema
from devkit.dynalite import DynaliteServer
from devkit.local_env import local_credentials
from devkit.schema import create_table, load_template
from devkit.seed import Dataset, seed_table
from saga_index.dynamo.client import make_client

_tables = itertools.count()


@contextmanager
def local_server() -> Iterator[str]:
    """A dynalite process for one benchmark; stopped on exit, Ctrl-C included. Benchmarks only
    talk to the server they start: dummy credentials, no AWS endpoint."""
    # Expected warnings (the seeded anomalies, skipped rows) would drown the tables; the
    # tables report their counts.
    logging.getLogger("saga_index").setLevel(logging.ERROR)
    with local_credentials():
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
