"""`saga-index open-index show|set`: the open-saga index's state in the control record, and its
guarded transitions (docs/control-contract.md, "The open-saga index"; docs/runbook.md, "Add
the open-saga index").

  off       -> adding     --shards N (default: the layout's N, else 16)   never blocked
  adding    -> open       completes the addition                        checks
  adding    -> removing   the rollback                                  never blocked
  removing  -> off        completes the rollback                        checks
  removing  -> adding     aborts the rollback                           never blocked
  open      -> anything   refused: `open` is the end

Every move to `adding` or `open` needs the index ACTIVE and not Backfilling (DescribeTable).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from saga_index.index import RetryLaterError
from saga_index.layout_change.record import (
    ControlState,
    OpenIndexState,
    RecordCondition,
    format_time,
    routing_for,
    seconds_until,
)
from saga_index.layout_change.transitions import (
    CompletionCheckOptions,
    PhaseChange,
    allowed_open_index_moves,
    change_open_index,
    plan_open_index_move,
    repair_history,
)
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.open_index.backfill import backfill_command
from saga_index_cli.options import completion_check_options, enum_argument, shards_option
from saga_index_cli.output import emit, json_option
from saga_index_cli.phase.change import read_state
from saga_index_cli.phase.not_yet import NotYetError
from saga_index_cli.phase.wait import interrupted_after_write, wait_until, wait_until_effective

WAIT_HELP = (
    "A 'not yet' of a completing move waits until its retryAt and moves then; once written, "
    "waits until the change is effective (effectiveAt). Progress on stderr."
)


def open_index_document(state: ControlState, table: str, now: datetime) -> dict[str, Any]:
    """The open index's state as `open-index show --json` prints it."""
    index, transition = state.open_index, state.transition
    routing = routing_for(state, now)
    stamps_now = routing.open_writes
    effective_at = state.effective_at
    stamps_later = None if transition is None else transition.open_writes_at(effective_at or now)
    keys = routing.open_enumeration_keys()
    return {
        "table": table,
        "condition": state.condition.value,
        "version": state.version,
        "openIndex": index.state.value,
        "openIndexShardCount": index.shard_count,
        "previousOpenIndex": None
        if transition is None
        else transition.previous_open_index.state.value,
        "changedAt": None if transition is None else format_time(transition.changed_at),
        "changedBy": None if transition is None else transition.changed_by,
        "reason": None if transition is None else transition.reason,
        "effectiveAt": None if effective_at is None else format_time(effective_at),
        "effective": effective_at is None or now >= effective_at,
        "secondsUntilEffective": 0.0 if effective_at is None else seconds_until(effective_at, now),
        "routing": {
            "stamps": None if stamps_now is None else str(stamps_now),
            "stampsFromEffectiveAt": None if stamps_later is None else str(stamps_later),
            "enumerations": "open-index" if keys is not None else "gsi4",
            "openIndexKeys": None if keys is None else list(keys),
        },
        "allowedMoves": list(allowed_open_index_moves(index.state)),
    }


def _lines(doc: dict[str, Any]) -> list[str]:
    routing = doc["routing"]
    reads = (
        f"the open index ({len(routing['openIndexKeys'])} keys)"
        if routing["enumerations"] == "open-index"
        else "GSI4 (the layout's keys)"
    )
    n = doc["openIndexShardCount"]
    return [
        f"open index: {doc['openIndex']}{f' (N = {n})' if n else ''}, version {doc['version']} "
        f"({doc['condition']})",
        f"  previous:     {doc['previousOpenIndex'] or '-'}",
        f"  changedAt:    {doc['changedAt'] or '-'} by {doc['changedBy'] or '-'}: "
        f"{doc['reason'] or '-'}",
        f"  effectiveAt:  {doc['effectiveAt'] or '-'}",
        f"  effective:    {'true' if doc['effective'] else 'false'}",
        f"  writers stamp OpenSagaPK now: {routing['stamps'] or 'no (and remove it)'}; "
        f"from effectiveAt: {routing['stampsFromEffectiveAt'] or 'no (and remove it)'}",
        f"  open-saga enumerations read: {reads}",
        f"  allowed moves: {', '.join(doc['allowedMoves']) or 'none (the end)'}",
    ]


