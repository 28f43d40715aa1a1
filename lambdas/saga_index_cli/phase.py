"""`saga-index phase show|set|restore`: the control record, and its guarded transitions.

A completing move (migrating -> sharded, resharding -> sharded, rolling-back -> legacy) stops
reading the layout rows moved away from. Before it, `phase set` checks at the moment of the
change (between its read of the record and its compare-and-set) that readers AFTER the change
see every saga:

  backfill-verified   the record's last backfill finished this move, complete and verified
                      (control.transitions.check_backfill)
  no-legacy-rows      -> sharded: zero saga rows with a usable personId on the legacy key
  no-sharded-rows     -> legacy: zero rows on the shard keys the state reads
  no-unmoved-rows     resharding -> sharded(M): zero rows on a source key sharded(M) does not
                      read (a merge's upper keys; a split keeps every source key)
  no-misrouted-rows   zero rows on a shard key that is not their person's key (in a split, a
                      row not yet moved off its source key counts here: the target does not
                      route its person there)
  parity              saga_index.parity run with the routing of the TARGET state: the reads a
                      process makes after the change return exactly the base table's sagas.
                      The current state's routing reads both layouts, so it would pass while
                      rows still sit on the key about to be dropped: it cannot answer the
                      question the move asks.

The drift counts are judged against the target state too (saga_index.drift with the target's
routing). The target `legacy` names no shard count, so for -> legacy the rows on shard keys are
counted over the keys of the state being left (its N), which are exactly the keys the target
stops reading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.control.errors import CheckResult
from saga_index.control.executor import PhaseChange, restore_state, set_phase
from saga_index.control.layout import Layout, StatePhase
from saga_index.control.record import format_time
from saga_index.control.routing import Routing, routing_for
from saga_index.control.state import ControlState, RecordCondition, Transition
from saga_index.control.transitions import (
    Precondition,
    allowed_moves,
    plan_move,
    seconds_until,
)
from saga_index.drift import DriftChecker, DriftReport
from saga_index.dynamo.scan import ScanOptions
from saga_index.errors import InvalidInputError, SagaIndexError
from saga_index.model import Phase
from saga_index.names import DEFAULT_SHARD_COUNT
from saga_index.parity import DEFAULT_RECHECK_DELAY_SECONDS, DEFAULT_SAMPLE, ParityVerifier
from saga_index.repository import count_partition
from saga_index_cli.context import CliContext, describe_routing, emit, json_option, pass_cli

EXIT_OK, EXIT_MISSING = 0, 1

CHECK_NO_LEGACY_ROWS = "no-legacy-rows"
CHECK_NO_SHARDED_ROWS = "no-sharded-rows"
CHECK_NO_UNMOVED_ROWS = "no-unmoved-rows"
CHECK_NO_MISROUTED_ROWS = "no-misrouted-rows"
CHECK_PARITY = "parity"


# ---- documents ---------------------------------------------------------------------------------


def layout_document(layout: Layout | None) -> dict[str, Any] | None:
    return None if layout is None else {"layout": layout.kind, "shardCount": layout.shard_count}


def _time(at: datetime | None) -> str | None:
    return None if at is None else format_time(at)


def transition_document(transition: Transition) -> dict[str, Any]:
    """One HISTORY item: what changed, who, when, why, which checks passed or were forced."""
    return {
        "version": transition.version,
        "from": transition.previous_phase.value,
        "to": transition.phase.value,
        "layout": transition.layout.kind,
        "shardCount": transition.layout.shard_count,
        "movingTo": layout_document(transition.moving_to),
        "changedAt": format_time(transition.changed_at),
        "changedBy": transition.changed_by,
        "reason": transition.reason,
        "effectiveAt": format_time(transition.effective_at),
        "checksPassed": list(transition.checks_passed),
        "checksForced": list(transition.checks_forced),
    }


def record_document(state: ControlState, table: str, now: datetime) -> dict[str, Any]:
    """The record as `phase show --json` prints it (the keys are a contract: runbook, demo).

    shardCount is the CURRENT layout's N (null while legacy or migrating: see
    movingTo.shardCount), exactly as the STATE item holds it.
    """
    transition = state.transition
    effective_at = state.effective_at
    routing = routing_for(state)
    missing = state.condition is RecordCondition.MISSING
    return {
        "table": table,
        "condition": state.condition.value,
        "phase": state.phase.value,
        "version": state.version,
        "layout": state.layout.kind,
        "shardCount": state.layout.shard_count,
        "movingTo": layout_document(state.moving_to),
        "changedAt": _time(transition.changed_at if transition else None),
        "changedBy": transition.changed_by if transition else None,
        "reason": transition.reason if transition else None,
        "effectiveAt": _time(effective_at),
        "effective": effective_at is None or now >= effective_at,
        "secondsUntilEffective": round(seconds_until(effective_at, now), 3),
        "previousPhase": transition.previous_phase.value if transition else None,
        "checksPassed": list(transition.checks_passed) if transition else [],
        "checksForced": list(transition.checks_forced) if transition else [],
        "routing": {
            "writes": str(routing.target),
            "reads": list(dict.fromkeys((str(routing.source), str(routing.target)))),
        },
        "allowedMoves": [] if missing else list(allowed_moves(state.phase)),
    }


def _record_lines(doc: dict[str, Any]) -> list[str]:
    moving = doc["movingTo"]
    layout = doc["layout"] + (f"({doc['shardCount']})" if doc["shardCount"] else "")
    if moving:
        layout += f" -> {moving['layout']}" + (
            f"({moving['shardCount']})" if moving["shardCount"] else ""
        )
    lines = [
        f"phase {doc['phase']}  (version {doc['version']}, record {doc['condition']})",
        f"  layout:       {layout}",
        f"  routing:      writers stamp {doc['routing']['writes']}; readers read "
        + ", then ".join(doc["routing"]["reads"]),
    ]
    if doc["version"]:
        wait = doc["secondsUntilEffective"]
        lines += [
            f"  changed:      {doc['changedAt']} by {doc['changedBy']} "
            f"(from {doc['previousPhase']})",
            f"  reason:       {doc['reason']}",
            f"  effectiveAt:  {doc['effectiveAt']} "
            + ("(passed)" if doc["effective"] else f"(in {wait:.0f} s)"),
        ]
        if doc["checksPassed"]:
            lines.append(f"  checks passed: {', '.join(doc['checksPassed'])}")
        if doc["checksForced"]:
            lines.append(f"  checks FORCED: {', '.join(doc['checksForced'])}")
    else:
        lines.append("  never migrated: no record yet (the first `phase set` writes it)")
    moves = doc["allowedMoves"]
    lines.append(f"  allowed moves: {', '.join(moves) if moves else 'none'}")
    return lines


def _missing_warning(state: ControlState) -> None:
    if state.condition is RecordCondition.MISSING:
        click.echo(
            f"saga-index: the control record (STATE) is MISSING; its history ends at version "
            f"{state.version}. Readers route over every layout that history names. Restore "
            "it: saga-index phase restore",
            err=True,
        )


# ---- the completing move's checks ---------------------------------------------------------------


@dataclass(frozen=True)
class CheckOptions:
    """How the checks read the table (the parity scan is a consistent base-table Scan)."""

    sample: int = DEFAULT_SAMPLE
    recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS
    scan_rate: float = 400.0
    segments: int = 4


def completion_checks(
    cli: CliContext, requested: StatePhase, options: CheckOptions
) -> list[Precondition]:
    """The injected preconditions of a completing move to `requested` (sharded or legacy).

    Each runs against the state `set_phase` read, at the moment of the change. A check that
    cannot read the table fails (naming the error): it never passes by default.
    """
    table = cli.require_table()
    drift_of: dict[int, DriftReport] = {}

    def drift(state: ControlState) -> DriftReport:
        # One drift read serves both drift checks.
        if state.version not in drift_of:
            target = _target_layout(state, requested)
            if target.is_sharded:
                routing = Routing.between(target)
            else:
                # The target names no N: read the shard keys of the state being left.
                routing = Routing.between(state.layout, state.moving_to)
            checker = DriftChecker(cli.client, table, routing=routing)
            drift_of[state.version] = checker.check(scan_unindexed=False)
        return drift_of[state.version]

    def unmoved(state: ControlState) -> CheckResult:
        # The target's drift read covers only the target's keys: the source keys it drops (a
        # merge's upper half) are counted here, one COUNT Query each.
        target = _target_layout(state, requested)
        dropped = [k for k in state.layout.partitions() if k not in set(target.partitions())]
        counts = {k: count_partition(cli.client, table, k)[0] for k in dropped}
        left = {k: n for k, n in counts.items() if n}
        if not dropped:
            return CheckResult(
                CHECK_NO_UNMOVED_ROWS,
                True,
                f"{target} reads every {state.layout} key (a split): no key is dropped",
            )
        where = f"the {len(dropped)} {state.layout} key(s) {target} does not read"
        if not left:
            return CheckResult(CHECK_NO_UNMOVED_ROWS, True, f"no saga row left on {where}")
        return CheckResult(
            CHECK_NO_UNMOVED_ROWS,
            False,
            f"{sum(left.values())} saga row(s) still on {where}, which readers stop reading "
            f"after the move (e.g. {', '.join(list(left)[:5])}): run the backfill again",
        )

    def rows_left(state: ControlState) -> CheckResult:
        if state.phase is StatePhase.RESHARDING:
            return unmoved(state)
        report = drift(state)
        if requested is StatePhase.SHARDED:
            count, where = report.unexpected_legacy_rows, "the legacy key"
            name = CHECK_NO_LEGACY_ROWS
            refs = report.unexpected_legacy
        else:
            count, where = report.sharded_rows, f"the {report.shard_count} shard keys"
            name = CHECK_NO_SHARDED_ROWS
            # Judged with the state being left, whose readers still read these keys.
            refs = ()
        if count == 0:
            return CheckResult(name, True, f"no saga row left on {where}")
        examples = ", ".join(ref.pk for ref in refs[:5])
        return CheckResult(
            name,
            False,
            f"{count} saga row(s) still on {where}, which readers stop reading after the "
            f"move{f' (e.g. {examples})' if examples else ''}: run the backfill again",
        )

    def misrouted(state: ControlState) -> CheckResult:
        report = drift(state)
        if report.misrouted_rows == 0:
            return CheckResult(CHECK_NO_MISROUTED_ROWS, True, "no row under a wrong shard key")
        examples = ", ".join(ref.pk for ref in report.misrouted[:5])
        if state.phase is StatePhase.RESHARDING:
            target = _target_layout(state, requested)
            return CheckResult(
                CHECK_NO_MISROUTED_ROWS,
                False,
                f"{report.misrouted_rows} row(s) under a shard key that is not their person's "
                f"in {target}: not yet moved, or misrouted (e.g. {examples}): run the "
                "backfill again, then see `saga-index drift`",
            )
        return CheckResult(
            CHECK_NO_MISROUTED_ROWS,
            False,
            f"{report.misrouted_rows} row(s) under a shard key that is not their person's "
            f"(e.g. {examples}): see `saga-index drift`",
        )

    def parity(state: ControlState) -> CheckResult:
        target = _target_layout(state, requested)
        verifier = ParityVerifier(
            cli.client,
            table,
            phase=Phase.SHARDED if target.is_sharded else Phase.LEGACY,
            shard_count=target.shard_count or state.layout.shard_count or DEFAULT_SHARD_COUNT,
            scan_options=ScanOptions(
                segments=options.segments,
                read_units_per_second=options.scan_rate,
                consistent_read=True,
            ),
            recheck_delay_seconds=options.recheck_delay_seconds,
        )
        report = verifier.verify(sample=options.sample).report
        if report.ok:
            return CheckResult(
                CHECK_PARITY,
                True,
                f"reads as {target} return all {report.truth_rows} saga row(s) "
                f"({len(report.persons)} person(s) sampled)",
            )
        findings = report.missing + report.extra + report.misrouted
        examples = {f.key[0]: f.reason for f in findings}  # one per row, in report order
        rows = {
            kind: len({f.key for f in found})
            for kind, found in (
                ("missing", report.missing),
                ("extra", report.extra),
                ("misrouted", report.misrouted),
            )
        }
        return CheckResult(
            CHECK_PARITY,
            False,
            f"reads as {target}: "
            + ", ".join(f"{count} row(s) {kind}" for kind, count in rows.items())
            + f" of {report.truth_rows} saga row(s) (e.g. "
            + "; ".join(f"{pk}: {reason}" for pk, reason in list(examples.items())[:3])
            + "): see `saga-index --phase "
            + (f"sharded --shards {target.shard_count}" if target.is_sharded else "legacy")
            + " verify`",
        )

    rows_name = CHECK_NO_LEGACY_ROWS if requested is StatePhase.SHARDED else CHECK_NO_SHARDED_ROWS
    if cli.read_state().phase is StatePhase.RESHARDING:
        rows_name = CHECK_NO_UNMOVED_ROWS
    return [
        Precondition(rows_name, _never_raises(rows_name, rows_left)),
        Precondition(CHECK_NO_MISROUTED_ROWS, _never_raises(CHECK_NO_MISROUTED_ROWS, misrouted)),
        Precondition(CHECK_PARITY, _never_raises(CHECK_PARITY, parity)),
    ]


def _target_layout(state: ControlState, requested: StatePhase) -> Layout:
    return plan_move(state, requested).layout


def _never_raises(
    name: str, run: Callable[[ControlState], CheckResult]
) -> Callable[[ControlState], CheckResult]:
    def guarded(state: ControlState) -> CheckResult:
        try:
            return run(state)
        except (SagaIndexError, ClientError, BotoCoreError) as err:
            return CheckResult(name, False, f"could not run: {type(err).__name__}: {err}")

    return guarded


# ---- commands ----------------------------------------------------------------------------------


@click.group("phase")
def phase_group() -> None:
    """Show or change the migration state: the control record (docs/control-contract.md)."""


@phase_group.command("show")
@json_option
@click.option("--history", is_flag=True, help="Also list every transition, oldest first.")
@pass_cli
def show_command(cli: CliContext, as_json: bool, history: bool) -> None:
    """Print the control record: the state every reader and writer follows.

    The global --phase/--shards do not apply: this is the record as stored.

    \b
    --json keys: table, condition (present | never-migrated | missing), phase, version,
    layout, shardCount (the current layout's N; null while legacy or migrating), movingTo
    ({layout, shardCount} or null), changedAt, changedBy, reason, effectiveAt, effective
    (effectiveAt has passed), secondsUntilEffective, previousPhase, checksPassed,
    checksForced, routing ({writes, reads}), allowedMoves; with --history, history (one
    object per transition: version, from, to, changedAt, changedBy, reason, effectiveAt,
    checksPassed, checksForced, ...).

    Exit 0 shown; 1 the record is missing (it is still shown, from its history) or cannot be
    read.
    """
    store = cli.control_store()
    state = cli.read_state()
    doc = record_document(state, store.table_name, cli.now())
    if history:
        doc["history"] = [transition_document(t) for t in store.history()]
    if as_json:
        emit(doc)
    else:
        lines = _record_lines(doc)
        for item in doc.get("history", []):
            forced = f" FORCED {','.join(item['checksForced'])}" if item["checksForced"] else ""
            lines.append(
                f"  v{item['version']}: {item['from']} -> {item['to']} at {item['changedAt']} "
                f"by {item['changedBy']}: {item['reason']}{forced}"
            )
        click.echo("\n".join(lines))
    _missing_warning(state)
    raise click.exceptions.Exit(EXIT_MISSING if state.condition is RecordCondition.MISSING else 0)


def _phase_argument(_: click.Context, __: click.Parameter, value: str) -> StatePhase:
    try:
        return StatePhase.parse(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


@phase_group.command("set")
@click.argument(
    "phase",
    type=click.Choice([p.value for p in StatePhase], case_sensitive=False),
    callback=_phase_argument,
)
@click.option("--reason", required=True, help="Why (recorded in the record and its history).")
@click.option(
    "--shards",
    type=int,
    default=None,
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
@json_option
@click.option(
    "--sample",
    type=click.IntRange(0, 100_000),
    default=DEFAULT_SAMPLE,
    show_default=True,
    help="Parity check: persons whose by-person reads are compared.",
)
@click.option(
    "--recheck-delay",
    type=click.FloatRange(0, 300),
    default=DEFAULT_RECHECK_DELAY_SECONDS,
    show_default=True,
    help="Parity check: seconds before mismatches are re-checked once (GSI propagation).",
)
@click.option(
    "--scan-rate",
    type=click.FloatRange(min=1, max=40_000),
    default=400.0,
    show_default=True,
    help="Parity check: read units per second its base-table scan may use.",
)
@click.option(
    "--segments", type=click.IntRange(1, 64), default=4, show_default=True, help="Scan segments."
)
@pass_cli
def set_command(
    cli: CliContext,
    phase: StatePhase,
    reason: str,
    shards: int | None,
    force: bool,
    as_json: bool,
    sample: int,
    recheck_delay: float,
    scan_rate: float,
    segments: int,
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
    checks ([{name, passed, detail}]) and historyWritten.

    \b
    Exit codes:
      0  changed
      1  lost the race (another change landed first: the message names its version), or the
         record is missing or unreadable
      2  not an allowed move (the message names the allowed ones), a --shards that is not a
         power of two or disagrees with the record, a re-shard --shards that is not one
         factor of two (the message names the allowed values), a global --phase/--shards
         that disagrees
      3  refused: a check failed; stdout {"refused": true, "failed": [{name, passed,
         detail}], "requested": PHASE}; nothing was written
    """
    store = cli.control_store()
    state = cli.read_state()
    cli.require_overrides_agree(state)
    # Refuse a move that is not allowed before anything expensive (exit 2).
    move = plan_move(state, phase, shard_count=shards)
    checks = (
        completion_checks(
            cli,
            phase,
            CheckOptions(
                sample=sample,
                recheck_delay_seconds=recheck_delay,
                scan_rate=scan_rate,
                segments=segments,
            ),
        )
        if move.guarded
        else []
    )
    change = set_phase(
        store,
        phase,
        changed_by=cli.changed_by(),
        reason=reason,
        shard_count=shards,
        force=force,
        checks=checks,
        clock=cli.hooks.clock,
        timing=cli.hooks.timing,
    )
    _print_change(cli, store.table_name, change, as_json)


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
        }
    )
    if as_json:
        emit(doc)
    else:
        lines = [
            f"phase {transition.previous_phase.value} -> {transition.phase.value}: "
            f"version {transition.version} written",
            *_record_lines(doc)[1:],
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
    routing = routing_for(change.state)
    click.echo(
        f"saga-index: every process follows the new routing ({describe_routing(routing)}) by "
        f"{format_time(transition.effective_at)}",
        err=True,
    )


@phase_group.command("restore")
@json_option
@pass_cli
def restore_command(cli: CliContext, as_json: bool) -> None:
    """Re-create a deleted STATE item from the newest history item (same version, layouts).

    The lease, throttle, pause flag and last backfill are not in history: they come back
    empty, so a completing move needs a new verified backfill. Nothing happens when the STATE
    item exists. Prints the record as `phase show` does. Exit 0 restored or nothing to do.
    """
    store = cli.control_store()
    before = cli.read_state()
    cli.require_overrides_agree(before)
    state = restore_state(store)
    doc = record_document(state, store.table_name, cli.now())
    doc["restored"] = before.condition is RecordCondition.MISSING
    if as_json:
        emit(doc)
    else:
        click.echo("\n".join(_record_lines(doc)))
    click.echo(
        "saga-index: "
        + (
            f"STATE restored from history version {state.version}"
            if doc["restored"]
            else "the STATE item exists: nothing to restore"
        ),
        err=True,
    )
