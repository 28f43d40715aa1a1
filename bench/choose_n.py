"""Choosing N: the hottest partition's share against the cost of one all-open enumeration.

    python -m bench.choose_n [--counts 1,2,4,8,16,32,64] [--duration 10] [--scale 100]

For every N, at the seed's scale, a table seeded directly in the sharded layout under N gets the
ADR traffic mix REALLY replayed through the capacity meter (hottest key's share, peak per-key
load, headroom to the per-partition ceiling), and one metered get_all_open_sagas() (requests,
read units, wall time: median of 5). The same plan scaled 100x is priced by the synthetic model:
the curve that justifies N is where the share stops falling faster than the enumeration's
request count grows, and where the headroom at the target scale is comfortably above 1.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.figures import load_row, median
from bench.output import emit, num, pct, progress, save
from bench.server import Tables, local_server
from bench.tiny import TINY_MIX, TINY_SPEC
from devkit.capacity.ledger import LoadLedger
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.seed import SeedSpec, build_dataset
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from devkit.traffic.replay import metered_replay
from devkit.traffic.synthetic import SyntheticTable
from saga_index.index import INDEX_NAME, validate_shard_count
from saga_index.layout_change.record import Phase, Routing
from saga_index.store import SagaRepository
from saga_index.store.dynamo import make_client

NAME = "choose_n"
TINY: dict[str, Any] = {
    "counts": (1, 16),
    "duration": 5,
    "scale": 2,
    "spec": TINY_SPEC,
    "mix": TINY_MIX,
}
DEFAULT_COUNTS = (1, 2, 4, 8, 16, 32, 64)
ENUMERATION_REPEATS = 5


def measured_enumeration(
    endpoint: str, table: str, schema: TableSchema, shards: int
) -> dict[str, Any]:
    """One metered all-open enumeration (requests, RCU) and its median wall time."""
    meter = CapacityMeter(schema, reader=make_client(endpoint_url=endpoint), clock=lambda: 0.0)
    metered = meter.attach(make_client(endpoint_url=endpoint))
    result = SagaRepository(
        metered,
        table,
        plan=Routing.for_phase(Phase.SHARDED, shards),
    ).get_all_open_sagas()
    plain = SagaRepository(
        make_client(endpoint_url=endpoint),
        table,
        plan=Routing.for_phase(Phase.SHARDED, shards),
    )
    timings = []
    for _ in range(ENUMERATION_REPEATS):
        started = time.perf_counter()
        plain.get_all_open_sagas()
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "requests": result.requests,
        "rcu": round(meter.summary(INDEX_NAME).total_rcu, 2),
        "openSagas": len(result.items),
        "medianMs": round(median(timings), 1),
    }


def synthetic_enumeration(table: SyntheticTable) -> dict[str, Any]:
    saved = table.ledger
    table.ledger = LoadLedger()
    requests = table.enumerate_open(0)
    rcu = table.ledger.summary(INDEX_NAME).total_rcu
    table.ledger = saved
    return {"requests": requests, "rcu": round(rcu, 1)}


def run(
    *,
    counts: Sequence[int] = DEFAULT_COUNTS,
    duration: int = 10,
    scale: int = 100,
    spec: SeedSpec | None = None,
    mix: TrafficMix | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    for n in counts:
        validate_shard_count(n)
    spec = spec or SeedSpec()
    mix = replace(mix or TrafficMix(), duration_s=duration)
    dataset = build_dataset(spec)
    plan = build_plan(mix, dataset)
    big_dataset = build_dataset(spec.scaled(scale))
    big_plan = build_plan(mix.scaled(scale), big_dataset)
    rows: dict[str, Any] = {}
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        for n in counts:
            progress(f"choose_n: N={n}: seed, metered replay of {duration} virtual s")
            table, schema = tables.seeded(
                f"n{n}", dataset, shard_count=n, include_other_entities=False
            )
            _, meter = metered_replay(
                endpoint,
                table,
                schema,
                plan,
                phase=Phase.SHARDED,
                shard_count=n,
                run_label=f"n{n}",
            )
            measured = {
                **load_row(meter.summary(INDEX_NAME)),
                "enumeration": measured_enumeration(endpoint, table, schema, n),
            }
            progress(f"choose_n: N={n}: synthetic {scale}x")
            model = SyntheticTable(
                big_dataset, schema, phase=Phase.SHARDED, shard_count=n, layout_shard_count=n
            )
            enumeration = synthetic_enumeration(model)
            scaled = {
                **load_row(model.run(big_plan, f"n{n}").summary(INDEX_NAME)),
                "enumeration": enumeration,
            }
            rows[str(n)] = {"seedScale": measured, "scaled": scaled}
    return {"durationS": duration, "scale": scale, "counts": list(counts), "byShardCount": rows}


def render(result: dict[str, Any]) -> None:
    scale = result["scale"]
    table = []
    for n in result["counts"]:
        row = result["byShardCount"][str(n)]
        seed, big = row["seedScale"], row["scaled"]
        table.append(
            [
                str(n),
                pct(seed["hottestKeyShare"]),
                num(seed["headroom"], 1, "x"),
                str(seed["enumeration"]["requests"]),
                num(seed["enumeration"]["rcu"]),
                num(seed["enumeration"]["medianMs"], 1, " ms"),
                pct(big["hottestKeyShare"]),
                num(big["headroom"], 2, "x"),
                str(big["enumeration"]["requests"]),
                num(big["enumeration"]["rcu"], 0),
            ]
        )
    emit(
        f"Choosing N: hot-key share vs the cost of one all-open enumeration "
        f"(1x metered on the server; {scale}x synthetic)",
        [
            "N",
            "1x hottest share",
            "1x headroom",
            "1x enum requests",
            "1x enum RCU",
            "1x enum median",
            f"{scale}x hottest share",
            f"{scale}x headroom",
            f"{scale}x enum requests",
            f"{scale}x enum RCU",
        ],
        table,
    )


def _counts(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.choose_n", description=__doc__)
    parser.add_argument("--counts", type=_counts, default=DEFAULT_COUNTS)
    parser.add_argument("--duration", type=int, default=10, help="virtual seconds per replay")
    parser.add_argument("--scale", type=int, default=100)
    args = parser.parse_args(argv)
    result = run(counts=args.counts, duration=args.duration, scale=args.scale)
    render(result)
    save(NAME, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
