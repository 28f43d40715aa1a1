"""run_demo(): the demo's steps in the runbook's order, and the report they add up to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from devkit.capacity.ledger import LoadSummary
from devkit.capacity.meter import CapacityMeter
from devkit.capacity.table_schema import TableSchema
from devkit.demo.config import DemoConfig
from devkit.demo.open_index import open_index_act
from devkit.demo.operator import EXIT_REFUSED, OperatorCli
from devkit.demo.report import drift_summary, improvement, layout_json, parity_summary, write_chart
from devkit.demo.reshard import RESHARD_SNAPSHOT_FILE, ReshardAct, reshard_act, resharded_json
from devkit.demo.steps import (
    DemoError,
    backfill_dry_run,
    backfill_pass,
    completing_move,
    drift_clean,
    drift_run,
    parity_line,
    repair_anomalies,
    replay,
    set_sharded,
    snapshot_reads,
    verify_against,
    wait_until_effective,
)
from devkit.demo.ui import Stages
from devkit.results import write_json
from devkit.schema import create_table
from devkit.seed import EPOCH, build_dataset, seed_table
from devkit.traffic.plan import Plan, build_plan
from devkit.traffic.replay import ReplayStats
from saga_index.index import INDEX_NAME, keys
from saga_index.layout_change.backfill import BackfillSummary
from saga_index.layout_change.record import DEFAULT_TIMING, ControlStore, ControlTiming, Phase
from saga_index.store.dynamo import make_client
from saga_index_cli.backfill.local import control_poll_seconds

# The pre-migration parity snapshot, in the results directory (`verify --snapshot`).
SNAPSHOT_FILE = "pre-migration-snapshot.json"
REASON_MIGRATING = "make demo: start the migration to sharded GSI4 keys (ADR-0085)"
REASON_TOO_EARLY = "make demo: try to complete the migration before any backfill"
REASON_SHARDED = "make demo: backfill verified, parity identical; complete the migration"


@dataclass
class Clients:
    endpoint_url: str

    def plain(self, max_attempts: int = 10) -> Any:
        return make_client(
            region="us-east-1", endpoint_url=self.endpoint_url, max_attempts=max_attempts
        )


def run_demo(
    config: DemoConfig,
    endpoint_url: str,
    template: dict[str, Any],
    stages: Stages,
    *,
    engine_stats: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The demo's steps (devkit.demo); `engine_stats`: the proxy's counts ({} when raw)."""
    clients = Clients(endpoint_url)
    table = config.table_name
    schema = TableSchema.from_template(template, table)
    operator = OperatorCli(endpoint_url, table, stages)
    shards = str(config.shards)
    plan, seeded = _seed(clients.plain(), config, template, stages)

    stages.step("replay the traffic against the LEGACY layout through the capacity meter")
    legacy, legacy_stats = replay(
        endpoint_url, config, schema, plan, phase=Phase.LEGACY, stages=stages
    )
    legacy_drift = drift_run(endpoint_url, config, schema, phase=Phase.LEGACY, stages=stages)

    snapshot, baseline = _snapshot_step(
        operator, config, stages, rows_since(seeded, legacy_stats, config)
    )

    _open_migration(operator, shards, stages)

    stages.step("phase sharded BEFORE the backfill: refused by its preconditions")
    refused = refuse_sharded(operator)

    backfill = _backfill_and_repair(operator, config, clients, schema, stages)

    stages.step("cutover: parity in migrating, phase sharded (its checks pass), drift, parity")
    migrating_parity = verify_against(operator, snapshot)
    stages.note(parity_line(migrating_parity))
    set_sharded(operator, REASON_SHARDED)
    drift = drift_clean(operator, "phase sharded")
    sharded_parity = verify_against(operator, snapshot)
    stages.note(parity_line(sharded_parity))
    for item in phase_history(operator):
        stages.note(history_line(item))

    stages.step("replay the same traffic against the SHARDED layout")
    # A day later on the replay's wall clock: the same events, fresh timestamps.
    sharded_load, sharded_stats = replay(
        endpoint_url,
        config,
        schema,
        plan,
        phase=Phase.SHARDED,
        stages=stages,
        time_base=EPOCH + timedelta(days=1),
    )
    sharded_drift = drift_run(endpoint_url, config, schema, phase=Phase.SHARDED, stages=stages)

    act, open_index = _live_acts(
        operator, clients, config, schema, plan, opened_since=opened_by(sharded_stats, config)
    )

    history = _history_step(operator, stages)
    legacy_json = layout_json(legacy, replay=legacy_stats.to_json(), driftGuard=legacy_drift)
    sharded_json = layout_json(
        sharded_load, replay=sharded_stats.to_json(), driftGuard=sharded_drift
    )
    resharded = resharded_json(act)
    report: dict[str, Any] = {
        "legacy": legacy_json,
        "sharded": sharded_json,
        "resharded": resharded,
        "improvement": improvement(legacy_json, sharded_json),
        # The same ratios, sharded(N) / sharded(2N): what the split bought.
        "reshardImprovement": improvement(sharded_json, resharded),
        "parity": _parity_section(migrating_parity, sharded_parity, baseline),
        "backfill": backfill.section(config),
        "drift": drift_summary(drift),
        "reshard": act.section,
        "openIndex": open_index,
        "refusedSharded": refused,
        "phaseHistory": history,
        "control": _control_section(operator),
        "config": config.to_json(),
        "engine": engine_section(engine_stats() if engine_stats else {}, config.table_name),
        "notes": list(NOTES),
    }
    stages.note(engine_line(report["engine"]))
    timelines = {
        "legacy": legacy_stats.timeline,
        f"sharded N={config.shards}": sharded_stats.timeline,
    }
    _write_report(
        report, config, stages, loads=(legacy, sharded_load, act.load), timelines=timelines
    )
    return report


