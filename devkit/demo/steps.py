"""The demo's steps, one function each; run_demo (devkit.demo.pipeline) runs them in order."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devkit.capacity.ledger import LoadSummary
from devkit.capacity.table_schema import TableSchema
from devkit.demo.config import DemoConfig
from devkit.demo.operator import EXIT_ANOMALIES, EXIT_OK, CommandRun, OperatorCli
from devkit.demo.ui import Stages
from devkit.seed import EPOCH
from devkit.traffic.drift_run import metered_drift_run
from devkit.traffic.plan import Plan
from devkit.traffic.replay import ReplayStats, metered_replay
from saga_index.index import INDEX_NAME
from saga_index.layout_change.backfill import (
    BackfillRequest,
    BackfillSummary,
    Move,
    SegmentCounts,
    TokenBucket,
    backfill_locally,
    count_source_rows,
    paced_bucket,
)
from saga_index.layout_change.record import BackfillDirection, ControlStore, Phase
from saga_index.store import RepairStatus
from saga_index_cli.backfill.local import local_holder
from saga_index_cli.failures import EXIT_RETRY_LATER


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
    shard_count: int | None = None,
    label: str | None = None,
) -> tuple[LoadSummary, ReplayStats]:
    """The plan through a repository and a writer in `phase` with `shard_count` (default the
    config's N), every request metered; `label` names the run (default the phase)."""
    duration = config.traffic.duration_s
    name = label or phase.value
    with stages.bar(f"{name} replay (virtual s)", duration) as bar:
        task = bar.task_ids[0]
        logged = [0]

        def on_tick(second: int, total: int) -> None:
            bar.update(task, completed=second + 1)
            if not stages.console.is_terminal and second + 1 >= logged[0] + total // 4:
                logged[0] = second + 1
                stages.note(f"{name} replay: {second + 1}/{total} virtual seconds")

        # At 2N = 32 an enumeration's parallel shard queries outnumber the replay client's
        # pool; urllib3 warns for every connection it discards (harmless: it opens another).
        with quiet("urllib3.connectionpool"):
            stats, meter = metered_replay(
                endpoint_url,
                config.table_name,
                schema,
                plan,
                phase=phase,
                shard_count=shard_count or config.shards,
                # The meter's run label is an identifier: "sharded(N=32)" -> "sharded_N_32".
                run_label="_".join("".join(c if c.isalnum() else " " for c in name).split()),
                time_base=time_base,
                workers=config.workers,
                on_tick=on_tick,
            )
        bar.update(task, completed=duration)
    summary = meter.summary(INDEX_NAME)
    if summary.hottest is not None:
        per_second = meter.ledger.series(INDEX_NAME).get(summary.hottest.partition_key, {})
        stats.timeline = {second: units[0] for second, units in sorted(per_second.items())}
    cohorts = stats.events.get("cohort", 0)
    if cohorts:
        stages.note(
            f"the replay opened {cohorts * config.traffic.cohort_size} new saga(s) (its cohort "
            f"walker: {cohorts} cohort(s) of {config.traffic.cohort_size}): the saga-row "
            "counts from here on include them"
        )
    stages.note(
        f"{stats.wall_seconds:.1f} s wall for {duration} virtual s, {meter.requests} requests "
        f"metered; hottest key {summary.hottest.partition_key if summary.hottest else '-'} "
        f"took {summary.hottest_key_share * 100:.1f} % of the index load, peak "
        f"{summary.peak_rcu_per_key:,.1f} RCU/s"
    )
    return summary, stats


def drift_run(
    endpoint_url: str, config: DemoConfig, schema: TableSchema, *, phase: Phase, stages: Stages
) -> dict[str, Any]:
    """One drift-guard run's index reads on the layout just replayed, metered at its pace
    (devkit.traffic.drift_run): a run every 5 minutes is part of the index's load."""
    load = metered_drift_run(
        endpoint_url, config.table_name, schema, phase=phase, shard_count=config.shards
    )
    stages.note(
        f"drift guard run ({phase.value}): {load.rcu:,.1f} RCU in {load.requests} requests, "
        f"at most {load.peak_rcu_per_key:,.1f} RCU/s on one key (paced at "
        f"{load.units_per_key:,.0f}), {load.paced_seconds:.2f} s at its pace"
    )
    return load.to_json()


@contextlib.contextmanager
def quiet(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    previous = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)


def backfill_dry_run(operator: OperatorCli, config: DemoConfig) -> dict[str, Any]:
    """`saga-index backfill --dry-run --json`: the move the record names, counted, nothing
    written and no lease taken. Exit 0, or 3 when it lists anomalies."""
    summary = operator.run(
        "backfill",
        "--dry-run",
        "--segments",
        str(config.backfill_segments),
        "--max-writes-per-second",
        f"{config.backfill_rate:g}",
        "--json",
        expect=(EXIT_OK, EXIT_ANOMALIES),
    ).json()
    if not summary["complete"]:
        raise DemoError(f"the backfill dry run did not complete: {summary}")
    operator.stages.note(
        f"dry run ({_layout_name(summary['source'])} -> {_layout_name(summary['target'])}): "
        f"scanned {summary['scanned']}, would re-stamp {summary['wouldRestamp']}, anomalies "
        f"{summary['anomalies']}"
    )
    return summary


def _layout_name(layout: Mapping[str, Any]) -> str:
    count = layout.get("shardCount")
    return f"{layout['kind']}({count})" if count else str(layout["kind"])


def backfill_pass(
    client: Any,
    config: DemoConfig,
    *,
    store: ControlStore,
    stages: Stages,
    label: str,
    poll_seconds: float,
) -> tuple[BackfillSummary, float, int]:
    """One forward backfill run as `saga-index backfill` runs it locally (backfill_locally:
    the record's move, under its lease, every segment on a local thread, then the read-back and
    the completion recorded in the record), on the demo's client so the meter prices it.

    `store` reads and writes the control record on a client of its own: the lease is not index
    load. Returns the summary, the run's seconds and the saga rows that were on the source
    layout's keys when it started.
    """
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=config.backfill_segments,
        max_writes_per_second=float(config.backfill_rate),
        dry_run=False,
    )
    move = Move.for_state(store.read(), request.direction)
    total = count_source_rows(client, config.table_name, index_name=INDEX_NAME, move=move)
    bar = stages.bar(label, max(total, 1))
    task = bar.task_ids[0]

    def on_progress(totals: SegmentCounts) -> None:
        bar.update(task, completed=min(totals.handled, total))

    @contextlib.contextmanager
    def showing_the_bar() -> Iterator[None]:
        with bar:
            yield
            bar.update(task, completed=total)

    # The run's own bucket (the one backfill_locally would make), kept to say what its pacer
    # chose.
    stop = threading.Event()
    bucket = paced_bucket(request, stop)
    outcome = backfill_locally(
        client,
        config.table_name,
        request,
        holder=local_holder(),
        store=store,
        poll_seconds=poll_seconds,
        index_name=INDEX_NAME,
        on_progress=on_progress,
        while_running=showing_the_bar(),
        stop=stop,
        bucket=bucket,
    )
    run, summary, seconds = outcome.run, outcome.summary, outcome.seconds
    if outcome.lease_lost is not None:
        raise DemoError(f"{label} lost its lease: {outcome.lease_lost}")
    if not run.complete:
        raise DemoError(
            f"{label} did not complete: failures {run.failures or '-'}, "
            f"interrupted {run.interrupted}; running it again converges"
        )
    if not summary.verified:
        message = summary.verification.message if summary.verification else "not verified"
        raise DemoError(f"{label}: {message}")
    if outcome.completion is None:
        raise DemoError(f"{label}: its completion was not recorded in the control record")
    stages.note(
        f"{label} ({outcome.move.describe()}, lease held by {outcome.ticket.holder}): scanned "
        f"{summary.scanned}, re-stamped {summary.restamped}, skipped {summary.skipped}, "
        f"anomalies {summary.anomalies} ({seconds:.1f} s)"
    )
    stages.note(pace_line(summary, seconds, bucket))
    assert summary.verification is not None
    stages.note(summary.verification.message)
    return summary, seconds, total


