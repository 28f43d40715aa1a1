"""`saga-index status`: the migration on one screen.

The record (phase, version, effectiveAt), the backfill's lease, throttle, pause flag and last
run, how many rows sit on each side (COUNT queries), and on request the drift checks and the
deployed alarms' states. Everything comes from the record and the table as they are now: the
global --phase/--shards do not apply.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import click
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from rich.console import Console
from rich.table import Table

from saga_index.index import keys
from saga_index.index.errors import SagaIndexError
from saga_index.index.layout import StatePhase
from saga_index.index.names import DEFAULT_SHARD_COUNT, INDEX_NAME, STACK_NAME
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record.record import format_time
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    RecordCondition,
)
from saga_index.layout_change.transitions.rules import check_backfill
from saga_index.store.repository import count_partition
from saga_index_cli.context import (
    CliContext,
    emit,
    json_option,
    pass_cli,
    record_shard_count,
    service_endpoint_option,
)
from saga_index_cli.phase import layout_document, record_document

log = logging.getLogger("saga_index.cli")

EXIT_OK, EXIT_MISSING = 0, 1
# DescribeAlarms is one call per 100 alarms; a shell without AWS access must not hang on it.
_CLOUDWATCH_CONFIG = Config(
    connect_timeout=3, read_timeout=5, retries={"total_max_attempts": 2, "mode": "standard"}
)
_COUNT_WORKERS = 16


# ---- the parts ---------------------------------------------------------------------------------


def lease_document(lease: Lease | None, now: datetime) -> dict[str, Any] | None:
    if lease is None:
        return None
    return {
        "holder": lease.holder,
        "direction": lease.direction.value,
        "acquiredAt": format_time(lease.acquired_at),
        "heartbeatAt": format_time(lease.heartbeat_at),
        "expiresAt": format_time(lease.expires_at),
        "live": lease.is_live(now),
        "stateVersion": lease.state_version,
    }


def completion_document(run: BackfillCompletion | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "direction": run.direction.value,
        "source": layout_document(run.source),
        "target": layout_document(run.target),
        "stateVersion": run.state_version,
        "startedAt": format_time(run.started_at),
        "completedAt": format_time(run.completed_at),
        "scanned": run.scanned,
        "restamped": run.restamped,
        "anomalies": run.anomalies,
        "complete": run.complete,
        "verified": run.verified,
        "holder": run.holder,
    }


# The move that completes each moving phase, and the backfill direction it needs.
_COMPLETING: Mapping[StatePhase, tuple[StatePhase, BackfillDirection]] = {
    StatePhase.MIGRATING: (StatePhase.SHARDED, BackfillDirection.FORWARD),
    StatePhase.ROLLING_BACK: (StatePhase.LEGACY, BackfillDirection.ROLLBACK),
    StatePhase.RESHARDING: (StatePhase.SHARDED, BackfillDirection.FORWARD),
}


def backfill_document(state: ControlState, now: datetime) -> dict[str, Any]:
    """Lease, throttle, pause, last run, and whether that run satisfies the next completing
    move's backfill-verified check (the other checks run only in `phase set`)."""
    next_move = None
    if state.phase in _COMPLETING and state.condition is RecordCondition.PRESENT:
        to_phase, direction = _COMPLETING[state.phase]
        next_move = {
            "to": to_phase.value,
            "backfillCheck": check_backfill(state, direction).to_json(),
        }
    return {
        "lease": lease_document(state.lease, now),
        "maxWritesPerSecond": state.backfill_max_writes_per_second,
        "paused": state.backfill_paused,
        "lastRun": completion_document(state.last_backfill),
        "nextMove": next_move,
    }


