"""`saga-index phase show|set|restore`: the control record, and its guarded transitions.

A completing move (migrating -> sharded, resharding -> sharded, rolling-back -> legacy) stops
reading the layout rows moved away from: before it, `phase set` checks that readers AFTER the
change see every saga (`change_phase` chooses them: layout_change/transitions/requirements.py
says which, and why against the TARGET state).
"""

from __future__ import annotations

import click

from saga_index.layout_change.record import (
    ControlState,
    Phase,
    RecordCondition,
    format_time,
    routing_for,
)
from saga_index.layout_change.transitions import (
    CompletionCheckOptions,
    PhaseChange,
    repair_history,
)
from saga_index_cli.context import (
    CliContext,
    describe_routing,
    pass_cli,
)
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.options import completion_check_options, enum_argument, shards_option
from saga_index_cli.output import emit, json_option
from saga_index_cli.phase.change import (
    ChangeRequest,
    change_once,
    change_when_settled,
    read_state,
)
from saga_index_cli.phase.documents import (
    history_document,
    history_line,
    record_document,
    record_lines,
)
from saga_index_cli.phase.restore import restore_command
from saga_index_cli.phase.unchanged import print_unchanged, with_effective_line
from saga_index_cli.phase.wait import interrupted_after_write, wait_until_effective

EXIT_OK, EXIT_MISSING = ExitCode.OK, ExitCode.FOUND
WAIT_HELP = (
    "Wait until the change is effective (effectiveAt has passed: every process follows it), "
    "then print the record. Progress on stderr; Ctrl-C is safe (nothing is half-written)."
)


def _missing_warning(state: ControlState) -> None:
    if state.condition is RecordCondition.MISSING:
        click.echo(
            f"saga-index: the control record (STATE) is MISSING; its history ends at version "
            f"{state.version}. Readers route over every layout that history names. Restore "
            "it: saga-index phase restore",
            err=True,
        )


@click.group("phase")
def phase_group() -> None:
    """Show or change the migration state: the control record (docs/control-contract.md)."""


@phase_group.command("show")
@json_option
@click.option("--history", is_flag=True, help="Also list every transition, oldest first.")
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@pass_cli
def show_command(cli: CliContext, as_json: bool, history: bool, wait: bool) -> None:
    """Print the control record: the state every reader and writer follows.

    The global --phase/--shards do not apply: this is the record as stored.

    \b
    --json keys: table, condition (present | never-migrated | missing), phase, version,
    layout, shardCount (the current layout's N; null while legacy or migrating), movingTo
    ({layout, shardCount} or null), changedAt, changedBy, reason, effectiveAt, effective
    (effectiveAt has passed), secondsUntilEffective, previousPhase, checksPassed,
    checksForced, routing ({writes: the layout writers stamp NOW, reads, switchesTo and
    switchesAt: the layout writers stamp from effectiveAt and when, null once they do}),
    allowedMoves; with --history, history (one
    object per HISTORY item: version, from, to (the phases), moved (layout | open-index: which
    of the record's dimensions it moved), change (the move as text: `migrating -> sharded`,
    `openIndex off -> adding(16)`), changedAt, changedBy, reason, effectiveAt, checksPassed,
    checksForced, applied (a STATE write of it was confirmed), status (applied | intent: not
    confirmed, the STATE write may have failed or be in flight | abandoned: its STATE write
    failed, never applied), ...).

    --wait: first wait until the record's state is effective (its effectiveAt has passed;
    the record is read again then, and waited for again if it changed meanwhile), then print
    it: `effective: true`. Progress on stderr; Ctrl-C ends the wait, exit 1, nothing written.

    Exit 0 shown; 1 the record is missing (it is still shown, from its history) or cannot be
    read.
    """
    store = cli.control_store()
    state = read_state(cli)
    if wait:
        state = wait_until_effective(cli, state)
    doc = record_document(state, store.table_name, cli.now())
    if history:
        doc["history"] = [history_document(entry, state) for entry in store.history_entries()]
    if as_json:
        emit(doc)
    else:
        lines = with_effective_line(record_lines(doc), doc)
        lines += [history_line(item) for item in doc.get("history", [])]
        click.echo("\n".join(lines))
    _missing_warning(state)
    raise click.exceptions.Exit(
        EXIT_MISSING if state.condition is RecordCondition.MISSING else EXIT_OK
    )


