"""`saga-index backfill --dry-run`: the estimate of what the real run will cost, printed with
the dry run's summary and carried in its JSON report under `estimate`.

The rows to move are the dry run's own count (wouldRestamp); their sizes come from a sample
read through the index (saga_index.layout_change.backfill.estimate). The cap is the one the real
run would start at: the record's runtime throttle (`backfill throttle`) when it is lower than
--max-writes-per-second (until `backfill throttle --clear`), else the option's: a throttle only
ever lowers a run's cap.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import INDEX_NAME
from saga_index.layout_change.backfill import (
    PARTITION_WCU_PER_SECOND,
    BackfillEstimate,
    BackfillSummary,
    LegacyKeyEffect,
    Move,
    RowSample,
    sample_rows_to_move,
)
from saga_index_cli.backfill.output import print_summary, report_document, write_report
from saga_index_cli.context import CliContext

log = logging.getLogger("saga_index.cli.backfill")

_LEGACY_KEY_WORDS = {
    LegacyKeyEffect.OFF: "forward: moves rows OFF the legacy key (one index delete there per row)",
    LegacyKeyEffect.ONTO: "rollback: moves rows ONTO the legacy key (one index put there per row)",
    LegacyKeyEffect.NONE: "not touched (a move between two sharded layouts)",
}


def format_duration(seconds: float) -> str:
    """`42.0 s`, `12 min 05 s`, `3 h 07 min 12 s`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    return f"{minutes} min {secs:02d} s"


def move_of(summary: BackfillSummary) -> Move | None:
    """The move a summary names (None when it names no layouts)."""
    if summary.source is None or summary.target is None:
        return None
    return Move(summary.direction, summary.source.layout(), summary.target.layout())


# Where the estimate's cap came from (JSON: estimate.capSource).
CAP_FROM_RECORD, CAP_FROM_OPTION = "record-throttle", "max-writes-per-second"


def record_cap(cli: CliContext) -> float | None:
    """The record's runtime throttle (read once per invocation), None when none is set."""
    return cli.read_state().backfill_max_writes_per_second


def applied_cap_report(summary: BackfillSummary) -> dict[str, Any]:
    """The caps a run really ran at, for its report (local or deployed): `maxWritesPerSecond`
    the one it started at (the record's throttle when one was set), `appliedMaxWritesPerSecond`
    that one and every change during the run, in order, and `requestedMaxWritesPerSecond` the
    option's. Nothing for a run that applied none (a dry run)."""
    applied = summary.applied_max_writes_per_second
    if not applied:
        return {}
    return {
        "maxWritesPerSecond": applied[0],
        "appliedMaxWritesPerSecond": list(applied),
        "requestedMaxWritesPerSecond": summary.max_writes_per_second,
    }


def estimate_dry_run(cli: CliContext, summary: BackfillSummary) -> BackfillEstimate | None:
    """The estimate of the run this dry run rehearsed; None when the summary names no move.
    A sample that cannot be read leaves the capacity figures out (logged), not the dry run."""
    move = move_of(summary)
    if move is None or not summary.dry_run:
        return None
    cap = run_cap(cli, summary.max_writes_per_second)
    if cap != summary.max_writes_per_second:
        log.warning(
            "the estimate is at the record's runtime throttle, %g writes/s, below "
            "--max-writes-per-second %g: a real run runs at the throttle until "
            "`saga-index backfill throttle --clear`",
            cap,
            summary.max_writes_per_second,
        )
    try:
        sample = sample_rows_to_move(
            cli.client, cli.require_table(), index_name=INDEX_NAME, move=move
        )
    except (ClientError, BotoCoreError) as err:
        log.warning("could not sample row sizes for the estimate (no WCU figures): %s", err)
        sample = RowSample()
    return BackfillEstimate.of(
        rows_to_move=summary.would_restamp,
        max_writes_per_second=cap,
        move=move,
        sample=sample,
    )


def run_cap(cli: CliContext, own_rate: float) -> float:
    """The cap a run with --max-writes-per-second `own_rate` runs at: the record's throttle
    when it is lower, else its own (a throttle never raises a run's cap)."""
    throttle = record_cap(cli)
    return own_rate if throttle is None else min(own_rate, throttle)


def cap_source(cli: CliContext, own_rate: float) -> str:
    return CAP_FROM_RECORD if run_cap(cli, own_rate) < own_rate else CAP_FROM_OPTION


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:,.1f}"


def estimate_lines(estimate: BackfillEstimate, source: str = CAP_FROM_OPTION) -> list[str]:
    """The estimate as the text summary shows it."""
    cap = estimate.max_writes_per_second
    whose = (
        "the record's runtime throttle (`backfill throttle`; `--clear` removes it)"
        if source == CAP_FROM_RECORD
        else "--max-writes-per-second"
    )
    lines = [
        f"estimate at the cap of {cap:g} writes/s, {whose} (the Scan and the read-back come "
        "on top):",
        f"  rows to move     {estimate.rows_to_move:,}",
        f"  time             {format_duration(estimate.seconds)}   (rows / cap)",
        f"  legacy key       {_LEGACY_KEY_WORDS[estimate.legacy_key]}",
    ]
    per_second = estimate.legacy_key_wcu_per_second
    share = estimate.legacy_key_share_of_partition_limit
    if estimate.legacy_key is LegacyKeyEffect.NONE:
        return lines
    if per_second is None or share is None:
        lines.append(
            "  legacy-key WCU   not estimated: no sampled row would move (nothing to size)"
        )
        return lines
    sampled = (
        f"mean of {estimate.sampled_rows} sampled row(s) of "
        f"{(estimate.average_item_bytes or 0) / 1024:.1f} KB"
        if estimate.sampled_rows
        else "nothing to move"
    )
    lines.append(
        f"  legacy-key WCU   {estimate.legacy_key_wcu_per_row or 0:.2f} per row ({sampled}): "
        f"{per_second:,.1f} WCU/s at the cap = {share:.1%} of one partition's "
        f"{PARTITION_WCU_PER_SECOND:,.0f} WCU/s; {_number(estimate.legacy_key_wcu or 0)} WCU "
        "in all"
    )
    if estimate.wcu_per_row is not None:
        lines.append(
            f"  all writes       {estimate.wcu_per_row:.2f} WCU per row (the fenced re-stamp: "
            "the table write twice, the fence slot's check, both index entries): "
            f"{_number(estimate.total_wcu or 0)} WCU in all"
        )
    return lines


def print_report(
    summary: BackfillSummary,
    extra: dict[str, Any],
    as_json: bool,
    output: Path | None,
    estimate: BackfillEstimate | None,
    source: str = CAP_FROM_OPTION,
) -> None:
    """print_summary, with the estimate (when there is one) under `estimate` in the JSON report
    (its `capSource` says whose cap it is at) and as lines after the text summary."""
    if estimate is None:
        print_summary(summary, extra, as_json, output)
        return
    with_estimate = {**extra, "estimate": {**estimate.to_json(), "capSource": source}}
    if as_json:
        print_summary(summary, with_estimate, as_json, output)
        return
    print_summary(summary, extra, as_json, None)
    click.echo("\n".join(estimate_lines(estimate, source)))
    if output is not None:
        write_report(output, report_document(summary, with_estimate))
        click.echo(f"report written to {output}")
