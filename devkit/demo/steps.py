"""The demo's steps, one function each; run_demo (devkit.demo.pipeline) runs them in order."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from devkit.capacity.ledger import LoadSummary
from devkit.capacity.table_schema import TableSchema
from devkit.demo.config import DemoConfig
from devkit.demo.ui import Stages
from devkit.seed import EPOCH
from devkit.traffic.plan import Plan
from devkit.traffic.replay import ReplayStats, metered_replay
from saga_index.backfill.direction import Direction
from saga_index.backfill.local import backfill_locally
from saga_index.backfill.messages import BackfillRequest, BackfillSummary, SegmentCounts
from saga_index.backfill.readback import count_source_rows
from saga_index.model import Phase
from saga_index.names import INDEX_NAME
from saga_index.parity import ParityReport, ParityVerifier
from saga_index.parity_snapshot import Snapshot
from saga_index.repair import RepairError, RepairStatus, repair_anomaly


class DemoError(RuntimeError):
    """A migration gate did not pass: the demo stops before the next phase."""


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
    summary = meter.summary(INDEX_NAME)
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
    total = count_source_rows(
        client,
        config.table_name,
        index_name=INDEX_NAME,
        direction=Direction.FORWARD,
        shard_count=config.shards,
    )
    bar = stages.bar(label, max(total, 1))
    task = bar.task_ids[0]

    def on_progress(totals: SegmentCounts) -> None:
        bar.update(task, completed=min(totals.handled, total))

    @contextlib.contextmanager
    def showing_the_bar() -> Iterator[None]:
        with bar:
            yield
            bar.update(task, completed=total)

    outcome = backfill_locally(
        client,
        config.table_name,
        request,
        phase=Phase.MIGRATING,
        shard_count=config.shards,
        index_name=INDEX_NAME,
        on_progress=on_progress,
        while_running=showing_the_bar(),
    )
    run, summary, seconds = outcome.run, outcome.summary, outcome.seconds
    if not run.complete:
        raise DemoError(
            f"{label} did not complete: failures {run.failures or '-'}, "
            f"interrupted {run.interrupted}; running it again converges"
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
    """What the runbook asks of a human (`saga-index repair-anomaly --from-lease --apply`):
    give each anomalous saga row its lease's tenant as personId, and the GSI4SK built from it.

    A row deleted, repaired or changed by someone else since the backfill reported it is left
    alone. Paced: each repair changes an index key on the hot legacy partition.
    """
    repaired: list[dict[str, str]] = []
    interval = 1.0 / max_writes_per_second
    for key in anomaly_keys:
        try:
            result = repair_anomaly(client, table_name, key, dry_run=False)
        except RepairError as err:
            raise DemoError(f"anomalous saga {key}: {err}") from err
        if result.status is not RepairStatus.REPAIRED or result.person_id is None:
            continue
        repaired.append({"PK": key["PK"], "SK": key["SK"], "personId": result.person_id})
        time.sleep(interval)
    return repaired


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


def parity_line(report: ParityReport) -> str:
    counts = report.to_dict()["counts"]
    return (
        f"parity {'identical' if report.ok else 'MISMATCH'} in phase {report.phase.value}: "
        f"{report.truth_rows} saga rows, findings {counts}"
    )
