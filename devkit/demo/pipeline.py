"""run_demo(): the demo's steps in the runbook's order, and the report they add up to."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.demo.config import DemoConfig
from devkit.demo.report import improvement, layout_json, parity_summary, write_chart
from devkit.demo.steps import (
    DemoError,
    backfill_pass,
    parity_line,
    repair_anomalies,
    replay,
    verify_against,
)
from devkit.demo.ui import Stages
from devkit.results import write_json
from devkit.schema import create_table
from devkit.seed import EPOCH, build_dataset, seed_table
from devkit.traffic.plan import build_plan
from saga_index import keys
from saga_index.drift import DriftChecker
from saga_index.dynamo.client import make_client
from saga_index.model import Phase
from saga_index.names import INDEX_NAME
from saga_index.parity import ParityVerifier


@dataclass
class Clients:
    endpoint_url: str

    def plain(self, max_attempts: int = 10) -> Any:
        return make_client(
            region="us-east-1", endpoint_url=self.endpoint_url, max_attempts=max_attempts
        )


def run_demo(
    config: DemoConfig, endpoint_url: str, template: dict[str, Any], stages: Stages
) -> dict[str, Any]:
    clients = Clients(endpoint_url)
    client = clients.plain()
    table = config.table_name
    schema = TableSchema.from_template(template, table)

    stages.step(f"create {table} from the synthesised template and seed the legacy dataset")
    create_table(client, table, template)
    dataset = build_dataset(config.seed)
    seeded = seed_table(client, table, dataset)
    stages.note(
        f"{seeded.saga_rows} saga rows ({len(dataset.open_sagas)} open, "
        f"{len(dataset.anomalies)} without personId) over {len(dataset.persons)} persons, "
        f"{seeded.other_rows} rows of other entity types ({seeded.seconds:.1f} s)"
    )
    plan = build_plan(config.traffic, dataset)
    stages.note(f"traffic plan: {plan.counts()} over {config.traffic.duration_s} virtual s")

    stages.step("replay the traffic against the LEGACY layout through the capacity meter")
    legacy, legacy_stats = replay(
        endpoint_url, config, schema, plan, phase=Phase.LEGACY, stages=stages
    )

    stages.step("snapshot the reads before the migration (parity baseline)")
    snapshot = (
        ParityVerifier(client, table, phase=Phase.LEGACY, shard_count=config.shards)
        .verify(sample=config.verify_sample, seed=config.seed.seed)
        .snapshot
    )
    stages.note(f"{len(snapshot.persons)} persons sampled for by-person parity")

    stages.step("phase migrating: backfill dry run, then the backfill (rate-capped)")
    dry, _ = backfill_pass(client, config, stages=stages, label="dry run", dry_run=True)
    # The backfill's writes are metered on the real clock: its load on the legacy key.
    backfill_meter = CapacityMeter(schema, reader=clients.plain())
    metered = backfill_meter.attach(clients.plain())
    first, first_seconds = backfill_pass(metered, config, stages=stages, label="backfill")

    stages.step("repair the anomalous rows the backfill reported, then backfill them")
    repaired = repair_anomalies(client, table, first.anomaly_keys)
    stages.note(f"repaired {len(repaired)} row(s) from their lease's tenant")
    second, _ = backfill_pass(metered, config, stages=stages, label="second pass")
    assert second.verification is not None
    if second.verification.remaining_anomalies or second.anomalies:
        raise DemoError(
            f"{second.verification.remaining_anomalies} anomalous row(s) remain on the legacy "
            "key after the repair: the drift guard cannot reach zero"
        )

    stages.step("verify parity against the snapshot (phase migrating)")
    migrating_parity = verify_against(client, config, snapshot, Phase.MIGRATING)
    stages.note(parity_line(migrating_parity))

    stages.step("drift check as phase sharded will judge it")
    drift = DriftChecker(client, table, phase=Phase.SHARDED, shard_count=config.shards).check(
        scan_unindexed=True
    )
    if not drift.healthy:
        raise DemoError(f"drift is not clean, staying in migrating: {drift.findings()}")
    stages.note(
        f"clean: legacy rows {drift.legacy_rows}, misrouted {drift.misrouted_rows}, unindexed "
        f"{drift.unindexed_rows}, shard skew {drift.shard_skew:.2f}"
    )

    stages.step("phase sharded: parity again, then the same traffic against the SHARDED layout")
    sharded_parity = verify_against(client, config, snapshot, Phase.SHARDED)
    stages.note(parity_line(sharded_parity))
    # A day later on the replay's wall clock: the same events, fresh timestamps.
    sharded, sharded_stats = replay(
        endpoint_url,
        config,
        schema,
        plan,
        phase=Phase.SHARDED,
        stages=stages,
        time_base=EPOCH + timedelta(days=1),
    )

    stages.step("write the report")
    backfill_load = backfill_meter.summary(INDEX_NAME)
    legacy_key = next(
        (p for p in backfill_load.partitions if p.partition_key == keys.LEGACY_GSI4PK), None
    )
    legacy_json = layout_json(legacy, replay=legacy_stats.to_json())
    sharded_json = layout_json(sharded, replay=sharded_stats.to_json())
    report: dict[str, Any] = {
        "legacy": legacy_json,
        "sharded": sharded_json,
        "improvement": improvement(legacy_json, sharded_json),
        "parity": {
            "ok": migrating_parity.ok and sharded_parity.ok,
            "summary": (
                f"{migrating_parity.truth_rows} saga rows; all-sagas, all-open and "
                f"{len(snapshot.persons)} by-person reads compared with the pre-migration "
                "snapshot in phases migrating and sharded"
            ),
            "migrating": parity_summary(migrating_parity),
            "sharded": parity_summary(sharded_parity),
        },
        "backfill": {
            "restamped": first.restamped,
            "skipped": first.skipped,
            "anomalies": first.anomalies,
            "anomalyKeys": first.anomaly_keys,
            "scanned": first.scanned,
            "wouldRestamp": dry.would_restamp,
            "seconds": round(first_seconds, 2),
            "rowsPerSecond": round(first.restamped / first_seconds, 1) if first_seconds else None,
            "maxWritesPerSecond": config.backfill_rate,
            "segments": config.backfill_segments,
            "throttles": first.throttles,
            "repaired": len(repaired),
            "secondPass": {
                "restamped": second.restamped,
                "skipped": second.skipped,
                "anomalies": second.anomalies,
            },
            "legacyKeyPeakWcu": legacy_key.peak_wcu if legacy_key else 0.0,
            "legacyKeyWcu": round(legacy_key.total_wcu, 1) if legacy_key else 0.0,
        },
        "drift": {
            "healthy": drift.healthy,
            "legacyRows": drift.legacy_rows,
            "misroutedRows": drift.misrouted_rows,
            "unindexedRows": drift.unindexed_rows,
            "strayRows": drift.stray_rows,
            "rowsPerShard": {str(n): c for n, c in sorted(drift.rows_per_shard.items())},
            "shardSkew": round(drift.shard_skew, 3),
        },
        "config": config.to_json(),
        "notes": [
            "Capacity units are computed by devkit.capacity from item sizes by DynamoDB's "
            "documented rules, not reported by the server: a local server has no partitions.",
            "peakRcuPerKey/peakWcuPerKey: the highest units any one index partition key took "
            "in one second of the replay clock; headroom: how many times the traffic could "
            "grow before that key reaches 3,000 RCU/s or 1,000 WCU/s.",
        ],
    }
    json_path = write_json(report, config.results_dir / "report.json")
    stages.note(f"wrote {_relative(json_path)}")
    if config.chart:
        chart = write_chart(
            legacy,
            sharded,
            config.results_dir / "partition-load.png",
            title=(f"Renewal-saga index: peak load per partition key, legacy vs N={config.shards}"),
        )
        stages.note(f"wrote {_relative(chart)}")
    return report


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