def _live_acts(
    operator: OperatorCli,
    clients: Clients,
    config: DemoConfig,
    schema: TableSchema,
    plan: Plan,
    *,
    opened_since: int,
) -> tuple[ReshardAct, dict[str, Any]]:
    """The live moves after the migration: the re-shard N -> 2N, then the open-saga index
    added (its report section)."""
    act = reshard_act(
        operator,
        endpoint_url=clients.endpoint_url,
        config=config,
        schema=schema,
        plan=plan,
        make_client=clients.plain,
        snapshot=Path(_relative(config.results_dir / RESHARD_SNAPSHOT_FILE)),
        opened_since=opened_since,
    )
    open_index = open_index_act(
        operator, config=config, schema=schema, plan=plan, make_client=clients.plain
    )
    return act, open_index


def _history_step(operator: OperatorCli, stages: Stages) -> list[dict[str, Any]]:
    """The last step's start: the record's history, its last two changes shown."""
    stages.step("the record's history, then the report")
    history = phase_history(operator)
    for item in history[-2:]:
        stages.note(history_line(item))
    return history


def _snapshot_step(
    operator: OperatorCli, config: DemoConfig, stages: Stages, why_rows: str
) -> tuple[Path, dict[str, Any]]:
    """`verify --snapshot` before the migration: the parity baseline, and where it went."""
    stages.step("snapshot the reads before the migration (parity baseline)")
    # Shown and passed as an operator would type it: relative to the working directory.
    snapshot = Path(_relative(config.results_dir / SNAPSHOT_FILE))
    baseline = snapshot_reads(operator, config, snapshot)
    stages.note(
        f"phase {baseline['phase']} (no record yet: never migrated); "
        f"{baseline['truthRows']} saga rows ({why_rows}), "
        f"{len(baseline['persons'])} persons sampled; wrote {snapshot}"
    )
    return snapshot, baseline


def engine_section(stats: dict[str, Any], table: str) -> dict[str, Any]:
    """The report's "engine" section: what the semantics proxy refused over the whole demo."""
    if not stats:
        return {"proxy": False}
    counts = stats.get("tables", {}).get(table, {})
    return {
        "proxy": True,
        "options": stats.get("options", {}),
        "transactions": counts.get("transactions", 0),
        "cancelledTransactions": counts.get("cancelledTransactions", 0),
        "conflicts": counts.get("conflicts", {}),
        "throttles": counts.get("throttles", {}),
        "throttledKeys": stats.get("throttledKeys", [])[:5],
    }