@phase_group.command("set")
@enum_argument("phase", Phase, Phase.parse)
@click.option("--reason", required=True, help="Why (recorded in the record and its history).")
@click.option(
    "--shards",
    type=int,
    default=None,
    # A power of two 1..1024, refused before the record is read (exit 2).
    callback=shards_option,
    help="N of legacy -> migrating (default 16), a power of two 1..1024; M of sharded(N) -> "
    "resharding: 2N (split) or N/2 (merge); N of the abort resharding(N -> M) -> "
    "resharding. On other moves N comes from the record; a --shards that disagrees with it "
    "is refused.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Skip the checks of a completing move (recorded as checksForced in the history).",
)
@click.option("--wait", is_flag=True, help=WAIT_HELP)
@json_option
@click.option(
    "--sample",
    type=click.IntRange(0, 100_000),
    default=CompletionCheckOptions.sample,
    show_default=True,
    help="Parity check: persons whose by-person reads are compared.",
)
@completion_check_options("Parity check")
@pass_cli
def set_command(
    cli: CliContext,
    phase: Phase,
    reason: str,
    shards: int | None,
    force: bool,
    as_json: bool,
    sample: int,
    recheck_delay: float,
    scan_rate: float,
    segments: int,
    wait: bool,
) -> None:
    """Move the record to the given phase along an allowed edge (compare-and-set on its
    version).

    \b
      legacy        -> migrating      N = --shards (default 16)        never blocked
      migrating     -> sharded        completes the forward move       checks
      migrating     -> rolling-back   abort                            never blocked
      sharded       -> rolling-back                                    never blocked
      rolling-back  -> legacy         completes the rollback           checks
      rolling-back  -> migrating      abort the rollback               never blocked
      sharded(N)    -> resharding     --shards 2N (split) or N/2       never blocked
      resharding    -> sharded        completes the re-shard           checks
      resharding    -> resharding     abort: --shards N (swap back)    never blocked

    The checks of a completing move run at the moment of the change: backfill-verified (a
    complete, verified backfill of this move recorded after effectiveAt), no-legacy-rows
    (migrating -> sharded), no-unmoved-rows (resharding -> sharded) or no-sharded-rows
    (-> legacy), no-misrouted-rows, and parity (the reads of the TARGET state against a
    consistent Scan of the base table). --force skips them; the
    history records which (checksForced). Writers follow the new state by its effectiveAt.

    \b
    --json: the record as `phase show --json` prints it, plus from ({phase, version}),
    checks ([{name, passed, detail}]), historyWritten (the new version's HISTORY item is
    marked applied) and warnings (what failed after the move was applied).

    \b
    The HISTORY item of the new version is written first (an intent), then the STATE
    compare-and-set, then the intent is marked applied. Once the STATE write landed the move
    is applied and exits 0, whatever fails after it: stderr and --json `warnings` name what
    failed and how it is repaired.

    \b
    The first move of a table (legacy -> migrating at version 0) first checks that no saga row
    carries a shard key (no-rows-on-shard-keys: one Query with Limit 1 per shard key, 1024 in
    all): rows there mean the control partition was lost, and `phase restore` rebuilds it.

    \b
    Exit codes:
      0  changed (also when something after the STATE write failed: see warnings); or the
         record already is exactly PHASE (with --shards, its N): nothing written, --json
         says "changed": false (a moved record says true)
      1  lost the race (another change landed first: the message names its version), or the
         record is missing or unreadable (an unparseable STATE item: `phase restore`)
      2  not an allowed move (the message names the allowed ones), a --shards that is not a
         power of two or disagrees with the record, a re-shard --shards that is not one
         factor of two (the message names the allowed values), a global --phase/--shards
         that disagrees
      3  refused: a check failed; stdout {"refused": true, "failed": [{name, passed,
         detail}], "requested": PHASE}; nothing was written
      4  could not complete: DynamoDB could not be reached, refused the call or does not
         support it (the message names the endpoint and the operation); when that was the
         history intent or the STATE write, stderr also says the move was NOT applied
      5  not yet: a completing move (forced too) before the state's effectiveAt plus the
         in-flight margin (15 s); stdout {"retryLater": true, "retryAt": TIME, "failed":
         [{name, passed, detail}]}: the move's checks that already fail (run read-only before
         the answer, parity left to the change itself); nothing written: fix what failed,
         run it again at retryAt
      6  --wait interrupted (Ctrl-C) after the change was written: it stands; `phase show
         --wait` waits for it

    \b
    --wait: a "not yet" with no failed check waits until retryAt and sets the phase then
    (the checks run at that moment); once written, waits until the new state is effective
    (effectiveAt), then prints it. Progress on stderr. Ctrl-C before the write: exit 1,
    nothing written.
    """
    options = CompletionCheckOptions(
        sample=sample, recheck_delay_seconds=recheck_delay, scan_rate=scan_rate, segments=segments
    )
    request = ChangeRequest(phase, reason, shards, force, options)
    table = cli.control_store().table_name
    change = change_when_settled(cli, request) if wait else change_once(cli, request)
    if change is None:
        state = wait_until_effective(cli, cli.read_state()) if wait else cli.read_state()
        # A runbook step run again: the record already says it (its history settled, if not).
        settled = repair_history(cli.control_store(), state)
        print_unchanged(cli, table, state, as_json, history_settled=settled)
        return
    if wait:
        try:
            wait_until_effective(cli, change.state)
        except KeyboardInterrupt:
            _print_change(cli, table, change, as_json)
            raise interrupted_after_write(cli, change.state) from None
    _print_change(cli, table, change, as_json)


def _print_change(cli: CliContext, table: str, change: PhaseChange, as_json: bool) -> None:
    transition = change.transition
    doc = record_document(change.state, table, cli.now())
    doc.update(
        {
            "from": {
                "phase": transition.previous_phase.value,
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
            f"phase {transition.previous_phase.value} -> {transition.phase.value}: "
            f"version {transition.version} written",
            *record_lines(doc)[1:],
        ]
        lines += [
            f"  check {c.name}: {'passed' if c.passed else 'FAILED'}: {c.detail}"
            for c in change.checks
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
    routing = routing_for(change.state, cli.now())
    click.echo(
        f"saga-index: every process follows the new routing ({describe_routing(routing)}) by "
        f"{format_time(transition.effective_at)}",
        err=True,
    )


phase_group.add_command(restore_command)