def row_counts(cli: CliContext, state: ControlState) -> dict[str, Any]:
    """Rows on the legacy key and on each shard key of the record's N (16 when it names none,
    as the drift guard watches; while resharding the larger of its two, so a merge's rows
    still on the upper keys are counted): one COUNT Query per key, read to its last page."""
    table = cli.require_table()
    shard_count = max(
        state.layout.shard_count or 0, record_shard_count(state) or DEFAULT_SHARD_COUNT
    )
    shard_keys = keys.all_shard_gsi4pks(shard_count)

    def count(gsi4pk: str) -> int:
        return count_partition(cli.client, table, gsi4pk, index_name=INDEX_NAME)[0]

    try:
        with ThreadPoolExecutor(max_workers=_COUNT_WORKERS) as pool:
            legacy = pool.submit(count, keys.LEGACY_GSI4PK)
            per_shard = list(pool.map(count, shard_keys))
            legacy_rows = legacy.result()
    except (ClientError, BotoCoreError) as err:
        log.warning("could not count the rows: %s", err)
        return {"counted": False, "error": f"{type(err).__name__}: {err}"}
    return {
        "counted": True,
        "legacy": legacy_rows,
        "sharded": sum(per_shard),
        "shardCount": shard_count,
        "perShard": {str(n): rows for n, rows in enumerate(per_shard)},
    }


_DRIFT_SUMMARY = (
    "healthy",
    "findings",
    "controlRecordMissing",
    "legacyRows",
    "shardedRows",
    "unexpectedLegacyRows",
    "unexpectedShardedRows",
    "misroutedRows",
    "anomalousRows",
    "shardSkew",
)


def drift_summary(cli: CliContext, state: ControlState) -> dict[str, Any]:
    """The drift guard's every-run checks against the record's state (no base-table scan:
    `saga-index drift` adds it)."""
    try:
        report = DriftChecker(cli.client, cli.require_table(), state=state).check(
            scan_unindexed=False
        )
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not run the drift checks: %s", err)
        return {"checked": False, "error": f"{type(err).__name__}: {err}"}
    full = report.to_dict()
    return {"checked": True, **{key: full[key] for key in _DRIFT_SUMMARY}}


def alarm_states(cli: CliContext, prefix: str, endpoint_url: str | None) -> dict[str, Any]:
    """The deployed alarms whose names start with `prefix` (CloudWatch DescribeAlarms). Never
    fails the command: no credentials, no network or a local table is reported, not raised."""
    out: dict[str, Any] = {"checked": False, "prefix": prefix}
    if cli.endpoint_url and not endpoint_url:
        out["error"] = (
            "skipped: DynamoDB has its own endpoint (--endpoint-url, a local server?) and "
            "CloudWatch none (--cloudwatch-endpoint-url or $AWS_ENDPOINT_URL_CLOUDWATCH)"
        )
        return out
    try:
        cloudwatch = cli.aws_client(
            "cloudwatch", endpoint_url=endpoint_url, config=_CLOUDWATCH_CONFIG
        )
        alarms: list[dict[str, Any]] = []
        for page in cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        ):
            for alarm in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]:
                updated = alarm.get("StateUpdatedTimestamp")
                alarms.append(
                    {
                        "name": alarm["AlarmName"],
                        "state": alarm.get("StateValue"),
                        "reason": alarm.get("StateReason"),
                        "updatedAt": format_time(updated) if updated else None,
                        "actionsEnabled": alarm.get("ActionsEnabled"),
                    }
                )
    except (ClientError, BotoCoreError) as err:
        log.warning("could not read the alarms: %s", err)
        out["error"] = f"{type(err).__name__}: {err}"
        return out
    alarms.sort(key=lambda a: (a["state"] != "ALARM", a["name"]))
    return {
        **out,
        "checked": True,
        "inAlarm": sum(1 for a in alarms if a["state"] == "ALARM"),
        "alarms": alarms,
    }


# ---- the command -------------------------------------------------------------------------------