def engine_line(section: dict[str, Any]) -> str:
    """The engine's counts in one line."""
    if not section["proxy"]:
        return "engine: dynalite alone (--raw-engine): nothing was judged by DynamoDB's rules"
    throttles = sum(section["throttles"].values())
    conflicts = sum(section["conflicts"].values())
    keys = ", ".join(
        f"{k['key']} on {k['target']} ({k['refused']})" for k in section["throttledKeys"]
    )
    return (
        f"engine: the semantics proxy served {section['transactions']} transaction(s) "
        f"(the backfill's fenced re-stamps and its fence slots), refused "
        f"{conflicts} request(s) for a transaction conflict and throttled {throttles} at a "
        f"per-key ceiling{': ' + keys if keys else ''}"
    )


def _open_migration(operator: OperatorCli, shards: str, stages: Stages) -> None:
    stages.step("phase migrating: writers stamp the shard keys, readers read both")
    migrating = operator.run(
        "phase", "set", "migrating", "--shards", shards, "--reason", REASON_MIGRATING, "--json"
    ).json()
    stages.note(
        f"version {migrating['version']}: {migrating['routing']['writes']} written, "
        f"{' then '.join(migrating['routing']['reads'])} read; effectiveAt "
        f"{migrating['effectiveAt']}"
    )
    stages.note(timing_note(operator.timing))


def _control_section(operator: OperatorCli) -> dict[str, Any]:
    """The report's "control" section: the demo's timing and every command it ran."""
    return {
        "timing": timing_json(operator.timing),
        "commands": [{"command": run.command, "exitCode": run.code} for run in operator.history],
    }


def _parity_section(
    migrating: dict[str, Any], sharded: dict[str, Any], baseline: dict[str, Any]
) -> dict[str, Any]:
    """The report's "parity" section: both comparisons with the pre-migration snapshot."""
    return {
        "ok": migrating["ok"] and sharded["ok"],
        "summary": (
            f"{migrating['truthRows']} saga rows; all-sagas, all-open and "
            f"{len(baseline['persons'])} by-person reads compared with the pre-migration "
            "snapshot in phases migrating and sharded"
        ),
        "migrating": parity_summary(migrating),
        "sharded": parity_summary(sharded),
    }


def _write_report(
    report: dict[str, Any],
    config: DemoConfig,
    stages: Stages,
    *,
    loads: tuple[LoadSummary, LoadSummary, LoadSummary],
    timelines: dict[str, dict[int, float]] | None = None,
) -> None:
    """report.json, and the chart of the three layouts' loads unless the config turns it off."""
    json_path = write_json(report, config.results_dir / "report.json")
    stages.note(f"wrote {_relative(json_path)}")
    if config.chart:
        legacy, sharded_load, resharded = loads
        chart = write_chart(
            legacy,
            sharded_load,
            config.results_dir / "partition-load.png",
            resharded=resharded,
            timelines=timelines,
            title=(
                "Renewal-saga index: peak load per partition key, legacy vs "
                f"N={config.shards} vs N={config.reshard_to}"
            ),
        )
        stages.note(f"wrote {_relative(chart)}")


def opened_by(stats: ReplayStats, config: DemoConfig) -> int:
    """The saga rows a replay added: its cohort walker opens `cohort_size` sagas a cohort."""
    return stats.events.get("cohort", 0) * config.traffic.cohort_size


def rows_since(seeded: int, stats: ReplayStats, config: DemoConfig) -> str:
    """Why the saga-row count is not the seed's: what the legacy replay opened."""
    opened = opened_by(stats, config)
    return (
        f"the {seeded} seeded and the {opened} the legacy replay's cohort walker opened: "
        f"{stats.events.get('cohort', 0)} cohort(s) of {config.traffic.cohort_size}"
    )


def _seed(
    client: Any, config: DemoConfig, template: dict[str, Any], stages: Stages
) -> tuple[Plan, int]:
    """The first step: the table, seeded in the legacy layout, the traffic plan, and the saga
    rows seeded."""
    table = config.table_name
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
    return plan, seeded.saga_rows


