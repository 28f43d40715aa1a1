"""Fan-out latency: the all-open enumeration over N shards vs the legacy single partition.

    python -m bench.fanout_latency [--shards 16] [--rounds 15] [--rtt-ms 10]

One server, one run: a table seeded in the legacy layout and the same dataset seeded in the
sharded layout. get_all_open_sagas() is timed through the repository in phase legacy (one
partition, its pages one after another), phase sharded (N queries in parallel, merged) and
phase migrating (legacy first, then the N shards), alternating round by round so drift in the
machine's speed hits every variant alike. Then again with a simulated network round trip: a
botocore before-send hook that sleeps --rtt-ms before every request (a local server answers in
well under a millisecond of network time; DynamoDB across a VPC endpoint does not).
Medians, p90 and the ratio of medians are reported.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from bench.figures import median, percentile
from bench.output import emit, num, progress, save
from bench.server import Tables, local_server
from bench.tiny import TINY_SPEC
from devkit.seed import SeedSpec, build_dataset
from saga_index.index import DEFAULT_SHARD_COUNT
from saga_index.layout_change.record import Phase, Routing
from saga_index.store import SagaRepository
from saga_index.store.dynamo import make_client

NAME = "fanout_latency"
TINY: dict[str, Any] = {"rounds": 2, "rtt_ms": 1.0, "spec": TINY_SPEC}
WARMUP_ROUNDS = 2


def with_round_trip(client: Any, seconds: float) -> Any:
    """Delay every request by `seconds` before it is sent: a simulated network round trip."""
    if seconds > 0:

        def delay(**_: Any) -> None:
            time.sleep(seconds)

        client.meta.events.register("before-send.dynamodb", delay)
    return client


def run(
    *,
    shards: int = 16,
    rounds: int = 15,
    rtt_ms: float = 10.0,
    spec: SeedSpec | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    dataset = build_dataset(spec or SeedSpec())
    results: dict[str, Any] = {}
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        legacy_table, _ = tables.seeded("fanout-legacy", dataset)
        sharded_table, _ = tables.seeded("fanout-sharded", dataset, shard_count=shards)
        for label, rtt in (("no added latency", 0.0), (f"{rtt_ms:g} ms per request", rtt_ms)):
            client = with_round_trip(
                make_client(endpoint_url=endpoint, max_pool_connections=64), rtt / 1000
            )
            variants = {
                "legacy": SagaRepository(
                    client, legacy_table, plan=Routing.for_phase(Phase.LEGACY, DEFAULT_SHARD_COUNT)
                ),
                f"sharded N={shards}": SagaRepository(
                    client,
                    sharded_table,
                    plan=Routing.for_phase(Phase.SHARDED, shards),
                ),
                f"migrating N={shards}": SagaRepository(
                    client,
                    sharded_table,
                    plan=Routing.for_phase(Phase.MIGRATING, shards),
                ),
            }
            timings: dict[str, list[float]] = {name: [] for name in variants}
            requests: dict[str, int] = {}
            counts: dict[str, int] = {}
            progress(f"fanout_latency: {rounds} rounds, {label}")
            for round_number in range(WARMUP_ROUNDS + rounds):
                for name, repository in variants.items():
                    started = time.perf_counter()
                    result = repository.get_all_open_sagas()
                    elapsed = (time.perf_counter() - started) * 1000
                    if round_number >= WARMUP_ROUNDS:
                        timings[name].append(elapsed)
                    requests[name] = result.requests
                    counts[name] = len(result.items)
            if len(set(counts.values())) != 1:
                raise RuntimeError(f"the variants returned different open sets: {counts}")
            legacy_median = median(timings["legacy"])
            results[label] = {
                "rttMs": rtt,
                "openSagas": counts["legacy"],
                "variants": {
                    name: {
                        "requests": requests[name],
                        "medianMs": round(median(values), 2),
                        "p90Ms": round(percentile(values, 0.9), 2),
                        "ratioToLegacy": round(median(values) / legacy_median, 3),
                        "samplesMs": [round(v, 2) for v in values],
                    }
                    for name, values in timings.items()
                },
            }
    # Timing has no pass mark (no "ok"): the run fails only if the variants disagree.
    return {"shardCount": shards, "rounds": rounds, "byRoundTrip": results}


def render(result: dict[str, Any]) -> None:
    rows = []
    for label, block in result["byRoundTrip"].items():
        for name, variant in block["variants"].items():
            rows.append(
                [
                    label,
                    name,
                    str(variant["requests"]),
                    num(variant["medianMs"], 1, " ms"),
                    num(variant["p90Ms"], 1, " ms"),
                    num(variant["ratioToLegacy"], 2, "x"),
                ]
            )
    emit(
        f"Fan-out latency of get_all_open_sagas(): medians of {result['rounds']} alternating "
        "rounds, one server, one run",
        ["simulated network", "read", "requests", "median", "p90", "median vs legacy"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fanout_latency", description=__doc__)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rtt-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    result = run(shards=args.shards, rounds=args.rounds, rtt_ms=args.rtt_ms)
    render(result)
    save(NAME, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
