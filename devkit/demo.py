"""`make demo`: show, with numbers, that sharding GSI4 removes the hot key (ADR-0085).

    python -m devkit.demo [--shards 16] [--duration 120] [--backfill-rate 100] ...

On a local DynamoDB-compatible server (dynalite: a real server process, started here and
always stopped, Ctrl-C and SIGTERM included) it:

  1. creates the table from the CDK-synthesised template and seeds a production-shaped legacy
     dataset (devkit.seed);
  2. replays the ADR's traffic mix (devkit.traffic) against the LEGACY layout, every request
     priced by the capacity meter (devkit.capacity) per partition key and per second;
  3. migrates as the runbook does: snapshot the reads, phase `migrating`, backfill dry run,
     backfill (progress bar), verify the legacy key is drained, repair the anomalous rows the
     backfill reported and run it again, verify parity against the snapshot, drift check clean,
     phase `sharded`, parity again;
  4. replays the SAME traffic against the SHARDED layout through a fresh meter;
  5. prints the report table on stdout, writes results/demo/report.json and
     results/demo/partition-load.png.

Progress and logs go to stderr; only the report goes to stdout. Exit codes: 0 done; 1 a step
failed (the message names it); 2 bad arguments; 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from devkit.capacity import CapacityMeter, LoadSummary, TableSchema
from devkit.dynalite import REPO_ROOT, DynaliteServer
from devkit.report import improvement, layout_json, render, write_chart, write_json
from devkit.schema import SchemaError, create_table, load_template
from devkit.seed import EPOCH, SeedSpec, build_dataset, seed_table
from devkit.traffic import (
    SWEEP_NAMES,
    Plan,
    ReplayError,
    ReplayStats,
    SweepSpec,
    TrafficMix,
    build_plan,
    metered_replay,
)
from saga_index import keys
from saga_index.backfill import (
    MAX_TOTAL_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    BackfillRequest,
    BackfillSummary,
    Direction,
    SegmentResult,
    count_source_rows,
    finish_backfill,
    run_backfill,
)
from saga_index.drift import DriftChecker
from saga_index.dynamo import deserialize, error_code, make_client, serialize
from saga_index.errors import InvalidInputError, SagaIndexError
from saga_index.model import Phase
from saga_index.parity import ParityReport, ParityVerifier, Snapshot
from saga_index.shard import DEFAULT_SHARD_COUNT, validate_shard_count

log = logging.getLogger("devkit.demo")

ENGINE = "dynalite"
DEFAULT_RESULTS = REPO_ROOT / "results" / "demo"
DEFAULT_TABLE = "propflow-demo"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# ---- the anomaly repair: what the runbook asks a human to do --------------------------------
# The row still has no usable personId (nobody repaired it meanwhile)...
PERSON_STILL_MISSING = "attribute_not_exists(#personId)"
PERSON_STILL_THE_ONE_READ = "#personId = :readPersonId"
# ...and its sort key is still the broken one that was read.
SORT_KEY_STILL_THE_ONE_READ = "#gsi4sk = :readGsi4sk"
ROW_STILL_EXISTS = "attribute_exists(PK)"


class DemoError(RuntimeError):
    """A migration gate did not pass: the demo stops before the next phase."""


@dataclass(frozen=True)
class DemoConfig:
    shards: int = DEFAULT_SHARD_COUNT
    seed: SeedSpec = field(default_factory=SeedSpec)
    traffic: TrafficMix = field(default_factory=TrafficMix)
    backfill_rate: float = 100.0
    backfill_segments: int = 4
    verify_sample: int = 50
    workers: int = 8
    table_name: str = DEFAULT_TABLE
    results_dir: Path = DEFAULT_RESULTS
    chart: bool = True

    def validate(self) -> DemoConfig:
        validate_shard_count(self.shards)
        self.seed.validate()
        self.traffic.validate()
        # The backfill's own bounds, checked before a server starts.
        if not 0 < self.backfill_rate <= MAX_WRITES_PER_SECOND:
            raise InvalidInputError(
                f"--backfill-rate must be above 0 and at most {MAX_WRITES_PER_SECOND:g} writes/s "
                f"(one partition's write ceiling), got {self.backfill_rate:g}"
            )
        if not 1 <= self.backfill_segments <= MAX_TOTAL_SEGMENTS:
            raise InvalidInputError(
                f"--backfill-segments must be from 1 to {MAX_TOTAL_SEGMENTS}, "
                f"got {self.backfill_segments}"
            )
        if self.verify_sample < 1 or self.workers < 1:
            raise InvalidInputError("--verify-sample and --workers must be >= 1")
        return self

    def to_json(self) -> dict[str, Any]:
        spec, mix = self.seed, self.traffic
        return {
            "engine": ENGINE,
            "shardCount": self.shards,
            "table": self.table_name,
            "seed": {
                "openSagas": spec.open_sagas,
                "terminalSagas": spec.terminal_sagas,
                "persons": spec.persons,
                "anomalies": spec.anomalies,
                "propertyManagers": spec.property_managers,
                "itemBytes": [spec.min_item_bytes, spec.max_item_bytes],
                "randomSeed": spec.seed,
            },
            "traffic": {
                "durationS": mix.duration_s,
                "propertyManagers": mix.property_managers,
                "pollIntervalS": list(mix.poll_interval_s),
                "sweeps": [
                    {"name": s.name, "periodS": s.period_s, "offsetS": s.offset_s}
                    for s in mix.sweeps
                ],
                "transitionsPerS": mix.transitions_per_s,
                "cohortSize": mix.cohort_size,
                "cohortPeriodS": mix.cohort_period_s,
                "inboundMessagesPerS": mix.inbound_messages_per_s,
                "readsPerMessage": mix.reads_per_message,
                "randomSeed": mix.seed,
            },
            "backfill": {
                "maxWritesPerSecond": self.backfill_rate,
                "segments": self.backfill_segments,
            },
            "verifySample": self.verify_sample,
        }


class Stages:
    """Progress on stderr: numbered steps, rich bars on a terminal, plain lines otherwise."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.console = console
        self.number = 0

    def step(self, text: str) -> None:
        self.number += 1
        self.console.print(f"[bold]\\[{self.number}/{self.total}][/bold] {text}")

    def note(self, text: str) -> None:
        self.console.print(f"      {text}")

    def bar(self, description: str, total: float) -> Progress:
        progress = Progress(
            TextColumn("      {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            disable=not self.console.is_terminal,
        )
        progress.add_task(description, total=total)
        return progress


# ---- the steps ------------------------------------------------------------------------------


@dataclass
class Clients:
    endpoint_url: str

    def plain(self, max_attempts: int = 10) -> Any:
        return make_client(
            region="us-east-1", endpoint_url=self.endpoint_url, max_attempts=max_attempts
        )


def replay(
    endpoint_url: str,
    config: DemoConfig,
    schema: TableSchema,
    plan: Plan,
    *,
    phase: Phase,
    stages: Stages,
    time_base: datetime = EPOCH,
) -> tuple[LoadSummary, ReplayStats]:
    duration = config.traffic.duration_s
    with stages.bar(f"{phase.value} replay (virtual s)", duration) as bar:
        task = bar.task_ids[0]
        logged = [0]

        def on_tick(second: int, total: int) -> None:
            bar.update(task, completed=second + 1)
            if not stages.console.is_terminal and second + 1 >= logged[0] + total // 4:
                logged[0] = second + 1
                stages.note(f"{phase.value} replay: {second + 1}/{total} virtual seconds")

        stats, meter = metered_replay(
            endpoint_url,
            config.table_name,
            schema,
            plan,
            phase=phase,
            shard_count=config.shards,
            run_label=phase.value,
            time_base=time_base,
            workers=config.workers,
            on_tick=on_tick,
        )
        bar.update(task, completed=duration)
    summary = meter.summary(keys.INDEX_NAME)
    stages.note(
        f"{stats.wall_seconds:.1f} s wall for {duration} virtual s, {meter.requests} requests "
        f"metered; hottest key {summary.hottest.partition_key if summary.hottest else '-'} "
        f"took {summary.hottest_key_share * 100:.1f} % of the index load, peak "
        f"{summary.peak_rcu_per_key:,.1f} RCU/s"
    )
    return summary, stats


def backfill_pass(
    client: Any,
    config: DemoConfig,
    *,
    stages: Stages,
    label: str,
    dry_run: bool = False,
) -> tuple[BackfillSummary, float]:
    """One forward backfill run (all segments on local threads) with its progress bar, then
    the backfill's own verification of what is left on the legacy key."""
    request = BackfillRequest(
        direction=Direction.FORWARD,
        total_segments=config.backfill_segments,
        max_writes_per_second=float(config.backfill_rate),
        dry_run=dry_run,
    )
    request.direction.check_phase(Phase.MIGRATING)
    total = count_source_rows(
        client,
        config.table_name,
        index_name=keys.INDEX_NAME,
        direction=Direction.FORWARD,
        shard_count=config.shards,
    )
    latest: dict[int, SegmentResult] = {}
    lock = threading.Lock()
    started = time.monotonic()
    with stages.bar(label, max(total, 1)) as bar:
        task = bar.task_ids[0]

        def on_progress(result: SegmentResult) -> None:
            with lock:
                latest[result.segment] = result
                handled = sum(r.handled for r in latest.values())
            bar.update(task, completed=min(handled, total))

        run = run_backfill(
            client,
            config.table_name,
            request,
            shard_count=config.shards,
            on_progress=on_progress,
        )
        bar.update(task, completed=total)
    seconds = time.monotonic() - started
    if not run.complete:
        raise DemoError(
            f"{label} did not complete: failures {run.failures or '-'}, "
            f"interrupted {run.interrupted}; running it again converges"
        )
    summary = finish_backfill(
        client,
        config.table_name,
        request,
        run.results,
        index_name=keys.INDEX_NAME,
        shard_count=config.shards,
        throttles=run.throttles,
    )
    if not summary.verified:
        message = summary.verification.message if summary.verification else "not verified"
        raise DemoError(f"{label}: {message}")
    stages.note(
        f"{label}: scanned {summary.scanned}, re-stamped {summary.restamped}, skipped "
        f"{summary.skipped}, anomalies {summary.anomalies}, would re-stamp "
        f"{summary.would_restamp} ({seconds:.1f} s)"
    )
    assert summary.verification is not None
    stages.note(summary.verification.message)
    return summary, seconds


def repair_anomalies(
    client: Any,
    table_name: str,
    anomaly_keys: Sequence[dict[str, str]],
    *,
    max_writes_per_second: float = 10.0,
) -> list[dict[str, str]]:
    """What the runbook asks of a human: give each anomalous saga row its tenant's personId.

    The personId comes from the row's lease (LEASE#<leaseId>/META names its tenant); GSI4SK is
    rebuilt from it. The write is conditional on the row still being the broken one that was
    read, and paced: it changes an index key on the hot legacy partition.
    """
    repaired: list[dict[str, str]] = []
    interval = 1.0 / max_writes_per_second
    for key in anomaly_keys:
        table_key = {"PK": {"S": key["PK"]}, "SK": {"S": key["SK"]}}
        raw = client.get_item(TableName=table_name, Key=table_key, ConsistentRead=True).get("Item")
        if raw is None:
            continue  # deleted since the backfill saw it: nothing to repair
        row = deserialize(raw)
        if keys.person_anomaly(row) is None:
            continue  # someone repaired it meanwhile
        lease_key = {"PK": {"S": f"LEASE#{row['leaseId']}"}, "SK": {"S": "META"}}
        lease_raw = client.get_item(TableName=table_name, Key=lease_key, ConsistentRead=True).get(
            "Item"
        )
        if lease_raw is None:
            raise DemoError(f"anomalous saga {key} names lease {row['leaseId']!r}, which is gone")
        person = keys.validate_person_id(deserialize(lease_raw).get("personId"))
        names = {"#personId": "personId", "#gsi4sk": "GSI4SK"}
        values: dict[str, Any] = {
            ":person": person,
            ":sortKey": keys.gsi4sk(person, row["openedAt"]),
            ":readGsi4sk": row["GSI4SK"],
        }
        condition = [ROW_STILL_EXISTS, SORT_KEY_STILL_THE_ONE_READ]
        if "personId" in row:
            values[":readPersonId"] = row["personId"]
            condition.append(PERSON_STILL_THE_ONE_READ)
        else:
            condition.append(PERSON_STILL_MISSING)
        try:
            client.update_item(
                TableName=table_name,
                Key=table_key,
                UpdateExpression="SET #personId = :person, #gsi4sk = :sortKey",
                ConditionExpression=" AND ".join(condition),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=serialize(values),
            )
        except ClientError as err:
            if error_code(err) == "ConditionalCheckFailedException":
                continue  # changed by someone else since it was read: theirs wins
            raise
        repaired.append({"PK": key["PK"], "SK": key["SK"], "personId": person})
        time.sleep(interval)
    return repaired


def parity_summary(report: ParityReport) -> dict[str, Any]:
    document = report.to_dict()
    return {
        "ok": report.ok,
        "phase": document["phase"],
        "truthRows": document["truthRows"],
        "reads": document["reads"],
        "counts": document["counts"],
        "comparedWithSnapshot": document["comparedWithSnapshot"],
        "findings": {
            kind: document[kind][:10] for kind in ("missing", "extra", "misrouted", "changed")
        },
    }


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
    stages.note(_parity_line(migrating_parity))

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
    stages.note(_parity_line(sharded_parity))
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
    backfill_load = backfill_meter.summary(keys.INDEX_NAME)
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


def verify_against(
    client: Any, config: DemoConfig, snapshot: Snapshot, phase: Phase
) -> ParityReport:
    run = ParityVerifier(client, config.table_name, phase=phase, shard_count=config.shards).verify(
        snapshot=snapshot
    )
    if not run.report.ok:
        document = run.report.to_dict()
        raise DemoError(
            f"parity failed in phase {phase.value}: {document['counts']} "
            f"(first: {(document['missing'] + document['extra'] + document['misrouted'])[:3]})"
        )
    return run.report


def _parity_line(report: ParityReport) -> str:
    counts = report.to_dict()["counts"]
    return (
        f"parity {'identical' if report.ok else 'MISMATCH'} in phase {report.phase.value}: "
        f"{report.truth_rows} saga rows, findings {counts}"
    )


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ---- command line ---------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _interval(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH seconds, got {text!r}") from None
    return low, high


def parse_args(argv: Sequence[str] | None) -> DemoConfig:
    seed, mix = SeedSpec(), TrafficMix()
    parser = argparse.ArgumentParser(
        prog="python -m devkit.demo",
        description="Show the hot key of the renewal-saga index before and after sharding.",
        epilog="Defaults are documented in docs/demo.md.",
    )
    add = parser.add_argument
    add("--shards", type=int, default=DEFAULT_SHARD_COUNT, help="shard count N (power of two)")
    add("--duration", type=_positive_int, default=mix.duration_s, help="virtual seconds per replay")
    add("--open-sagas", type=int, default=seed.open_sagas)
    add("--terminal-sagas", type=int, default=seed.terminal_sagas)
    add("--persons", type=int, default=seed.persons)
    add("--anomalies", type=int, default=seed.anomalies, help="saga rows without personId")
    add("--property-managers", type=_positive_int, default=seed.property_managers)
    add("--seed", type=int, default=seed.seed, help="random seed of dataset and traffic")
    add("--poll-interval", type=_interval, default=mix.poll_interval_s, help="LOW,HIGH seconds")
    add("--sweep-period", type=_positive_int, default=60, help="seconds between sweep runs")
    add("--sweep-stagger", type=int, default=0, help="offset between the four sweeps, seconds")
    add("--transitions-per-second", type=_non_negative_float, default=mix.transitions_per_s)
    add("--cohort-size", type=int, default=mix.cohort_size)
    add("--cohort-period", type=_positive_int, default=mix.cohort_period_s)
    add("--inbound-per-second", type=_non_negative_float, default=mix.inbound_messages_per_s)
    add("--reads-per-message", type=int, default=mix.reads_per_message)
    add("--backfill-rate", type=float, default=100.0, help="backfill writes/s cap (total)")
    add("--backfill-segments", type=_positive_int, default=4)
    add("--verify-sample", type=_positive_int, default=50, help="persons in by-person parity")
    add("--workers", type=_positive_int, default=8, help="concurrent events per tick")
    add("--results-dir", type=Path, default=DEFAULT_RESULTS)
    add("--table", default=DEFAULT_TABLE)
    add("--no-chart", action="store_true", help="skip the PNG chart")
    args = parser.parse_args(argv)
    sweeps = tuple(
        SweepSpec(name, period_s=args.sweep_period, offset_s=n * args.sweep_stagger)
        for n, name in enumerate(SWEEP_NAMES)
    )
    return DemoConfig(
        shards=args.shards,
        seed=SeedSpec(
            open_sagas=args.open_sagas,
            terminal_sagas=args.terminal_sagas,
            persons=args.persons,
            anomalies=args.anomalies,
            property_managers=args.property_managers,
            seed=args.seed,
        ),
        traffic=TrafficMix(
            duration_s=args.duration,
            property_managers=args.property_managers,
            poll_interval_s=args.poll_interval,
            sweeps=sweeps,
            transitions_per_s=args.transitions_per_second,
            cohort_size=args.cohort_size,
            cohort_period_s=args.cohort_period,
            inbound_messages_per_s=args.inbound_per_second,
            reads_per_message=args.reads_per_message,
            seed=args.seed,
        ),
        backfill_rate=args.backfill_rate,
        backfill_segments=args.backfill_segments,
        verify_sample=args.verify_sample,
        workers=args.workers,
        table_name=args.table,
        results_dir=args.results_dir,
        chart=not args.no_chart,
    )


LOCAL_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# Never reach AWS: no profile, no session token, no endpoint but the local server's.
UNSET_ENVIRONMENT = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
)


@contextmanager
def local_credentials() -> Iterator[None]:
    """Dummy credentials for the local server only; the caller's environment is restored."""
    names = (*LOCAL_ENVIRONMENT, *UNSET_ENVIRONMENT)
    saved = {name: os.environ.get(name) for name in names}
    for name in UNSET_ENVIRONMENT:
        os.environ.pop(name, None)
    os.environ.update(LOCAL_ENVIRONMENT)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _configure_logging() -> None:
    # basicConfig leaves an already configured root logger (a test runner's) alone.
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main(
    argv: Sequence[str] | None = None,
    *,
    server_factory: Callable[[], DynaliteServer] = DynaliteServer,
) -> int:
    try:
        config = parse_args(argv).validate()
    except (InvalidInputError, ValueError) as err:
        print(f"demo: invalid arguments: {err}", file=sys.stderr)
        return EXIT_USAGE
    _configure_logging()
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    stages = Stages(total=9, console=console)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    server = server_factory()
    started = time.monotonic()
    report: dict[str, Any] | None = None
    failure = ""
    try:
        with local_credentials():
            template = load_template()
            console.print(f"starting {ENGINE} (a local DynamoDB-compatible server)")
            server.start()
            report = run_demo(config, server.endpoint_url, template, stages)
    except KeyboardInterrupt:
        failure = "interrupted"
    except (
        DemoError,
        ReplayError,
        SchemaError,
        SagaIndexError,
        ClientError,
        BotoCoreError,
    ) as err:
        failure = f"failed: {type(err).__name__}: {err}"
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
    if report is None:
        console.print(f"demo: {failure}; the local server is stopped, nothing is left running")
        return EXIT_INTERRUPTED if failure == "interrupted" else EXIT_FAILED
    console.print(f"done in {time.monotonic() - started:.0f} s; the local server is stopped")
    sys.stdout.write(render(report))
    sys.stdout.flush()
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
