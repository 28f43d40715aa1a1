"""The checks of a completing move, run by `saga-index phase set` (commands.py) at the moment of
the change, between its read of the record and its compare-and-set: which they are is in
docs/control-contract.md, Transitions.

Each is judged against the TARGET state's routing: the current state's reads both layouts, so
its parity would pass while rows still sit on the key about to be dropped. The target `legacy`
names no shard count, so for -> legacy the rows on shard keys are counted over the keys of the
state being left (its N), exactly the keys the target stops reading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import DEFAULT_SHARD_COUNT, Layout, SagaIndexError
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.layout_change.checks.parity import (
    DEFAULT_RECHECK_DELAY_SECONDS,
    DEFAULT_SAMPLE,
    ParityVerifier,
)
from saga_index.layout_change.record import CheckResult, ControlState, Phase, Routing
from saga_index.layout_change.transitions import Precondition, plan_move
from saga_index.store import count_partition
from saga_index.store.dynamo import ScanOptions
from saga_index_cli.context import CliContext

CHECK_NO_LEGACY_ROWS = "no-legacy-rows"
CHECK_NO_SHARDED_ROWS = "no-sharded-rows"
CHECK_NO_UNMOVED_ROWS = "no-unmoved-rows"
CHECK_NO_MISROUTED_ROWS = "no-misrouted-rows"
CHECK_PARITY = "parity"


@dataclass(frozen=True)
class CheckOptions:
    """How the checks read the table (the parity scan is a consistent base-table Scan)."""

    sample: int = DEFAULT_SAMPLE
    recheck_delay_seconds: float = DEFAULT_RECHECK_DELAY_SECONDS
    scan_rate: float = 400.0
    segments: int = 4


def completion_checks(
    cli: CliContext, requested: Phase, options: CheckOptions
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
        if state.phase is Phase.RESHARDING:
            return unmoved(state)
        report = drift(state)
        if requested is Phase.SHARDED:
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
        # To legacy: the rollback run moves them, and once in legacy the same command still
        # moves any row left on a shard key home (the clean-up of stray rows).
        again = (
            "run the backfill again"
            if requested is Phase.SHARDED
            else "run `saga-index backfill --direction rollback` again (in legacy too it "
            "moves every row on a shard key home)"
        )
        return CheckResult(
            name,
            False,
            f"{count} saga row(s) still on {where}, which readers stop reading after the "
            f"move{f' (e.g. {examples})' if examples else ''}: {again}",
        )

    def misrouted(state: ControlState) -> CheckResult:
        report = drift(state)
        if report.misrouted_rows == 0:
            return CheckResult(CHECK_NO_MISROUTED_ROWS, True, "no row under a wrong shard key")
        examples = ", ".join(ref.pk for ref in report.misrouted[:5])
        if state.phase is Phase.RESHARDING:
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

    rows_name = CHECK_NO_LEGACY_ROWS if requested is Phase.SHARDED else CHECK_NO_SHARDED_ROWS
    if cli.read_state().phase is Phase.RESHARDING:
        rows_name = CHECK_NO_UNMOVED_ROWS
    return [
        Precondition(rows_name, _never_raises(rows_name, rows_left)),
        Precondition(CHECK_NO_MISROUTED_ROWS, _never_raises(CHECK_NO_MISROUTED_ROWS, misrouted)),
        Precondition(CHECK_PARITY, _never_raises(CHECK_PARITY, parity)),
    ]


def _target_layout(state: ControlState, requested: Phase) -> Layout:
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
