"""The demo's final act: sharded(N) -> resharding -> sharded(2N), as docs/runbook.md re-shards.

Through the operator's commands, as the migration acts: a parity snapshot in sharded(N) (the
replay since the migration changed the table, so the pre-migration snapshot no longer holds), a
refused `phase set resharding --shards 4N` (two factors of two at once: exit 2, naming the
allowed values), `phase set resharding --shards 2N`, the backfill (dry run, then the run that
moves the rows whose key differs between the two layouts: about half), `verify --compare` in
resharding, `phase set sharded` (its checks pass), `drift` against sharded(2N), `verify
--compare` again, then the same traffic replayed on sharded(2N).
"""

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
from devkit.demo.operator import EXIT_USAGE, OperatorCli
from devkit.demo.report import drift_summary, layout_json, parity_summary
from devkit.demo.steps import (
    DemoError,
    backfill_dry_run,
    backfill_pass,
    drift_clean,
    parity_line,
    replay,
    set_sharded,
    snapshot_reads,
    verify_against,
    wait_until_effective,
)
from devkit.seed import EPOCH
from devkit.traffic.plan import Plan
from devkit.traffic.replay import ReplayStats
from saga_index.index import INDEX_NAME
from saga_index.layout_change.record import ControlStore, Phase
from saga_index_cli.backfill.local import control_poll_seconds

# The sharded(N) parity snapshot, in the results directory (`verify --snapshot`).
RESHARD_SNAPSHOT_FILE = "pre-reshard-snapshot.json"
REASON_RESHARDING = "make demo: split every shard in two (N -> 2N) for headroom"
REASON_BAD_COUNT = "make demo: try a shard count that is not a factor of two away"
REASON_RESHARDED = "make demo: re-shard backfill verified, parity identical; complete the move"


@dataclass(frozen=True)
class ReshardAct:
    """What the act measured: the report's `reshard` section and the replay on sharded(2N)."""

    section: dict[str, Any]
    load: LoadSummary
    stats: ReplayStats


def reshard_act(
    operator: OperatorCli,
    *,
    endpoint_url: str,
    config: DemoConfig,
    schema: TableSchema,
    plan: Plan,
    make_client: Callable[[], Any],
    snapshot: Path,
    opened_since: int = 0,
) -> ReshardAct:
    """Three numbered steps. `make_client()` returns a fresh boto3 client on the demo's server;
    `snapshot` is where the sharded(N) parity snapshot goes (replaced on every run);
    `opened_since`: the saga rows the sharded replay opened (said beside the new count)."""
    stages = operator.stages
    source, target = config.shards, config.reshard_to

    stages.step(f"re-shard {source} -> {target}: snapshot, phase resharding, backfill")
    baseline = snapshot_reads(operator, config, snapshot)
    stages.note(
        f"phase {baseline['phase']}: {baseline['truthRows']} saga rows (the sharded replay "
        f"opened {opened_since} more), "
        f"{len(baseline['persons'])} persons sampled; wrote {snapshot}"
    )
    refused_code = _start_resharding(operator, source, target)
    wait_until_effective(operator)
    dry = backfill_dry_run(operator, config)
    # The move's writes are metered as the migration's were: where they land, per key.
    meter = CapacityMeter(schema, reader=make_client())
    metered = meter.attach(make_client())
    control = ControlStore(make_client(), config.table_name)
    moved, seconds, source_rows = backfill_pass(
        metered,
        config,
        store=control,
        stages=stages,
        label="re-shard backfill",
        poll_seconds=control_poll_seconds(operator.timing),
    )
    if moved.anomalies or moved.skipped:
        raise DemoError(
            f"the re-shard left {moved.anomalies} anomalous and {moved.skipped} skipped row(s): "
            "every saga row on a shard key has a person"
        )
    share = moved.restamped / source_rows if source_rows else 0.0
    stages.note(
        f"moved {moved.restamped} of {source_rows} saga rows ({share * 100:.1f} %: the rows "
        f"whose shard under N={target} is the upper one)"
    )

    stages.step(f"complete: parity in resharding, phase set sharded, drift on N={target}, parity")
    resharding_parity = _parity_while_moving(operator, snapshot)
    completed = set_sharded(operator, REASON_RESHARDED)
    drift = drift_clean(operator, "the re-shard", count_shards=True)
    resharded_parity = verify_against(operator, snapshot)
    stages.note(parity_line(resharded_parity))

    stages.step(f"replay the same traffic against sharded(N={target})")
    # Two days later on the replay's wall clock: the same events, fresh timestamps.
    load, stats = replay(
        endpoint_url,
        config,
        schema,
        plan,
        phase=Phase.SHARDED,
        stages=stages,
        time_base=EPOCH + timedelta(days=2),
        shard_count=target,
        label=f"sharded(N={target})",
    )
    backfill_load = meter.summary(INDEX_NAME)
    section = {
        "fromShards": source,
        "toShards": target,
        "refusedShardCount": {"shards": source * 4, "exitCode": refused_code},
        "backfill": {
            "sourceRows": source_rows,
            "moved": moved.restamped,
            "movedShare": round(share, 4),
            "wouldMove": dry["wouldRestamp"],
            "skipped": moved.skipped,
            "anomalies": moved.anomalies,
            "scanned": moved.scanned,
            "seconds": round(seconds, 2),
            "rowsPerSecond": round(moved.restamped / seconds, 1) if seconds else None,
            "maxWritesPerSecond": config.backfill_rate,
            "segments": config.backfill_segments,
            "throttles": moved.throttles,
            "hottestKeyPeakWcu": backfill_load.peak_wcu_per_key,
        },
        "checksPassed": [c["name"] for c in completed["checks"] if c["passed"]],
        "parity": _parity_section(
            baseline, resharding_parity, resharded_parity, source=source, target=target
        ),
        "drift": drift_summary(drift),
    }
    return ReshardAct(section=section, load=load, stats=stats)


