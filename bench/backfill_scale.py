"""Backfill without the rate cap, at the seed's scale and at a larger dataset, end to end.

    python -m bench.backfill_scale [--scales 1,10] [--segments 8]

bench/backfill_rate.py measures that the cap holds; this one measures what the server allows
when the cap is out of the way (the highest cap the tool accepts, MAX_WRITES_PER_SECOND), and
runs the whole forward migration on a bigger table: seed, backfill, the backfill's own
verification, and the drift check the runbook requires before phase `sharded`. 100x (168,100
saga rows) is `--scales 100`: it takes several minutes on two cores, so `make bench` runs 1x
and 10x.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from bench.output import emit, num, progress, save
from bench.server import Tables, backfill_at_cap, local_server
from bench.tiny import TINY_SPEC
from devkit.seed import SeedSpec, build_dataset
from saga_index.index import MAX_WRITES_PER_SECOND
from saga_index.layout_change.backfill import Move
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import BackfillDirection, Phase
from saga_index.store.dynamo import make_client

NAME = "backfill_scale"
TINY: dict[str, Any] = {"scales": (1, 2), "segments": 2, "spec": TINY_SPEC}


def run(
    *,
    scales: Sequence[int] = (1, 10),
    segments: int = 8,
    shards: int = 16,
    spec: SeedSpec | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with local_server(endpoint_url) as endpoint:
        tables = Tables(endpoint)
        for scale in scales:
            dataset = build_dataset((spec or SeedSpec()).scaled(scale))
            progress(f"backfill_scale: {scale}x: seeding {len(dataset.sagas)} saga rows")
            started = time.monotonic()
            table, _ = tables.seeded(f"backfill-{scale}x", dataset, include_other_entities=False)
            seeded = time.monotonic() - started
            client = make_client(endpoint_url=endpoint, max_pool_connections=64)
            progress(f"backfill_scale: {scale}x: backfill, {segments} segments, no cap")
            move = Move.between_legacy_and(BackfillDirection.FORWARD, shards)
            timed = backfill_at_cap(
                client, table, move, segments=segments, label=f"{scale}x backfill"
            )
            summary = timed.summary
            backfill_seconds, verify_seconds = timed.backfill_seconds, timed.verify_seconds
            drift_started = time.monotonic()
            drift = DriftChecker(client, table, phase=Phase.SHARDED, shard_count=shards).check(
                scan_unindexed=True
            )
            drift_seconds = time.monotonic() - drift_started
            out[f"{scale}x"] = {
                "sagaRows": len(dataset.sagas),
                "seedSeconds": round(seeded, 2),
                "restamped": summary.restamped,
                "skipped": summary.skipped,
                "anomalies": summary.anomalies,
                "backfillSeconds": round(backfill_seconds, 2),
                "rowsPerSecond": round(summary.restamped / backfill_seconds, 1),
                "capWritesPerSecond": MAX_WRITES_PER_SECOND,
                "verified": summary.verified,
                "verifySeconds": round(verify_seconds, 2),
                # Only the anomalies stay: they need a human (see the demo's repair step).
                "legacyRowsAfter": drift.legacy_rows,
                "misroutedRowsAfter": drift.misrouted_rows,
                "unindexedRowsAfter": drift.unindexed_rows,
                "shardSkew": round(drift.shard_skew, 3),
                "driftSeconds": round(drift_seconds, 2),
            }
    # Verified, and nothing but the anomalies left on the legacy key, nothing misrouted.
    ok = all(
        row["verified"]
        and row["legacyRowsAfter"] == row["anomalies"]
        and row["misroutedRowsAfter"] == 0
        and row["unindexedRowsAfter"] == 0
        for row in out.values()
    )
    return {"ok": ok, "segments": segments, "shardCount": shards, "byScale": out}


def render(result: dict[str, Any]) -> None:
    rows = [
        [
            scale,
            f"{row['sagaRows']:,}",
            f"{row['restamped']:,}",
            str(row["anomalies"]),
            num(row["backfillSeconds"], 1, " s"),
            num(row["rowsPerSecond"], 0, "/s"),
            "ok" if row["verified"] else "FAILED",
            str(row["legacyRowsAfter"]),
            num(
                row["seedSeconds"]
                + row["backfillSeconds"]
                + row["verifySeconds"]
                + row["driftSeconds"],
                1,
                " s",
            ),
        ]
        for scale, row in result["byScale"].items()
    ]
    emit(
        f"Backfill with the cap out of the way ({result['segments']} segments, one local server)",
        [
            "scale",
            "saga rows",
            "re-stamped",
            "anomalies",
            "backfill",
            "rows/s",
            "verified",
            "legacy rows after",
            "end to end",
        ],
        rows,
    )


def _scales(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backfill_scale", description=__doc__)
    parser.add_argument("--scales", type=_scales, default=(1, 10))
    parser.add_argument("--segments", type=int, default=8)
    args = parser.parse_args(argv)
    result = run(scales=args.scales, segments=args.segments)
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
