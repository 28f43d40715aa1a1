"""What `saga-index status` draws rather than writes: the rows on each index key as a bar chart,
the time left until the state's effectiveAt, and the command that comes next."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.bar import Bar
from rich.table import Table

from saga_index_cli.progress import format_seconds

# Bars wider than this help nobody; narrower terminals get what rich can fit.
_BAR_WIDTH = 40


def rows_chart(rows: Mapping[str, Any]) -> Table:
    """One bar per index key that holds rows (the legacy key, then each shard key), scaled to
    the fullest; the empty shard keys are summed up in one line under it."""
    per_key: list[tuple[str, int]] = [("legacy", int(rows["legacy"]))]
    per_key += [(f"shard {n}", int(count)) for n, count in rows["perShard"].items() if count]
    fullest = max((count for _, count in per_key), default=0) or 1
    chart = Table(show_edge=False, box=None, padding=(0, 1))
    chart.add_column("key", style="bold")
    chart.add_column("rows", justify="right")
    chart.add_column("", width=_BAR_WIDTH)
    for key, count in per_key:
        chart.add_row(key, f"{count:,}", Bar(size=fullest, begin=0, end=count, width=_BAR_WIDTH))
    return chart


def rows_summary(rows: Mapping[str, Any]) -> str:
    """The counts in one line, naming the keys the rows really sit on."""
    counted = int(rows["shardCount"])
    holding = int(rows.get("shardKeysWithRows", 0))
    return (
        f"legacy key: {rows['legacy']:,}; shard keys: {rows['sharded']:,} row(s) on {holding} "
        f"of the {counted} shard keys counted"
    )


def countdown(seconds: float) -> str:
    """The time left until effectiveAt, as a countdown (H:MM:SS)."""
    return format_seconds(seconds, round_up=True)


def next_step(doc: Mapping[str, Any]) -> str | None:
    """The command that comes next in the runbook for this state, or what to wait for; None
    when the state asks for nothing (legacy, never migrated, or settled in sharded)."""
    backfill = doc["backfill"]
    lease = backfill["lease"]
    phase = doc["phase"]
    direction = " --direction rollback" if phase == "rolling-back" else ""
    if lease and lease["live"]:
        return (
            f"{'an' if lease['kind'] == 'open-index' else 'a'} {lease['kind']} backfill runs "
            f"({lease['holder']}): let it finish; `saga-index backfill --follow` follows a Step "
            "Functions run"
        )
    next_move = backfill["nextMove"]
    if next_move is None:
        return None
    if not doc["effective"]:
        return (
            f"wait {countdown(doc['secondsUntilEffective'])} for effectiveAt, then "
            f"`saga-index backfill{direction}`"
        )
    if backfill["paused"]:
        return "the backfill is PAUSED: `saga-index backfill resume`, then run it"
    if not next_move["backfillCheck"]["passed"]:
        return f"`saga-index backfill{direction}` (the next move needs its completion)"
    return (
        f'`saga-index phase set {next_move["to"]} --reason "..."` (its backfill check '
        "passes; `phase set` runs the others)"
    )
