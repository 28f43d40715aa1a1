"""`saga-index status`: the migration on one screen.

The record (phase, version, effectiveAt), the backfill's lease, throttle, pause flag and last
run, how many rows sit on each side (COUNT queries), and on request the drift checks and the
deployed alarms' states. Everything comes from the record and the table as they are now: the
global --phase/--shards do not apply.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console

from saga_index.index import STACK_NAME
from saga_index.layout_change.record import ControlRecordInvalidError, RecordCondition
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.endpoints import service_endpoint_option
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.output import emit, json_option
from saga_index_cli.phase.documents import record_document
from saga_index_cli.status.report import alarm_states, backfill_document, drift_summary, row_counts
from saga_index_cli.status.screen import render
from saga_index_cli.status.unreadable import print_unreadable, unreadable_document
from saga_index_cli.waiting import doing

EXIT_OK, EXIT_MISSING = ExitCode.OK, ExitCode.FOUND


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
      backfill  {lease: {holder, direction, kind (layout | open-index), acquiredAt,
                heartbeatAt, expiresAt, live, stateVersion, pace} | null, maxWritesPerSecond,
                paused, lastRun: {direction, source, target, stateVersion, startedAt,
                completedAt, scanned, restamped, anomalies, complete, verified, holder} | null,
                nextMove: {to, backfillCheck: {name, passed, detail}} | null}
      rows      {counted, legacy, sharded, shardCount, perShard} (null with --no-counts)
      drift     {checked, healthy, findings, legacyRows, shardedRows, unexpectedLegacyRows,
                unexpectedShardedRows, misroutedRows, anomalousRows, controlRecordMissing,
                shardSkew} (null without --drift)
      alarms    {checked, prefix, inAlarm, alarms: [{name, state, reason, updatedAt,
                actionsEnabled}], error} (null without --alarms)

    A part that cannot be read says so (checked/counted false, error) instead of failing.

    \b
    A STATE item that does not parse is shown as stored instead: --json {table, condition:
    "unreadable", error, badAttribute, badValue, stored (its attributes as stored),
    restoreFrom (the history item `phase restore` would rewrite it from, or null),
    historyError}.

    Exit 0 shown; 1 the record is missing (shown from its history), does not parse (shown as
    stored) or cannot be read.
    """
    table = cli.require_table()
    try:
        state = cli.read_state()
    except ControlRecordInvalidError as err:
        print_unreadable(unreadable_document(cli.control_store(), table, err), as_json)
        raise click.exceptions.Exit(EXIT_MISSING) from None
    now = cli.now()
    doc = record_document(state, table, now)
    doc["backfill"] = backfill_document(state, now)
    doc["rows"] = doc["drift"] = None
    if counts:
        with doing("counting the rows on each index key"):
            doc["rows"] = row_counts(cli, state)
    if with_drift:
        with doing("checking drift (reading every shard key)"):
            doc["drift"] = drift_summary(cli, state)
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