@click.command("status")
@json_option
@click.option(
    "--counts/--no-counts",
    default=True,
    show_default=True,
    help="Count the rows on the legacy key and each shard key (one COUNT Query per key).",
)
@click.option(
    "--drift",
    "with_drift",
    is_flag=True,
    help="Also run the drift checks against the record's state (reads every shard key in "
    "full; the base-table scan for unindexed and stray rows is `saga-index drift`).",
)
@click.option(
    "--alarms",
    "with_alarms",
    is_flag=True,
    help="Also list the deployed alarms' states (CloudWatch DescribeAlarms).",
)
@click.option(
    "--alarm-prefix",
    default=f"{STACK_NAME}-",
    show_default=True,
    help="With --alarms: the alarm name prefix (CloudFormation names them <stack>-...).",
)
@service_endpoint_option("cloudwatch", "CLOUDWATCH", "CloudWatch")
@pass_cli
def status_command(
    cli: CliContext,
    as_json: bool,
    counts: bool,
    with_drift: bool,
    with_alarms: bool,
    alarm_prefix: str,
    cloudwatch_endpoint_url: str | None,
) -> None:
    """The migration on one screen: the record, the backfill, the rows, drift and alarms.

    \b
    --json: the record's keys as `phase show --json` prints them (phase, version,
    effectiveAt, effective, ...), plus
      backfill  {lease: {holder, direction, acquiredAt, heartbeatAt, expiresAt, live,
                stateVersion} | null, maxWritesPerSecond, paused, lastRun: {direction, source,
                target, stateVersion, startedAt, completedAt, scanned, restamped, anomalies,
                complete, verified, holder} | null, nextMove: {to, backfillCheck: {name,
                passed, detail}} | null}
      rows      {counted, legacy, sharded, shardCount, perShard} (null with --no-counts)
      drift     {checked, healthy, findings, legacyRows, shardedRows, unexpectedLegacyRows,
                unexpectedShardedRows, misroutedRows, anomalousRows, controlRecordMissing,
                shardSkew} (null without --drift)
      alarms    {checked, prefix, inAlarm, alarms: [{name, state, reason, updatedAt,
                actionsEnabled}], error} (null without --alarms)

    A part that cannot be read says so (checked/counted false, error) instead of failing.
    Exit 0 shown; 1 the record is missing (shown from its history) or cannot be read.
    """
    table = cli.require_table()
    state = cli.read_state()
    now = cli.now()
    doc = record_document(state, table, now)
    doc["backfill"] = backfill_document(state, now)
    doc["rows"] = row_counts(cli, state) if counts else None
    doc["drift"] = drift_summary(cli, state) if with_drift else None
    doc["alarms"] = (
        alarm_states(cli, alarm_prefix, cloudwatch_endpoint_url) if with_alarms else None
    )
    if as_json:
        emit(doc)
    else:
        render(doc, Console(file=sys.stdout, highlight=False, soft_wrap=True))
    if state.condition is RecordCondition.MISSING:
        click.echo(
            f"saga-index: the control record (STATE) is MISSING; its history ends at version "
            f"{state.version}. Restore it: saga-index phase restore",
            err=True,
        )
        raise click.exceptions.Exit(EXIT_MISSING)


# ---- the screen --------------------------------------------------------------------------------


def _layout(doc: Mapping[str, Any] | None) -> str:
    if doc is None:
        return "-"
    return doc["layout"] + (f"({doc['shardCount']})" if doc.get("shardCount") else "")


