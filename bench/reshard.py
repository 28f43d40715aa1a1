"""Live re-shard N -> 2N: rows moved and time, and what the split buys the hottest key.

    python -m bench.reshard [--scales 1,10] [--source 16] [--duration 60] [--model-scale 100]

Moved rows: per scale, a table on a local dynalite server is seeded in the sharded(N) layout and
the backfill moves it to sharded(2N) with the move a `resharding` record names (source
sharded(N), target sharded(2N)) at the highest cap the tool accepts (MAX_WRITES_PER_SECOND),
then its own read-back verification and a drift check against sharded(2N). The split property
(`shard(p, 2N)` is `shard(p, N)` or `shard(p, N) + N`) says about half the rows move; the
expected count is computed from the dataset and compared with what the run re-stamped.

Hot key: the same traffic plan is replayed, every request metered, against a table seeded as
sharded(N) and one seeded as sharded(2N); the scaled dataset is priced by the synthetic model
(devkit.traffic.synthetic, as bench/hot_key.py does) because a real replay at that size would
not fit the budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from bench.figures import load_row
from bench.output import emit, num, pct, progress, save
from bench.server import Tables, backfill_at_cap, local_server
from bench.tiny import TINY_MIX, TINY_SPEC
from devkit.seed import Dataset, SeedSpec, build_dataset
from devkit.traffic.mix import TrafficMix
from devkit.traffic.plan import build_plan
from devkit.traffic.replay import metered_replay
from devkit.traffic.synthetic import SyntheticTable
from saga_index.index import INDEX_NAME, MAX_WRITES_PER_SECOND, Layout
from saga_index.layout_change.backfill import Move
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import BackfillDirection, Phase
from saga_index.store.dynamo import make_client

NAME = "reshard"
TINY: dict[str, Any] = {
    "scales": (1,),
    "segments": 2,
    "duration": 5,
    "model_scale": 2,
    "base_spec": TINY_SPEC,
    "base_mix": TINY_MIX,
}


def expected_moves(dataset: Dataset, source: int, target: int) -> int:
    """Saga rows whose key differs between sharded(source) and sharded(target): the rows the
    move must re-stamp (an anomaly has no shard key in either layout)."""
    return sum(
        1
        for saga in dataset.sagas
        if saga.person_id is not None and saga.gsi4pk(source) != saga.gsi4pk(target)
    )


def measure_move(
    tables: Tables, dataset: Dataset, *, source: int, target: int, segments: int, label: str
) -> dict[str, Any]:
    """Seed `dataset` as sharded(source), move it to sharded(target), verify, check drift."""
    endpoint = tables.endpoint_url
    progress(f"reshard: {label}: seeding {len(dataset.sagas)} saga rows as sharded({source})")
    table, _ = tables.seeded(
        f"reshard-{label}", dataset, shard_count=source, include_other_entities=False
    )
    client = make_client(endpoint_url=endpoint, max_pool_connections=64)
    # The move a resharding(source -> target) record names; the bench owns its table, so no
    # record and no lease.
    move = Move(BackfillDirection.FORWARD, Layout.sharded(source), Layout.sharded(target))
    progress(f"reshard: {label}: backfill {move.describe()}, {segments} segments, max cap")
    timed = backfill_at_cap(
        client, table, move, segments=segments, label=f"{label} re-shard backfill"
    )
    summary, seconds = timed.summary, timed.backfill_seconds
    drift = DriftChecker(client, table, phase=Phase.SHARDED, shard_count=target).check(
        scan_unindexed=False
    )
    routable = sum(1 for saga in dataset.sagas if saga.person_id is not None)
    return {
        "sagaRows": len(dataset.sagas),
        "routableRows": routable,
        "expectedMoves": expected_moves(dataset, source, target),
        "moved": summary.restamped,
        "movedShare": round(summary.restamped / routable, 4) if routable else None,
        "skipped": summary.skipped,
        "scanned": summary.scanned,
        "backfillSeconds": round(seconds, 2),
        "rowsPerSecond": round(summary.restamped / seconds, 1) if seconds else None,
        "capWritesPerSecond": MAX_WRITES_PER_SECOND,
        "segments": segments,
        "verified": summary.verified,
        "misroutedRowsAfter": drift.misrouted_rows,
        "shardSkewAfter": round(drift.shard_skew, 3),
    }


def metered_hot_key(
    tables: Tables, dataset: Dataset, mix: TrafficMix, *, layouts: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """The same plan replayed against each sharded(N) table, every request metered."""
    plan = build_plan(mix, dataset)
    out: dict[str, dict[str, Any]] = {}
    for shards in layouts:
        table, schema = tables.seeded(f"reshard-hot-{shards}", dataset, shard_count=shards)
        progress(f"reshard: metered sharded({shards}) replay of {mix.duration_s} virtual s")
        started = time.monotonic()
        _, meter = metered_replay(
            tables.endpoint_url,
            table,
            schema,
            plan,
            phase=Phase.SHARDED,
            shard_count=shards,
            run_label=f"sharded{shards}",
        )
        out[str(shards)] = {
            **load_row(meter.summary(INDEX_NAME)),
            "requests": meter.requests,
            "wallSeconds": round(time.monotonic() - started, 2),
        }
    return out


def synthetic_hot_key(
    spec: SeedSpec, mix: TrafficMix, tables: Tables, *, layouts: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """The same plan priced by the synthetic model for each sharded(N)."""
    dataset = build_dataset(spec)
    plan = build_plan(mix, dataset)
    _, schema = tables.create("reshard-schema")
    out: dict[str, dict[str, Any]] = {}
    for shards in layouts:
        table = SyntheticTable(
            dataset, schema, phase=Phase.SHARDED, shard_count=shards, layout_shard_count=shards
        )
        out[str(shards)] = load_row(table.run(plan, f"sharded-{shards}").summary(INDEX_NAME))
    return out


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


def run(
    *,
    scales: Sequence[int] = (1, 10),
    source: int = 16,
    segments: int = 8,
    duration: int = 60,
    model_scale: int = 100,
    base_spec: SeedSpec | None = None,
    base_mix: TrafficMix | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    target = source * 2
    spec = base_spec or SeedSpec()

    mix = dataclasses.replace(base_mix or TrafficMix(), duration_s=duration)
    layouts = (source, target)
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        moves = {
            f"{scale}x": measure_move(
                tables,
                build_dataset(spec.scaled(scale)),
                source=source,
                target=target,
                segments=segments,
                label=f"{scale}x",
            )
            for scale in scales
        }
        metered = metered_hot_key(tables, build_dataset(spec), mix, layouts=layouts)
        progress(f"reshard: synthetic pricing at 1x and {model_scale}x")
        model_1x = synthetic_hot_key(spec, mix, tables, layouts=layouts)
        model_nx = synthetic_hot_key(
            spec.scaled(model_scale), mix.scaled(model_scale), tables, layouts=layouts
        )
    hot: dict[str, Any] = {
        "1x metered": metered,
        "1x synthetic": model_1x,
        f"{model_scale}x synthetic": model_nx,
    }
    for layouts_row in hot.values():
        before, after = layouts_row[str(source)], layouts_row[str(target)]
        layouts_row["ratios"] = {
            "hottestShare": _ratio(before["hottestKeyShare"], after["hottestKeyShare"]),
            "headroom": _ratio(after["headroom"], before["headroom"]),
        }
    ok = (
        all(
            row["verified"]
            and row["moved"] == row["expectedMoves"]
            and row["misroutedRowsAfter"] == 0
            and 0.4 <= (row["movedShare"] or 0) <= 0.6
            for row in moves.values()
        )
        and metered[str(target)]["hottestKeyShare"] < metered[str(source)]["hottestKeyShare"]
    )
    return {
        "ok": ok,
        "sourceShards": source,
        "targetShards": target,
        "durationS": duration,
        "modelScale": model_scale,
        "moves": moves,
        "hotKey": hot,
    }


def render(result: dict[str, Any]) -> None:
    source, target = result["sourceShards"], result["targetShards"]
    emit(
        f"Re-shard N={source} -> N={target}: rows moved by the backfill at its maximum cap "
        "(one local server)",
        [
            "scale",
            "saga rows",
            "moved",
            "expected",
            "moved share",
            "backfill",
            "rows/s",
            "verified",
            "misrouted after",
        ],
        [
            [
                scale,
                f"{row['sagaRows']:,}",
                f"{row['moved']:,}",
                f"{row['expectedMoves']:,}",
                pct(row["movedShare"]),
                num(row["backfillSeconds"], 1, " s"),
                num(row["rowsPerSecond"], 0, "/s"),
                "ok" if row["verified"] else "FAILED",
                str(row["misroutedRowsAfter"]),
            ]
            for scale, row in result["moves"].items()
        ],
    )
    rows = []
    for source_label, layouts in result["hotKey"].items():
        before, after = layouts[str(source)], layouts[str(target)]
        ratios = layouts["ratios"]
        rows.append(
            [
                source_label,
                pct(before["hottestKeyShare"]),
                pct(after["hottestKeyShare"]),
                num(ratios["hottestShare"], 2, "x"),
                num(before["headroom"], 2, "x"),
                num(after["headroom"], 2, "x"),
                num(ratios["headroom"], 2, "x"),
            ]
        )
    emit(
        f"Hottest GSI4 key, sharded N={source} vs N={target}, the same "
        f"{result['durationS']} s of the ADR traffic mix",
        [
            "run",
            f"hottest share N={source}",
            f"N={target}",
            "share ratio",
            f"headroom N={source}",
            f"N={target}",
            "headroom ratio",
        ],
        rows,
    )


def _scales(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reshard", description=__doc__)
    parser.add_argument("--scales", type=_scales, default=(1, 10))
    parser.add_argument("--source", type=int, default=16, help="N before the split")
    parser.add_argument("--segments", type=int, default=8)
    parser.add_argument("--duration", type=int, default=60, help="virtual seconds per replay")
    parser.add_argument("--model-scale", type=int, default=100)
    args = parser.parse_args(argv)
    result = run(
        scales=args.scales,
        source=args.source,
        segments=args.segments,
        duration=args.duration,
        model_scale=args.model_scale,
    )
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
