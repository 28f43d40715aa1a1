"""What the load benchmarks share: a local server, tables built from the template, result files.

Every figure a benchmark prints is measured in the same run, side by side; the JSON it writes to
results/bench/ carries the raw numbers and the parameters that produced them.
"""

from __future__ import annotations

import itertools
import logging
import os
import statistics
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devkit.capacity import LoadSummary, TableSchema
from devkit.dynalite import REPO_ROOT, DynaliteServer
from devkit.report import markdown_table, write_json
from devkit.schema import create_table, load_template
from devkit.seed import Dataset, seed_table
from saga_index.dynamo import make_client

RESULTS = REPO_ROOT / "results" / "bench"
_tables = itertools.count()


def use_local_credentials() -> None:
    """Benchmarks only talk to the server they start: dummy credentials, no AWS endpoint."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.pop("AWS_ENDPOINT_URL_DYNAMODB", None)
    os.environ.update(
        AWS_ACCESS_KEY_ID="local",
        AWS_SECRET_ACCESS_KEY="local",  # noqa: S106 - a local server accepts any credentials
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
    )


@contextmanager
def local_server() -> Iterator[str]:
    """A dynalite process for one benchmark; stopped on exit, Ctrl-C included."""
    use_local_credentials()
    # Expected warnings (the seeded anomalies, skipped rows) would drown the tables; the
    # tables report their counts.
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


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:,.{digits}f}{suffix}"


def emit(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print one benchmark's table on stdout."""
    sys.stdout.write(f"\n{title}\n\n{markdown_table(headers, rows)}\n\n")
    sys.stdout.flush()


def save(name: str, document: dict[str, Any], directory: Path | None = None) -> Path:
    path = write_json(document, (directory or RESULTS) / f"{name}.json")
    sys.stderr.write(f"bench: wrote {path}\n")
    return path


def progress(message: str) -> None:
    sys.stderr.write(f"bench: {message}\n")
    sys.stderr.flush()