def render(doc: Mapping[str, Any], console: Console) -> None:
    record = Table.grid(padding=(0, 2))
    record.add_column(style="bold")
    record.add_column()
    current = _layout({"layout": doc["layout"], "shardCount": doc["shardCount"]})
    moving = doc["movingTo"]
    record.add_row("phase", f"{doc['phase']} (version {doc['version']}, {doc['condition']})")
    record.add_row("layout", current + (f" -> {_layout(moving)}" if moving else ""))
    record.add_row(
        "routing",
        f"writers stamp {doc['routing']['writes']}; readers read "
        + ", then ".join(doc["routing"]["reads"]),
    )
    if doc["version"]:
        record.add_row("changed", f"{doc['changedAt']} by {doc['changedBy']}")
        record.add_row("reason", str(doc["reason"]))
        wait = doc["secondsUntilEffective"]
        record.add_row(
            "effectiveAt",
            f"{doc['effectiveAt']} "
            + ("(passed)" if doc["effective"] else f"(NOT YET: {wait:.0f} s to go)"),
        )
        if doc["checksForced"]:
            record.add_row("FORCED", ", ".join(doc["checksForced"]))
    record.add_row("allowed moves", ", ".join(doc["allowedMoves"]) or "none")
    console.print(f"[bold]saga-index status[/bold]: table {doc['table']}")
    console.print(record)

    backfill = doc["backfill"]
    console.print("\n[bold]backfill[/bold]")
    lease = backfill["lease"]
    if lease:
        console.print(
            f"  lease: {lease['holder']} ({lease['direction']}), "
            + ("LIVE" if lease["live"] else "expired")
            + f" until {lease['expiresAt']}, heartbeat {lease['heartbeatAt']}"
        )
    else:
        console.print("  lease: none (no run in progress)")
    rate = backfill["maxWritesPerSecond"]
    throttle = "the run's own setting" if rate is None else f"{rate:g} writes/s"
    paused = "YES" if backfill["paused"] else "no"
    console.print(f"  throttle: {throttle}; paused: {paused}")
    run = backfill["lastRun"]
    if run:
        verdict = "complete" if run["complete"] else "INCOMPLETE"
        verdict += ", verified" if run["verified"] else ", NOT verified"
        console.print(
            f"  last run: {run['direction']} {_layout(run['source'])} -> "
            f"{_layout(run['target'])} under version {run['stateVersion']}, "
            f"{run['startedAt']} .. {run['completedAt']}: scanned {run['scanned']}, "
            f"restamped {run['restamped']}, anomalies {run['anomalies']}, {verdict}"
        )
    else:
        console.print("  last run: none recorded")
    if backfill["nextMove"]:
        check = backfill["nextMove"]["backfillCheck"]
        console.print(
            f"  for `phase set {backfill['nextMove']['to']}`: {check['name']} "
            + ("passes" if check["passed"] else "FAILS")
            + f": {check['detail']}"
        )

    rows = doc["rows"]
    if rows is not None:
        console.print("\n[bold]rows[/bold]")
        if rows["counted"]:
            console.print(
                f"  legacy key: {rows['legacy']}; shard keys (N={rows['shardCount']}): "
                f"{rows['sharded']}"
            )
        else:
            console.print(f"  not counted: {rows['error']}")

    drift = doc["drift"]
    if drift is not None:
        console.print("\n[bold]drift[/bold]")
        if not drift["checked"]:
            console.print(f"  not checked: {drift['error']}")
        else:
            console.print(
                f"  unexpected legacy {drift['unexpectedLegacyRows']}, unexpected sharded "
                f"{drift['unexpectedShardedRows']}, misrouted {drift['misroutedRows']}, "
                f"anomalous {drift['anomalousRows']}, skew {drift['shardSkew']}"
            )
            console.print(
                "  verdict: "
                + ("healthy" if drift["healthy"] else "DRIFT: " + "; ".join(drift["findings"]))
            )

    alarms = doc["alarms"]
    if alarms is not None:
        console.print(f"\n[bold]alarms[/bold] ({alarms['prefix']}*)")
        if not alarms["checked"]:
            console.print(f"  not checked: {alarms['error']}")
        elif not alarms["alarms"]:
            console.print("  none found with that prefix (deployed? right region?)")
        else:
            table = Table(show_edge=False, box=None, padding=(0, 2))
            for column in ("state", "alarm", "since"):
                table.add_column(column)
            for alarm in alarms["alarms"]:
                style = "bold red" if alarm["state"] == "ALARM" else None
                table.add_row(alarm["state"], alarm["name"], alarm["updatedAt"] or "-", style=style)
            console.print(table)
            console.print(f"  in ALARM: {alarms['inAlarm']}")
