"""One attempt of `phase set` (`change_once`): the record read, the options mapped to the domain's
operation (`change_phase`, which plans the move and chooses its checks itself), the change
written; and `--wait`'s retry of a "not yet" at its retryAt
(`change_when_settled`)."""

from __future__ import annotations

from dataclasses import dataclass

from saga_index.index import RetryLaterError
from saga_index.layout_change.record import ControlRecordInvalidError, ControlState, Phase
from saga_index.layout_change.transitions import (
    CompletionCheckOptions,
    PhaseChange,
    change_phase,
    failing_completion_checks,
    plan_move,
)
from saga_index_cli.context import CliContext
from saga_index_cli.phase.not_yet import NotYetError
from saga_index_cli.phase.unchanged import is_already
from saga_index_cli.phase.wait import wait_until


@dataclass(frozen=True)
class ChangeRequest:
    """What `phase set` was asked: the phase, why, its N, --force and the checks' options."""

    phase: Phase
    reason: str
    shards: int | None
    force: bool
    options: CompletionCheckOptions


def change_when_settled(cli: CliContext, request: ChangeRequest) -> PhaseChange | None:
    """`change_once`, and after a "not yet" that names no failing check, again at its retryAt (the
    checks then run at that moment): what `--wait` does before the write."""
    while True:
        try:
            return change_once(cli, request)
        except NotYetError as err:
            if err.failed or err.retry_at is None:
                raise
            what = f"phase {request.phase.value} can be set once the switch settles"
            wait_until(cli, err.retry_at, what)
            cli.reread_state()


def change_once(cli: CliContext, request: ChangeRequest) -> PhaseChange | None:
    """One attempt of `phase set`: the change written, or None when the record already is what
    was asked. A completing move before its switch settled raises NotYetError naming the
    checks that already fail."""
    store = cli.control_store()
    phase, shards = request.phase, request.shards
    state = read_state(cli)
    cli.require_overrides_agree(state)
    if is_already(state, phase, shards):
        return None
    # Refuse a move that is not allowed before anything expensive (exit 2).
    move = plan_move(state, phase, shard_count=shards)
    try:
        return change_phase(
            store,
            phase,
            changed_by=cli.changed_by(),
            reason=request.reason,
            shard_count=shards,
            force=request.force,
            options=request.options,
            probe=cli.hooks.shard_key_probe,
            clock=cli.hooks.clock,
            timing=cli.hooks.timing,
        )
    except RetryLaterError as err:
        if not move.guarded or err.retry_at is None:
            raise
        # The checks --force skips are not run: it would be set at retryAt whatever they say.
        failed = (
            []
            if request.force
            else failing_completion_checks(store, state, phase, request.options, shard_count=shards)
        )
        raise NotYetError(err, failed) from err


def read_state(cli: CliContext) -> ControlState:
    """The record, or the error that says how to repair a STATE item that does not parse."""
    try:
        return cli.read_state()
    except ControlRecordInvalidError as err:
        raise ControlRecordInvalidError(
            f"the control record's STATE item does not parse ({err}): nothing can change it "
            "until it is repaired. See it with `saga-index status`, repair it with "
            "`saga-index phase restore` (docs/runbook.md)"
        ) from err
