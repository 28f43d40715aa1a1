"""`saga-index status`'s human screen: the report's documents, rendered with rich."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from saga_index_cli.phase.documents import open_index_line
from saga_index_cli.status.charts import countdown, next_step, rows_chart, rows_summary


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
            + (
                "(passed)"
                if doc["effective"]
                else f"(NOT YET: {wait:.0f} s to go, countdown {countdown(wait)})"
            ),
        )
        if doc["checksForced"]:
            record.add_row("FORCED", ", ".join(doc["checksForced"]))
    record.add_row("allowed moves", ", ".join(doc["allowedMoves"]) or "none")
    record.add_row("open index", open_index_line(doc["openIndex"]))
    step = next_step(doc)
    if step is not None:
        record.add_row("next", step)
    console.print(f"[bold]saga-index status[/bold]: table {doc['table']}")
    console.print(record)

    _render_backfill(doc["backfill"], console)

    rows = doc["rows"]
    if rows is not None:
        console.print("\n[bold]rows[/bold]")
        if rows["counted"]:
            console.print(f"  {rows_summary(rows)}")
            console.print(rows_chart(rows))
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


def _render_backfill(backfill: Mapping[str, Any], console: Console) -> None:
    console.print("\n[bold]backfill[/bold]")
    lease = backfill["lease"]
    if lease:
        console.print(
            f"  lease: {lease['holder']} ({lease['kind']} run, {lease['direction']}), "
            + ("LIVE" if lease["live"] else "expired")
            + f" until {lease['expiresAt']}, heartbeat {lease['heartbeatAt']}"
        )
        if lease.get("pace"):
            console.print(f"  pace: {escape(lease['pace'])} (as of its last heartbeat)")
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
