"""Hot-key relief: the hottest index partition's share of the load, legacy vs sharded.

    python -m bench.hot_key [--shards 16] [--duration 60] [--scale 100]

At the seed's scale the traffic is REALLY replayed against a local server (two tables: one
seeded in the legacy layout, one in the sharded layout, the same plan through each) and every
request is metered. At 100x a real run would take far longer than the benchmark budget, so the
same plan, scaled, is priced by devkit.traffic.synthetic.SyntheticTable from item sizes with the
meter's own functions; the seed-scale row is priced that way too, as a check that the model
agrees with the metered run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.figures import load_row
from bench.output import emit, num, pct, progress, save
from bench.server import Tables, local_server
from bench.tiny import TINY_MIX, TINY_SPEC
from devkit.capacity.table_schema import TableSchema
from devkit.seed import SeedSpec, build_dataset
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from devkit.traffic.replay import metered_replay
from devkit.traffic.synthetic import SyntheticTable
from saga_index.index import INDEX_NAME
from saga_index.layout_change.record import Phase

NAME = "hot_key"
TINY: dict[str, Any] = {"duration": 4, "scale": 2, "spec": TINY_SPEC, "mix": TINY_MIX}


def synthetic(
    spec: SeedSpec, mix: TrafficMix, schema: TableSchema, *, shards: int
) -> dict[str, dict[str, Any]]:
    dataset = build_dataset(spec)
    plan = build_plan(mix, dataset)
    out = {}
    for label, phase, layout in (
        ("legacy", Phase.LEGACY, None),
        ("sharded", Phase.SHARDED, shards),
    ):
        table = SyntheticTable(
            dataset, schema, phase=phase, shard_count=shards, layout_shard_count=layout
        )
        out[label] = load_row(table.run(plan, label).summary(INDEX_NAME))
    return out


def run(
    *,
    shards: int = 16,
    duration: int = 60,
    scale: int = 100,
    spec: SeedSpec | None = None,
    mix: TrafficMix | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    spec = spec or SeedSpec()
    mix = replace(mix or TrafficMix(), duration_s=duration)
    dataset = build_dataset(spec)
    plan = build_plan(mix, dataset)
    measured: dict[str, Any] = {}
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        for label, phase, layout in (
            ("legacy", Phase.LEGACY, None),
            ("sharded", Phase.SHARDED, shards),
        ):
            table, schema = tables.seeded(f"hot-{label}", dataset, shard_count=layout)
            progress(f"hot_key: metered {label} replay of {duration} virtual s")
            started = time.monotonic()
            _, meter = metered_replay(
                endpoint,
                table,
                schema,
                plan,
                phase=phase,
                shard_count=shards,
                run_label=label,
            )
            measured[label] = {
                **load_row(meter.summary(INDEX_NAME)),
                "requests": meter.requests,
                "wallSeconds": round(time.monotonic() - started, 2),
            }
    progress("hot_key: synthetic pricing at 1x and at the scaled dataset")
    model_1x = synthetic(spec, mix, schema, shards=shards)
    model_nx = synthetic(spec.scaled(scale), mix.scaled(scale), schema, shards=shards)
    legacy, sharded = measured["legacy"], measured["sharded"]
    return {
        # The claim under test: sharding takes load off the hottest key and adds headroom.
        "ok": sharded["hottestKeyShare"] < legacy["hottestKeyShare"]
        and sharded["headroom"] > legacy["headroom"],
        "shardCount": shards,
        "durationS": duration,
        "scale": scale,
        "seedScale": {"metered": measured, "synthetic": model_1x},
        "scaled": {"synthetic": model_nx},
        "datasets": {
            "1x": {"sagas": spec.open_sagas + spec.terminal_sagas, "persons": spec.persons},
            f"{scale}x": {
                "sagas": (spec.open_sagas + spec.terminal_sagas) * scale,
                "persons": spec.persons * scale,
            },
        },
    }


def render(result: dict[str, Any]) -> None:
    rows = []
    scale = result["scale"]
    sources = (
        ("1x", "metered run", result["seedScale"]["metered"]),
        ("1x", "synthetic", result["seedScale"]["synthetic"]),
        (f"{scale}x", "synthetic", result["scaled"]["synthetic"]),
    )
    for size, source, layouts in sources:
        for label in ("legacy", "sharded"):
            row = layouts[label]
            rows.append(
                [
                    size,
                    source,
                    label if label == "legacy" else f"sharded N={result['shardCount']}",
                    pct(row["hottestKeyShare"]),
                    num(row["peakRcuPerKey"]),
                    num(row["peakWcuPerKey"]),
                    num(row["headroom"], 2, "x"),
                ]
            )
    emit(
        f"Hot-key relief: hottest GSI4 partition, {result['durationS']} s of the ADR traffic mix",
        ["scale", "source", "layout", "hottest share", "peak RCU/s", "peak WCU/s", "headroom"],
        rows,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hot_key", description=__doc__)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--duration", type=int, default=60, help="virtual seconds per replay")
    parser.add_argument("--scale", type=int, default=100)
    args = parser.parse_args(argv)
    result = run(shards=args.shards, duration=args.duration, scale=args.scale)
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
