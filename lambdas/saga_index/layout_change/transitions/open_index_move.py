"""`open-index set` against the store: the open-saga index's moves (open_index_rules.py), written
exactly as a layout move is (executor.py): the HISTORY intent first, the STATE compare-and-set,
the settle, a lost answer read back. This room chooses what each move requires; no caller does:

  every move to `adding` or `open`  the index exists, is ACTIVE and not Backfilling (the
                                    `readiness` callable reads DescribeTable); never forced
  a table's first move              the shard-key probe (a lost control partition)
  adding -> open                    open-index-parity (checks/open_index.py), judged only after
                                    effectiveAt + the in-flight margin
  removing -> off                   no-open-index-keys, after the same wait

`force` skips the checks and the first move's guard (recorded in checksForced), never the
readiness or the settled switch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from saga_index.index import InvalidInputError, RetryLaterError
from saga_index.layout_change.checks import OpenIndexReader, probe_shard_keys
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlState,
    ControlStore,
    ControlTiming,
    OpenIndexState,
    WallClock,
    format_time,
    utc_now,
)
from saga_index.layout_change.transitions.errors import PreconditionFailedError, PreconditionResult
from saga_index.layout_change.transitions.executor import Judged, PhaseChange, write_move
from saga_index.layout_change.transitions.open_index_rules import (
    PlannedOpenIndexMove,
    plan_open_index_move,
)
from saga_index.layout_change.transitions.requirements import (
    CompletionCheckOptions,
    ShardKeyProbe,
    first_move_guard,
    never_raises,
)
from saga_index.layout_change.transitions.rules import Precondition, settled_at
from saga_index.store import open_index_readiness
from saga_index.store.dynamo import ScanOptions

log = logging.getLogger(__name__)

CHECK_OPEN_INDEX_PARITY = "open-index-parity"
CHECK_NO_OPEN_INDEX_KEYS = "no-open-index-keys"
_DEFAULT_OPTIONS = CompletionCheckOptions()


class Readiness(Protocol):
    """What DescribeTable says of the open index (saga_index.store's OpenIndexReadiness)."""

    @property
    def ready(self) -> bool: ...

    @property
    def exists(self) -> bool: ...

    @property
    def problem(self) -> str | None: ...

    @property
    def index_status(self) -> str | None: ...

    @property
    def backfilling(self) -> bool | None: ...

    @property
    def keys_as_expected(self) -> bool | None: ...

    @property
    def projection_as_expected(self) -> bool | None: ...


# Reads the open index's readiness on a table: (client, table name) -> its verdict.
ReadinessCheck = Callable[[Any, str], Readiness]


class OpenIndexNotReadyError(InvalidInputError):
    """The open index does not exist or is not what readers need (CLI exit 2): nothing written."""


class OpenIndexBuildingError(RetryLaterError):
    """The open index exists but DynamoDB is still building it (CLI exit 5): nothing written."""


def change_open_index(
    store: ControlStore,
    requested: OpenIndexState | str,
    *,
    changed_by: str,
    reason: str,
    readiness: ReadinessCheck = open_index_readiness,
    shard_count: int | None = None,
    force: bool = False,
    options: CompletionCheckOptions = _DEFAULT_OPTIONS,
    probe: ShardKeyProbe = probe_shard_keys,
    sleep: Callable[[float], None] = time.sleep,
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
) -> PhaseChange:
    """Move the open index to `requested` along an allowed edge, the one way such a move is
    written. Raises what change_phase raises (OpenIndexMoveNotAllowedError for a move out of
    order or after the end, PreconditionFailedError, VersionConflictError, ...), plus
    OpenIndexNotReadyError / OpenIndexBuildingError when the index is not there to move to."""

    def judge(state: ControlState, move: PlannedOpenIndexMove) -> Judged:
        if move.to.stamps:
            _require_ready(readiness(store.client, store.table_name))
        if move.completes:
            _require_settled(state, move, clock(), timing)
        checks = _checks(store, move, options, sleep)
        if state.version == 0:
            checks.append(first_move_guard(store, probe))
        return _judge(move, checks, force=force)

    return write_move(
        store,
        changed_by=changed_by,
        reason=reason,
        plan=lambda state: plan_open_index_move(state, requested, shard_count=shard_count),
        judge=judge,
        describe=lambda move: f"open index {move.to}",
        clock=clock,
        timing=timing,
    )


def _require_ready(verdict: Readiness) -> None:
    if verdict.ready:
        return
    problem = verdict.problem or "the open index is not ready"
    built_right = (
        verdict.keys_as_expected is not False and verdict.projection_as_expected is not False
    )
    if verdict.exists and built_right and (verdict.index_status != "ACTIVE" or verdict.backfilling):
        # DynamoDB is still building it: the same command succeeds once it has.
        raise OpenIndexBuildingError(f"{problem}. Nothing written; run it again once it is")
    raise OpenIndexNotReadyError(f"{problem}. Nothing written")


def _require_settled(
    state: ControlState, move: PlannedOpenIndexMove, now: datetime, timing: ControlTiming
) -> None:
    """A completing move judges what writers stamped under the state it leaves: refused until
    every write chosen under the state before it can have landed. `--force` does not skip it."""
    settled = settled_at(state, timing.in_flight_margin_seconds)
    effective_at = state.effective_at
    if settled is None or effective_at is None or now >= settled:
        return
    raise RetryLaterError(
        f"open index {move.to.state.value} is judged on what writers stamped under version "
        f"{state.version}, and writes chosen under the state before it may still land until "
        f"{format_time(settled)} (effectiveAt {format_time(effective_at)} plus the "
        f"{timing.in_flight_margin_seconds:g} s in-flight margin): nothing written; run it "
        f"again at or after {format_time(settled)} (in {(settled - now).total_seconds():.1f} s)."
        " --force does not skip this wait",
        retry_at=settled,
    )


def _checks(
    store: ControlStore,
    move: PlannedOpenIndexMove,
    options: CompletionCheckOptions,
    sleep: Callable[[float], None],
) -> list[Precondition]:
    if not move.completes:
        return []
    index = move.from_state.open_index
    reader = OpenIndexReader(
        store.client,
        store.table_name,
        ScanOptions(segments=options.segments, read_units_per_second=options.scan_rate),
        recheck_delay_seconds=options.recheck_delay_seconds,
        sleep=sleep,
    )
    if move.to.state is OpenIndexState.OPEN:

        def parity(_: ControlState) -> PreconditionResult:
            report = reader.check(index, stamps_expected=True)
            if report.ok:
                return PreconditionResult(
                    CHECK_OPEN_INDEX_PARITY,
                    True,
                    f"all {report.open_rows} open saga(s) of {report.rows} saga row(s) are in "
                    f"{index} under their key; no closed saga is",
                )
            return PreconditionResult(
                CHECK_OPEN_INDEX_PARITY,
                False,
                f"{len(report.differences)} row(s) differ between the base table and the open "
                f"index {index} (e.g. {report.examples()}): run `saga-index open-index "
                "backfill` (or let writers touch them), then try again",
            )

        name, run = CHECK_OPEN_INDEX_PARITY, parity
        return [Precondition(name, never_raises(name, run))]

    def empty(_: ControlState) -> PreconditionResult:
        report = reader.check(index, stamps_expected=False)
        if report.ok:
            return PreconditionResult(
                CHECK_NO_OPEN_INDEX_KEYS,
                True,
                f"none of {report.rows} saga row(s) carries OpenSagaPK; the open index is empty",
            )
        return PreconditionResult(
            CHECK_NO_OPEN_INDEX_KEYS,
            False,
            f"{len(report.differences)} row(s) still carry OpenSagaPK or sit in the open index "
            f"(e.g. {report.examples()}): remove the stamps (`saga-index open-index backfill`), "
            "then try again",
        )

    return [Precondition(CHECK_NO_OPEN_INDEX_KEYS, never_raises(CHECK_NO_OPEN_INDEX_KEYS, empty))]


def _judge(move: PlannedOpenIndexMove, checks: list[Precondition], *, force: bool) -> Judged:
    if not checks:  # an opening move, or an abort, on a table that has moved before
        return Judged()
    if force:
        return Judged(forced=tuple(c.name for c in checks))
    results = tuple(c.run(move.from_state) for c in checks)
    failed = [r for r in results if not r.passed]
    if failed:
        raise PreconditionFailedError(f"open index {move.to.state.value}", failed)
    return Judged(results)
