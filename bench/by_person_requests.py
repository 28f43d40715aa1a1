"""Requests (and read units) per by-person read in each migration phase.

    python -m bench.by_person_requests [--shards 16] [--persons 200]

A table half-way through the backfill (every other saga row already on its shard, the rest still
on the legacy key) is read person by person through the repository in each phase. Requests are
counted twice: by the repository (ReadResult.requests) and by a botocore hook on the client
(every Query actually sent), and must agree; read units come from the capacity meter. The ADR
promises a by-person read costs the same after sharding (one single-partition Query); the
dual-read phases (migrating, rolling-back) pay two.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from bench.figures import median
from bench.output import emit, num, progress, save
from bench.server import Tables, local_server
from bench.tiny import TINY_SPEC
from devkit.capacity.meter import CapacityMeter
from devkit.seed import SeedSpec, build_dataset, saga_item, write_items
from saga_index.index import INDEX_NAME
from saga_index.layout_change.record import Phase, Routing
from saga_index.store import SagaRepository
from saga_index.store.dynamo import make_client

NAME = "by_person_requests"
TINY: dict[str, Any] = {"persons": 10, "spec": TINY_SPEC}


class QueryCounter:
    """Counts the Query requests a client really sends."""

    def __init__(self, client: Any) -> None:
        self.count = 0
        self._lock = threading.Lock()
        client.meta.events.register("after-call.dynamodb.Query", self._count)

    def _count(self, **_: Any) -> None:
        with self._lock:
            self.count += 1


def run(
    *,
    shards: int = 16,
    persons: int = 200,
    seed: int = 85,
    spec: SeedSpec | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    dataset = build_dataset(spec or SeedSpec())
    sample = random.Random(seed).sample(
        sorted({s.person_id for s in dataset.sagas if s.person_id}), persons
    )
    phases: dict[str, Any] = {}
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        table, schema = tables.create("by-person")
        # Half-way through a backfill: every other row already re-stamped.
        items = [
            saga_item(record, shards if n % 2 else None) for n, record in enumerate(dataset.sagas)
        ]
        write_items(tables.client, table, items)
        for phase in (Phase.LEGACY, Phase.MIGRATING, Phase.SHARDED, Phase.ROLLING_BACK):
            progress(f"by_person_requests: {persons} reads in phase {phase.value}")
            meter = CapacityMeter(schema, reader=make_client(endpoint_url=endpoint))
            client = meter.attach(make_client(endpoint_url=endpoint))
            counter = QueryCounter(client)
            repository = SagaRepository(
                client,
                table,
                plan=Routing.for_phase(phase, shards),
            )
            reported = []
            timings = []
            for person in sample:
                started = time.perf_counter()
                result = repository.get_sagas_by_person(person)
                timings.append((time.perf_counter() - started) * 1000)
                reported.append(result.requests)
            if counter.count != sum(reported):
                raise RuntimeError(
                    f"phase {phase.value}: the repository reported {sum(reported)} requests, "
                    f"the client sent {counter.count}"
                )
            rcu = meter.summary(INDEX_NAME).total_rcu
            phases[phase.value] = {
                "reads": persons,
                "requestsSent": counter.count,
                "requestsPerRead": round(counter.count / persons, 3),
                "maxRequestsPerRead": max(reported),
                "rcuPerRead": round(rcu / persons, 3),
                "medianMs": round(median(timings), 2),
            }
    # The ADR: one single-partition Query per by-person read, two only while reads are dual.
    expected = {"legacy": 1, "migrating": 2, "sharded": 1, "rolling-back": 2}
    ok = all(phases[name]["maxRequestsPerRead"] == n for name, n in expected.items())
    return {"ok": ok, "shardCount": shards, "persons": persons, "byPhase": phases}


def render(result: dict[str, Any]) -> None:
    rows = [
        [
            phase,
            num(row["requestsPerRead"], 2),
            str(row["maxRequestsPerRead"]),
            num(row["rcuPerRead"], 2),
            num(row["medianMs"], 2, " ms"),
        ]
        for phase, row in result["byPhase"].items()
    ]
    emit(
        f"Requests per by-person read, {result['persons']} persons per phase "
        f"(N={result['shardCount']}, table half-way through the backfill)",
        ["phase", "requests / read", "max", "RCU / read", "median latency"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.by_person_requests", description=__doc__)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--persons", type=int, default=200)
    args = parser.parse_args(argv)
    result = run(shards=args.shards, persons=args.persons)
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