def _print(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit(doc)
    else:
        click.echo("\n".join(_lines(doc)))


@click.group("open-index")
def open_index_group() -> None:
    """Show or move the sparse open-saga index's state (docs/control-contract.md)."""


@open_index_group.command("show")
@json_option
@pass_cli
def show_command(cli: CliContext, as_json: bool) -> None:
    """Print the open index's state in the control record.

    \b
    --json keys: table, condition, version, openIndex (off | adding | open | removing),
    openIndexShardCount (null while off), previousOpenIndex, changedAt, changedBy, reason,
    effectiveAt, effective, secondsUntilEffective, routing ({stamps: the open index writers
    stamp OpenSagaPK for NOW, null: none; stampsFromEffectiveAt; enumerations: gsi4 |
    open-index; openIndexKeys}), allowedMoves.

    Exit 0 shown; 1 the record is missing (shown from its history) or cannot be read.
    """
    state = read_state(cli)
    _print(open_index_document(state, cli.control_store().table_name, cli.now()), as_json)
    raise click.exceptions.Exit(
        ExitCode.FOUND if state.condition is RecordCondition.MISSING else ExitCode.OK
    )


@open_index_group.command("set")
@enum_argument("state", OpenIndexState, OpenIndexState.parse)
@click.option("--reason", required=True, help="Why (recorded in the record and its history).")
@click.option(
    "--shards",
    type=int,
    default=None,
    callback=shards_option,
    help="The open index's own N on off -> adding (default: the layout's N, else 16), a power "
    "of two 1..1024; elsewhere it must agree with the record's (another N: back to off, then "
    "adding --shards M; once open, never).",
)
@click.option("--force", is_flag=True, help="Skip a completing move's checks (recorded).")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@json_option
@completion_check_options("Checks")
@pass_cli
def set_command(
    cli: CliContext,
    state: OpenIndexState,
    reason: str,
    shards: int | None,
    force: bool,
    wait: bool,
    as_json: bool,
    recheck_delay: float,
    scan_rate: float,
    segments: int,
) -> None:
    """Move the open index to STATE along an allowed edge (compare-and-set on the record's
    version, the HISTORY intent first, as `phase set`).

    \b
      off       -> adding     --shards N (default: the layout's N, else 16)  never blocked
      adding    -> open       completes the addition: enumerations read it  checks
      adding    -> removing   the rollback                                 never blocked
      removing  -> off        completes the rollback                       checks
      removing  -> adding     aborts the rollback                          never blocked
      open      -> anything   refused: `open` is the end, it has no rollback

    \b
    Checks (run at the change, after effectiveAt + the in-flight margin): adding -> open:
    open-index-parity (every open saga carries its OpenSagaPK and is in the open index under
    it, no closed saga is: a paced, consistent Scan and a Query of each open index key);
    removing -> off: no-open-index-keys. --force skips them (recorded), never the wait.
    Moves to adding or open need the index ACTIVE and not Backfilling (DescribeTable).

    \b
    --json: `open-index show --json`, plus from ({openIndex, version}), checks, warnings,
    historyWritten, changed (false: the record already is STATE, nothing written).

    \b
    Exit codes: 0 changed (or already STATE); 1 lost the race, record missing or unreadable;
    2 not an allowed move (a move after `open`, out of order, while the layout moves), a
    --shards not a power of two or disagreeing, the index missing; 3 a check failed
    ({"refused": true, "failed": [...]}); 4 DynamoDB unreachable; 5 not yet: the index is
    still being built, or a completing move before effectiveAt + the margin ({"retryLater":
    true, "retryAt": TIME, "failed": []}); 6 --wait interrupted after the change was written.
    """
    table = cli.control_store().table_name
    options = CompletionCheckOptions(
        recheck_delay_seconds=recheck_delay, scan_rate=scan_rate, segments=segments
    )
    current = read_state(cli)
    index = current.open_index
    if (
        current.condition is not RecordCondition.MISSING
        and index.state is state
        and shards in (None, index.shard_count)
    ):
        settled = repair_history(cli.control_store(), current)
        doc = {**open_index_document(current, table, cli.now()), "changed": False}
        _print({**doc, "historySettled": settled}, as_json)
        click.echo(
            f"saga-index: the open index already is {state.value} (version {current.version}): "
            "nothing written",
            err=True,
        )
        return
    # Refuse a move that is not allowed before anything is read or waited for (exit 2).
    plan_open_index_move(current, state, shard_count=shards)
    change = _change(cli, state, reason, shards, force, options, wait)
    if wait:
        try:
            wait_until_effective(cli, change.state)
        except KeyboardInterrupt:
            _print_change(cli, table, change, as_json)
            raise interrupted_after_write(cli, change.state) from None
    _print_change(cli, table, change, as_json)


def _change(
    cli: CliContext,
    state: OpenIndexState,
    reason: str,
    shards: int | None,
    force: bool,
    options: CompletionCheckOptions,
    wait: bool,
) -> PhaseChange:
    while True:
        try:
            return change_open_index(
                cli.control_store(),
                state,
                changed_by=cli.changed_by(),
                reason=reason,
                readiness=cli.hooks.open_index_readiness,
                shard_count=shards,
                force=force,
                options=options,
                sleep=cli.hooks.sleep,
                probe=cli.hooks.shard_key_probe,
                clock=cli.hooks.clock,
                timing=cli.hooks.timing,
            )
        except RetryLaterError as err:
            # The completing checks scan the whole table: they run at the change, not here.
            not_yet = NotYetError(err, [])
            if not wait or err.retry_at is None:
                raise not_yet from err
            wait_until(cli, err.retry_at, f"open index {state.value} can be set")
            cli.reread_state()


def _print_change(cli: CliContext, table: str, change: PhaseChange, as_json: bool) -> None:
    transition = change.transition
    doc = open_index_document(change.state, table, cli.now())
    doc.update(
        {
            "from": {
                "openIndex": transition.previous_open_index.state.value,
                "version": transition.version - 1,
            },
            "checks": [check.to_json() for check in change.checks],
            "historyWritten": change.history_written,
            "warnings": list(change.warnings),
            "changed": True,
        }
    )
    if as_json:
        emit(doc)
    else:
        lines = [
            f"open index {transition.previous_open_index} -> {transition.open_index}: version "
            f"{transition.version} written",
            *_lines(doc)[1:],
            *(
                f"  check {c.name}: {'passed' if c.passed else 'FAILED'}: {c.detail}"
                for c in change.checks
            ),
        ]
        click.echo("\n".join(lines))
    if change.forced:
        click.echo(
            f"saga-index: FORCED: checks skipped and recorded in history version "
            f"{transition.version}: {', '.join(change.forced)}",
            err=True,
        )
    for warning in change.warnings:
        click.echo(
            f"saga-index: WARNING: move applied (version {transition.version}): {warning}", err=True
        )
    click.echo(
        f"saga-index: every process follows the open index {transition.open_index} by "
        f"{format_time(transition.effective_at)}",
        err=True,
    )


open_index_group.add_command(backfill_command)
