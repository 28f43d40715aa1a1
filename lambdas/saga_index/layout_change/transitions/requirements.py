"""What a move requires beyond its edge (rules.py): the checks of a completing move and the guard
of a table's first move. `change_phase` (executor.py) chooses them from the record it read and
runs them at the moment of the change, between that read and its compare-and-set: no caller
picks them. Which they are is in docs/control-contract.md,
Transitions.

Each completion check is judged against the TARGET state's routing: the current state's reads
both layouts, so its parity would pass while rows still sit on the key about to be dropped. The
target `legacy` names no shard count, so for -> legacy the rows on shard keys are counted over
the keys of the state being left (its N), exactly the keys the target stops reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import DEFAULT_SHARD_COUNT, Layout, SagaIndexError
from saga_index.layout_change.checks import (
    RowsSeen,
    probe_shard_keys,
    shard_rows_refusal,
)
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.layout_change.checks.parity import (
    DEFAULT_RECHECK_DELAY_SECONDS,
    DEFAULT_SAMPLE,
    ParityReport,
    ParityVerifier,
)
from saga_index.layout_change.record import ControlState, ControlStore, Phase, Routing
from saga_index.layout_change.transitions.errors import PreconditionResult
from saga_index.layout_change.transitions.rules import Precondition, backfill_verified, plan_move
from saga_index.store import count_partition
from saga_index.store.dynamo import ScanOptions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CHECK_NO_LEGACY_ROWS = "no-legacy-rows"
CHECK_NO_SHARDED_ROWS = "no-sharded-rows"
CHECK_NO_UNMOVED_ROWS = "no-unmoved-rows"
CHECK_NO_MISROUTED_ROWS = "no-misrouted-rows"
CHECK_PARITY = "parity"
CHECK_NO_SHARDED_ROWS_YET = "no-rows-on-shard-keys"


@dataclass(frozen=True)
class CompletionCheckOptions:
    """How the checks read the table (the parity scan is a consistent base-table Scan)."""

    sample: int = DEFAULT_SAMPLE
    recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS
    scan_rate: float = 400.0
    segments: int = 4


def completion_checks(
    store: ControlStore,
    state: ControlState,
    requested: Phase,
    options: CompletionCheckOptions = CompletionCheckOptions(),
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Precondition]:
    """The preconditions of a completing move from `state` (the record as read before the
    move) to `requested` (sharded or legacy), reading the table behind `store`.

    Each runs against the state `change_phase` read, at the moment of the change. A check that
    cannot read the table fails (naming the error): it never passes by default. `sleep` waits
    out the parity check's re-check delay.
    """
    move = _CompletingMove(store.client, store.table_name, requested, options, sleep)
    rows_name = CHECK_NO_LEGACY_ROWS if requested is Phase.SHARDED else CHECK_NO_SHARDED_ROWS
    if state.phase is Phase.RESHARDING:
        rows_name = CHECK_NO_UNMOVED_ROWS
    checks: list[tuple[str, Callable[[_CompletingMove, ControlState], PreconditionResult]]] = [
        (rows_name, _rows_left),
        (CHECK_NO_MISROUTED_ROWS, _misrouted),
        (CHECK_PARITY, _parity),
    ]
    return [Precondition(name, never_raises(name, partial(run, move))) for name, run in checks]


# How the first move's guard reads the shard keys (client, table name): one row of each.
ShardKeyProbe = Callable[[Any, str], RowsSeen]


def failing_completion_checks(
    store: ControlStore,
    state: ControlState,
    requested: Phase,
    options: CompletionCheckOptions = CompletionCheckOptions(),
    *,
    shard_count: int | None = None,
) -> list[PreconditionResult]:
    """The checks of the completing move from `state` to `requested` that fail now, run
    read-only: backfill-verified and the row checks, parity left out (it scans the whole base
    table; it runs at the change itself). What a "not yet" answer names, so its caller learns at
    once that waiting alone will not do. Empty for a move that is never blocked."""
    move = plan_move(state, requested, shard_count=shard_count)
    if move.completes is None:
        return []
    checks = [
        c for c in completion_checks(store, state, requested, options) if c.name != CHECK_PARITY
    ]
    results = [backfill_verified(state, move.completes), *(check.run(state) for check in checks)]
    return [result for result in results if not result.passed]


def first_move_guard(store: ControlStore, probe: ShardKeyProbe = probe_shard_keys) -> Precondition:
    """Before the first move: a row on a shard key while the record says never migrated means
    the control partition was lost after a migration, and starting over would hide it. `probe`
    reads the shard keys (one Query with Limit 1 per possible shard key)."""

    def run(_: ControlState) -> PreconditionResult:
        seen = probe(store.client, store.table_name)
        if seen.any_sharded:
            return PreconditionResult(CHECK_NO_SHARDED_ROWS_YET, False, shard_rows_refusal(seen))
        return PreconditionResult(
            CHECK_NO_SHARDED_ROWS_YET,
            True,
            f"no saga row on any of the {seen.requests} shard keys ({seen.requests} queries)",
        )

    return Precondition(CHECK_NO_SHARDED_ROWS_YET, run)


@dataclass
class _CompletingMove:
    """What every check of one completing move reads: the table, the target, the options."""

    client: DynamoDBClient
    table: str
    requested: Phase
    options: CompletionCheckOptions
    sleep: Callable[[float], None]
    drift_of: dict[int, DriftReport] = field(default_factory=dict)

    def target(self, state: ControlState) -> Layout:
        return plan_move(state, self.requested).layout

    def drift(self, state: ControlState) -> DriftReport:
        # One drift read serves both drift checks.
        if state.version not in self.drift_of:
            target = self.target(state)
            if target.is_sharded:
                routing = Routing.between(target)
            else:
                # The target names no N: read the shard keys of the state being left.
                routing = Routing.between(state.layout, state.moving_to)
            checker = DriftChecker(self.client, self.table, routing=routing)
            self.drift_of[state.version] = checker.check(scan_unindexed=False)
        return self.drift_of[state.version]


def _unmoved(move: _CompletingMove, state: ControlState) -> PreconditionResult:
    # The target's drift read covers only the target's keys: the source keys it drops (a
    # merge's upper half) are counted here, one COUNT Query each.
    target = move.target(state)
    dropped = [k for k in state.layout.partitions() if k not in set(target.partitions())]
    counts = {k: count_partition(move.client, move.table, k)[0] for k in dropped}
    left = {k: n for k, n in counts.items() if n}
    if not dropped:
        return PreconditionResult(
            CHECK_NO_UNMOVED_ROWS,
            True,
            f"{target} reads every {state.layout} key (a split): no key is dropped",
        )
    where = f"the {len(dropped)} {state.layout} key(s) {target} does not read"
    if not left:
        return PreconditionResult(CHECK_NO_UNMOVED_ROWS, True, f"no saga row left on {where}")
    return PreconditionResult(
        CHECK_NO_UNMOVED_ROWS,
        False,
        f"{sum(left.values())} saga row(s) still on {where}, which readers stop reading "
        f"after the move (e.g. {', '.join(list(left)[:5])}): run the backfill again",
    )


def _rows_left(move: _CompletingMove, state: ControlState) -> PreconditionResult:
    if state.phase is Phase.RESHARDING:
        return _unmoved(move, state)
    report = move.drift(state)
    if move.requested is Phase.SHARDED:
        count, where = report.unexpected_legacy_rows, "the legacy key"
        name = CHECK_NO_LEGACY_ROWS
        refs = report.unexpected_legacy
    else:
        count, where = report.sharded_rows, f"the {report.shard_count} shard keys"
        name = CHECK_NO_SHARDED_ROWS
        # Judged with the state being left, whose readers still read these keys.
        refs = ()
    if count == 0:
        return PreconditionResult(name, True, f"no saga row left on {where}")
    examples = ", ".join(ref.pk for ref in refs[:5])
    # To legacy: the rollback run moves them, and once in legacy the same command still
    # moves any row left on a shard key home (the clean-up of stray rows).
    again = (
        "run the backfill again"
        if move.requested is Phase.SHARDED
        else "run `saga-index backfill --direction rollback` again (in legacy too it "
        "moves every row on a shard key home)"
    )
    return PreconditionResult(
        name,
        False,
        f"{count} saga row(s) still on {where}, which readers stop reading after the "
        f"move{f' (e.g. {examples})' if examples else ''}: {again}",
    )


def _misrouted(move: _CompletingMove, state: ControlState) -> PreconditionResult:
    report = move.drift(state)
    if report.misrouted_rows == 0:
        return PreconditionResult(CHECK_NO_MISROUTED_ROWS, True, "no row under a wrong shard key")
    examples = ", ".join(ref.pk for ref in report.misrouted[:5])
    if state.phase is Phase.RESHARDING:
        target = move.target(state)
        return PreconditionResult(
            CHECK_NO_MISROUTED_ROWS,
            False,
            f"{report.misrouted_rows} row(s) under a shard key that is not their person's "
            f"in {target}: not yet moved, or misrouted (e.g. {examples}): run the "
            "backfill again, then see `saga-index drift`",
        )
    return PreconditionResult(
        CHECK_NO_MISROUTED_ROWS,
        False,
        f"{report.misrouted_rows} row(s) under a shard key that is not their person's "
        f"(e.g. {examples}): see `saga-index drift`",
    )


def _parity(move: _CompletingMove, state: ControlState) -> PreconditionResult:
    target = move.target(state)
    options = move.options
    verifier = ParityVerifier(
        move.client,
        move.table,
        phase=Phase.SHARDED if target.is_sharded else Phase.LEGACY,
        shard_count=target.shard_count or state.layout.shard_count or DEFAULT_SHARD_COUNT,
        scan_options=ScanOptions(
            segments=options.segments,
            read_units_per_second=options.scan_rate,
            consistent_read=True,
        ),
        recheck_delay_seconds=options.recheck_delay_seconds,
        sleep=move.sleep,
    )
    report = verifier.verify(sample=options.sample).report
    if report.ok:
        return PreconditionResult(
            CHECK_PARITY,
            True,
            f"reads as {target} return all {report.truth_rows} saga row(s) "
            f"({len(report.persons)} person(s) sampled)",
        )
    return PreconditionResult(CHECK_PARITY, False, _parity_failure(target, report))


def _parity_failure(target: Layout, report: ParityReport) -> str:
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
    return (
        f"reads as {target}: "
        + ", ".join(f"{count} row(s) {kind}" for kind, count in rows.items())
        + f" of {report.truth_rows} saga row(s) (e.g. "
        + "; ".join(f"{pk}: {reason}" for pk, reason in list(examples.items())[:3])
        + "): see `saga-index --phase "
        + (f"sharded --shards {target.shard_count}" if target.is_sharded else "legacy")
        + " verify`"
    )


def never_raises(
    name: str, run: Callable[[ControlState], PreconditionResult]
) -> Callable[[ControlState], PreconditionResult]:
    def guarded(state: ControlState) -> PreconditionResult:
        try:
            return run(state)
        except (SagaIndexError, ClientError, BotoCoreError) as err:
            return PreconditionResult(name, False, f"could not run: {type(err).__name__}: {err}")

    return guarded