def pace_line(summary: BackfillSummary, seconds: float, bucket: TokenBucket) -> str:
    """The run's pace against its cap, the throttles its re-stamps met (each retried), and what
    its pacer chose: the pace at the end and why, and how often a throttle slowed it (each
    decrease: re-stamps kept off a full key instead of resent at the cap)."""
    throttles = f"{summary.throttles} throttled request(s) met and retried"
    if bucket.decreases:
        chosen = (
            f"the pacer slowed {bucket.decreases} time(s) on DynamoDB's throttles (lowest "
            f"{bucket.lowest_rate:,.1f}/s) rather than resend at the cap; now "
            f"{bucket.pace().describe()}"
        )
    else:
        chosen = f"no throttle slowed the pacer: {bucket.pace().describe()}, nothing to avoid"
    if not summary.restamped:
        return (
            f"pace: nothing to re-stamp (cap {summary.max_writes_per_second:g}/s); {throttles}; "
            f"{chosen}"
        )
    pace = summary.restamped / seconds if seconds > 0 else 0.0
    return (
        f"pace {pace:,.1f} re-stamps/s under a cap of {summary.max_writes_per_second:g}/s; "
        f"{throttles}; {chosen}"
    )


def wait_until_effective(operator: OperatorCli) -> dict[str, Any]:
    """`saga-index phase show --wait --json`: the record once effectiveAt has passed, as the
    runbook waits for it (a backfill started earlier is refused: writers that still stamp the
    old key would race it)."""
    record = operator.run("phase", "show", "--wait", "--json").json()
    if not record["effective"]:
        raise DemoError(f"phase show --wait returned before effectiveAt: {record}")
    return record