def _start_resharding(operator: OperatorCli, source: int, target: int) -> int:
    """`phase set resharding` with a shard count the move cannot reach (refused: its exit code
    is returned), then with the target's."""
    stages = operator.stages
    bad = operator.run(
        "phase",
        "set",
        "resharding",
        "--shards",
        str(source * 4),
        "--reason",
        REASON_BAD_COUNT,
        "--json",
        expect=(EXIT_USAGE,),
    )
    stages.note(f"REFUSED (exit {bad.code}): only a factor of two per move; nothing was written")
    started = operator.run(
        "phase",
        "set",
        "resharding",
        "--shards",
        str(target),
        "--reason",
        REASON_RESHARDING,
        "--json",
    ).json()
    stages.note(
        f"version {started['version']}: {started['routing']['writes']} written, "
        f"{' then '.join(started['routing']['reads'])} read"
    )
    return bad.code


def _parity_section(
    baseline: dict[str, Any],
    resharding: dict[str, Any],
    resharded: dict[str, Any],
    *,
    source: int,
    target: int,
) -> dict[str, Any]:
    """The re-shard section's "parity": before the move, while it ran and after it."""
    return {
        "ok": baseline["ok"] and resharded["ok"] and resharding["ok"],
        "summary": (
            f"{resharded['truthRows']} saga rows; all-sagas, all-open and "
            f"{len(baseline['persons'])} by-person reads identical to the base table in "
            f"sharded(N={source}) and compared with that snapshot in phases resharding and "
            f"sharded(N={target})"
        ),
        "before": parity_summary(baseline),
        "resharding": parity_summary(resharding),
        "sharded": parity_summary(resharded),
    }


def _parity_while_moving(operator: OperatorCli, snapshot: Path) -> dict[str, Any]:
    """`verify --compare` while the record is resharding (dual reads, source first). A mismatch
    stops the demo as any parity failure does."""
    run = operator.run("verify", "--compare", str(snapshot), "--json", expect=(0, 1))
    document = run.json()
    if run.code != 0 or not document["ok"]:
        raise DemoError(f"parity failed in phase resharding: {document['counts']}")
    operator.stages.note(parity_line(document))
    return document


def resharded_json(act: ReshardAct) -> dict[str, Any]:
    """The sharded(2N) layout's load, as report.json's `resharded` holds it."""
    return layout_json(act.load, replay=act.stats.to_json())