@dataclass
class _Backfill:
    """The migration's two backfill passes (before and after the repair) and their meter."""

    dry: dict[str, Any]
    first: BackfillSummary
    first_seconds: float
    second: BackfillSummary
    repaired: list[dict[str, str]]
    meter: CapacityMeter

    def section(self, config: DemoConfig) -> dict[str, Any]:
        """The report's "backfill" section."""
        first, second, first_seconds, dry, repaired = (
            self.first,
            self.second,
            self.first_seconds,
            self.dry,
            self.repaired,
        )
        legacy_key = next(
            (
                p
                for p in self.meter.summary(INDEX_NAME).partitions
                if p.partition_key == keys.LEGACY_GSI4PK
            ),
            None,
        )
        return {
            "restamped": first.restamped,
            "skipped": first.skipped,
            "anomalies": first.anomalies,
            "anomalyKeys": first.anomaly_keys,
            "scanned": first.scanned,
            "wouldRestamp": dry["wouldRestamp"],
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
        }


def _backfill_and_repair(
    operator: OperatorCli,
    config: DemoConfig,
    clients: Clients,
    schema: TableSchema,
    stages: Stages,
) -> _Backfill:
    """The backfill's dry run and run, the repair of the anomalies it reported, and the second
    pass that re-stamps them; DemoError when an anomaly is still on the legacy key."""
    stages.step("backfill: dry run, then the run (rate-capped, under the record's lease)")
    wait_until_effective(operator)
    dry = backfill_dry_run(operator, config)
    # The backfill's writes are metered on the real clock: its load on the legacy key.
    backfill_meter = CapacityMeter(schema, reader=clients.plain())
    metered = backfill_meter.attach(clients.plain())
    control = ControlStore(clients.plain(), config.table_name)
    poll = control_poll_seconds(operator.timing)
    first, first_seconds, _ = backfill_pass(
        metered, config, store=control, stages=stages, label="backfill", poll_seconds=poll
    )

    stages.step("repair the anomalous rows the backfill reported, then backfill them")
    repaired = repair_anomalies(operator, first.anomaly_keys)
    stages.note(f"repaired {len(repaired)} row(s) from their lease's tenant")
    second, _, _ = backfill_pass(
        metered, config, store=control, stages=stages, label="second pass", poll_seconds=poll
    )
    assert second.verification is not None
    if second.verification.remaining_anomalies or second.anomalies:
        raise DemoError(
            f"{second.verification.remaining_anomalies} anomalous row(s) remain on the legacy "
            "key after the repair: the drift guard cannot reach zero"
        )
    status = operator.run("status", "--json").json()
    stages.note(status_line(status))
    return _Backfill(dry, first, first_seconds, second, repaired, backfill_meter)


# What the report's numbers are and how the demo came by them.
NOTES: tuple[str, ...] = (
    "Capacity units are computed by devkit.capacity from item sizes by DynamoDB's "
    "documented rules, not reported by the server: a local server has no partitions.",
    "peakRcuPerKey/peakWcuPerKey: the highest units any one index partition key took "
    "in one second of the replay clock; headroom: how many times the traffic could "
    "grow before that key reaches 3,000 RCU/s or 1,000 WCU/s.",
    "The migration state was changed only by `saga-index phase set`; control.commands "
    "lists every saga-index command the demo ran, with its exit code. The backfill "
    "passes (the migration's two and the re-shard's) call "
    "layout_change.backfill.local.backfill_locally, what `saga-index backfill` runs "
    "without --state-machine-arn (the record's lease and completion included), so "
    "that the capacity meter can price their writes. control.timing is the demo's "
    "short T (production: T = 30 s).",
    "resharded: the same plan replayed on sharded(2N) after the re-shard (timestamps two "
    "days later); reshard.parity compares with a snapshot taken in sharded(N) after "
    "the sharded replay, since that replay changed the table.",
    "openIndex: the open-saga index added live by `saga-index open-index set adding`, "
    "`open-index backfill` and `open-index set open` while the plan's traffic ran (its "
    "cohort walker held, so the open set keeps its size), writers and readers following the "
    "record; before/after: one round of the sweeps' all-open enumerations along the record's "
    "routing, metered by the capacity meter on every index they read.",
)