def completing_move(
    operator: OperatorCli, phase: str, *args: str, expect: Sequence[int] = (EXIT_OK,)
) -> CommandRun:
    """`saga-index phase set PHASE ARGS` for a move that completes: told to retry later (exit 5:
    writes keyed on the source layout may still land until retryAt, the settled switch), it
    waits until retryAt and runs the same command again."""
    command = ("phase", "set", phase, *args)
    run = operator.run(*command, expect=(*expect, EXIT_RETRY_LATER))
    if run.code != EXIT_RETRY_LATER:
        return run
    retry_at = run.json()["retryAt"]
    wait = datetime.fromisoformat(retry_at.replace("Z", "+00:00")) - datetime.now(UTC)
    seconds = max(0.0, wait.total_seconds())
    operator.stages.note(f"waiting {seconds:.1f} s for the settled switch ({retry_at})")
    time.sleep(seconds + 0.05)
    return operator.run(*command, expect=expect)


def set_sharded(operator: OperatorCli, reason: str) -> dict[str, Any]:
    """`saga-index phase set sharded --json` (each check noted), then wait out effectiveAt."""
    stages = operator.stages
    document = completing_move(operator, "sharded", "--reason", reason, "--json").json()
    for check in document["checks"]:
        stages.note(f"check {check['name']}: {'passed' if check['passed'] else 'FAILED'}")
    stages.note(
        f"version {document['version']}: every reader and writer on {document['routing']['writes']}"
    )
    wait_until_effective(operator)
    return document


def drift_clean(operator: OperatorCli, after: str, *, count_shards: bool = False) -> dict[str, Any]:
    """`saga-index drift --json`; DemoError unless it exits 0 and reports healthy."""
    run = operator.run("drift", "--json", expect=(0, 1))
    drift = run.json()
    if run.code != 0 or not drift["healthy"]:
        raise DemoError(f"drift after {after}: {drift['findings']}")
    shards = f" over {len(drift['rowsPerShard'])} shards" if count_shards else ""
    operator.stages.note(
        f"clean: legacy rows {drift['legacyRows']}, misrouted {drift['misroutedRows']}, "
        f"unindexed {drift['unindexedRows']}, stray {drift['strayRows']}, shard skew "
        f"{drift['shardSkew']:.2f}{shards}"
    )
    return drift


def repair_anomalies(
    operator: OperatorCli,
    anomaly_keys: Sequence[dict[str, str]],
    *,
    max_writes_per_second: float = 10.0,
) -> list[dict[str, str]]:
    """What the runbook asks of a human for each anomaly the backfill lists:
    `saga-index repair-anomaly --pk PK --sk SK --from-lease --apply` (personId from the saga's
    lease, GSI4SK rebuilt from it, conditioned on the row still being the one read).

    Paced: each repair changes an index key on the hot legacy partition.
    """
    repaired: list[dict[str, str]] = []
    interval = 1.0 / max_writes_per_second
    for key in anomaly_keys:
        result = operator.run(
            "repair-anomaly", "--pk", key["PK"], "--sk", key["SK"], "--from-lease", "--apply"
        ).json()
        if result["status"] != RepairStatus.REPAIRED.value or not result.get("write"):
            continue
        repaired.append({"PK": key["PK"], "SK": key["SK"], "personId": result["write"]["personId"]})
        time.sleep(interval)
    return repaired


def snapshot_reads(operator: OperatorCli, config: DemoConfig, snapshot: Path) -> dict[str, Any]:
    """`saga-index verify --snapshot SNAPSHOT --json` into a fresh file (the CLI never
    overwrites a snapshot): the parity baseline the later `verify --compare` runs read."""
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.unlink(missing_ok=True)
    return operator.run(
        "verify",
        "--snapshot",
        str(snapshot),
        "--sample",
        str(config.verify_sample),
        "--seed",
        str(config.seed.seed),
        "--json",
    ).json()


def verify_against(operator: OperatorCli, snapshot: Path) -> dict[str, Any]:
    """`saga-index verify --compare SNAPSHOT --json`: the reads of the record's state against
    the base table and the pre-migration snapshot; DemoError unless identical."""
    run = operator.run("verify", "--compare", str(snapshot), "--json", expect=(0, 1))
    document = run.json()
    if run.code != 0 or not document["ok"]:
        raise DemoError(
            f"parity failed in phase {document['phase']}: {document['counts']} "
            f"(first: {(document['missing'] + document['extra'] + document['misrouted'])[:3]})"
        )
    return document


def parity_line(document: Mapping[str, Any]) -> str:
    return (
        f"parity {'identical' if document['ok'] else 'MISMATCH'} in phase "
        f"{document['phase']}: {document['truthRows']} saga rows, findings "
        f"{document['counts']}"
    )