def refuse_sharded(operator: OperatorCli) -> dict[str, Any]:
    """`phase set sharded` while every row is still on the legacy key: exit 3, nothing written.
    A refusal with any other outcome is a demo failure (the guard did not guard)."""
    run = completing_move(
        operator,
        "sharded",
        "--reason",
        REASON_TOO_EARLY,
        "--recheck-delay",
        "0",
        "--json",
        expect=(EXIT_REFUSED,),
    )
    document = run.json()
    if document.get("refused") is not True or not document.get("failed"):
        raise DemoError(f"`{run.command}` exited {run.code} without a refusal: {document}")
    operator.stages.note(f"REFUSED (exit {run.code}); nothing was written. Failed checks:")
    for check in document["failed"]:
        # The CLI printed each detail with its example rows; the gist is enough here.
        gist = check["detail"].split(" (e.g.")[0]
        operator.stages.note(f"  {check['name']}: {gist}")
    return {"refused": True, "exitCode": run.code, "failed": document["failed"]}


def timing_note(timing: ControlTiming) -> str:
    production = DEFAULT_TIMING
    return (
        f"demo timing: T {timing.cache_seconds:g} s + grace {timing.stale_grace_seconds:g} s + "
        f"margin {timing.in_flight_margin_seconds:g} s, so effectiveAt = changedAt + "
        f"{timing.effective_delay.total_seconds():g} s (every reader here re-reads the record "
        f"per command); production keeps T = {production.cache_seconds:g} s: changedAt + "
        f"{production.effective_delay.total_seconds():g} s"
    )


def timing_json(timing: ControlTiming) -> dict[str, float]:
    return {
        "cacheSeconds": timing.cache_seconds,
        "staleGraceSeconds": timing.stale_grace_seconds,
        "inFlightMarginSeconds": timing.in_flight_margin_seconds,
        "effectiveDelaySeconds": timing.effective_delay.total_seconds(),
        "productionCacheSeconds": DEFAULT_TIMING.cache_seconds,
        "productionEffectiveDelaySeconds": DEFAULT_TIMING.effective_delay.total_seconds(),
    }


HISTORY_KEYS = (
    "version",
    "from",
    "to",
    "changedBy",
    "changedAt",
    "effectiveAt",
    "reason",
    "checksPassed",
    "checksForced",
    "moved",
    "change",
)


def phase_history(operator: OperatorCli) -> list[dict[str, Any]]:
    """`saga-index phase show --history --json`: every change of the record, oldest first."""
    shown = operator.run("phase", "show", "--history", "--json").json()
    return [history_item(item) for item in shown["history"]]


def history_item(item: dict[str, Any]) -> dict[str, Any]:
    """One transition of `phase show --history --json`, as report.json's phaseHistory lists it."""
    return {key: item[key] for key in HISTORY_KEYS}


def history_line(item: dict[str, Any]) -> str:
    checks = ", ".join(item["checksPassed"]) or "none needed"
    forced = f"; FORCED {', '.join(item['checksForced'])}" if item["checksForced"] else ""
    return (
        f"history v{item['version']}: {item['change']} at {item['changedAt']} "
        f"by {item['changedBy']} (checks passed: {checks}{forced})"
    )


def status_line(status: dict[str, Any]) -> str:
    run = status["backfill"]["lastRun"]
    rows = status["rows"]
    parts = [f"status: phase {status['phase']} v{status['version']}"]
    if rows and rows.get("counted"):
        parts.append(f"legacy key {rows['legacy']} rows, shard keys {rows['sharded']}")
    if run:
        parts.append(
            f"last backfill {run['direction']} restamped {run['restamped']}, "
            + ("verified" if run["verified"] else "NOT verified")
        )
    next_move = status["backfill"]["nextMove"]
    if next_move:
        check = next_move["backfillCheck"]
        parts.append(
            f"{check['name']} for `phase set {next_move['to']}` "
            + ("passes" if check["passed"] else "FAILS")
        )
    return "; ".join(parts)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
