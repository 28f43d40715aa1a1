"""`saga-index backfill throttle|pause|resume`: change a running backfill through the control
record; its workers pick the change up at their next heartbeat."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from saga_index.index import MAX_WRITES_PER_SECOND, MIN_WRITES_PER_SECOND
from saga_index.layout_change.backfill import CONTROL_POLL_SECONDS
from saga_index.layout_change.lease import (
    clear_throttle,
    pause_backfill,
    resume_backfill,
    set_throttle,
)
from saga_index.layout_change.record import ControlState
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.options import FiniteFloatRange
from saga_index_cli.output import emit, json_option
from saga_index_cli.status.report import completion_document, lease_document

_reason_option = click.option(
    "--reason", default="", help="Why (recorded in the control record's event history)."
)


def _control_change(
    cli: CliContext,
    change: Callable[[str], ControlState],
    message: Callable[[ControlState], str],
    as_json: bool,
) -> None:
    state = cli.read_state()
    cli.require_overrides_agree(state)
    changed = change(cli.changed_by())
    now = cli.now()
    if as_json:
        emit(
            {
                "table": cli.require_table(),
                "phase": changed.phase.value,
                "version": changed.version,
                "backfillMaxWritesPerSecond": changed.backfill_max_writes_per_second,
                "backfillPaused": changed.backfill_paused,
                "lease": lease_document(changed.lease, now),
                "lastBackfill": completion_document(changed.last_backfill),
            }
        )
        return
    lease = changed.lease
    running = (
        f"the {lease.kind.value} run {lease.holder!r} picks it up at its next heartbeat "
        "(locally within "
        f"{CONTROL_POLL_SECONDS:.0f} s; Step Functions: within its workers' next heartbeat)"
        if lease is not None and lease.is_live(now)
        else "no run holds the lease now: the next run starts with it"
    )
    click.echo(f"{message(changed)}; {running}")


class _ThrottleRate(FiniteFloatRange):
    """The throttle's range, and the command an operator who asked for 0 writes/s wants."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as err:
            try:
                stop_writing = float(value) <= 0
            except (TypeError, ValueError):
                stop_writing = False
            if not stop_writing:
                raise
            raise click.BadParameter(
                f"{err.message} To stop the backfill writing, pause it: `saga-index backfill "
                "pause` (then `saga-index backfill resume`)",
                ctx=ctx,
                param=param,
            ) from None


@click.command("throttle")
@click.option(
    "--max-writes-per-second",
    type=_ThrottleRate(MIN_WRITES_PER_SECOND, MAX_WRITES_PER_SECOND),
    default=None,
    help="The new cap over ALL segments: it lowers a run's own --max-writes-per-second, "
    "never raises it. 0 is not a cap: `backfill pause` stops the writes.",
)
@click.option(
    "--clear",
    is_flag=True,
    help="Remove the cap from the record: a running backfill goes back to its own "
    "--max-writes-per-second, and the next run starts with its own.",
)
@_reason_option
@json_option
@click.pass_context
def throttle_command(
    ctx: click.Context,
    max_writes_per_second: float | None,
    clear: bool,
    reason: str,
    as_json: bool,
) -> None:
    """Set (--max-writes-per-second R) or remove (--clear) the backfill's runtime write cap in
    the control record (no restart needed). A run then writes at most R, or its own
    --max-writes-per-second when that is lower: a throttle never raises a run's cap. The cap
    stays in the record after the run that was throttled ends, and caps every later run until
    cleared: `saga-index status` shows it.

    Exit 0 set or cleared; 2 neither or both of --max-writes-per-second and --clear, an
    invalid value, or no record yet (never migrated); 1 record missing; 4 DynamoDB could not
    be reached.
    """
    if (max_writes_per_second is None) == (not clear):
        raise click.UsageError(
            "give exactly one of --max-writes-per-second R (set the cap) and --clear (remove it)",
            ctx=ctx,
        )
    cli = ctx.find_object(CliContext)
    assert cli is not None
    if clear:
        _control_change(
            cli,
            lambda who: clear_throttle(
                cli.control_store(), changed_by=who, reason=reason, clock=cli.hooks.clock
            ),
            lambda _: (
                "backfill write cap cleared: every run runs at its own --max-writes-per-second"
            ),
            as_json,
        )
        return
    rate = max_writes_per_second
    assert rate is not None
    _control_change(
        cli,
        lambda who: set_throttle(
            cli.control_store(), rate, changed_by=who, reason=reason, clock=cli.hooks.clock
        ),
        lambda s: (
            f"backfill write cap set to {s.backfill_max_writes_per_second:g} writes/s: a run "
            "writes at most that, or its own --max-writes-per-second when lower (it stays "
            "until `saga-index backfill throttle --clear`)"
        ),
        as_json,
    )


@click.command("pause")
@_reason_option
@json_option
@pass_cli
def pause_command(cli: CliContext, reason: str, as_json: bool) -> None:
    """Pause the backfill: its workers stop writing (they keep their lease) until resumed.

    Exit 0 paused; 2 no record yet (never migrated); 1 record missing or unreadable.
    """
    _control_change(
        cli,
        lambda who: pause_backfill(
            cli.control_store(), changed_by=who, reason=reason, clock=cli.hooks.clock
        ),
        lambda _: "backfill PAUSED: no re-stamps until `saga-index backfill resume`",
        as_json,
    )


@click.command("resume")
@_reason_option
@json_option
@pass_cli
def resume_command(cli: CliContext, reason: str, as_json: bool) -> None:
    """Resume a paused backfill.

    Exit 0 resumed; 2 no record yet (never migrated); 1 record missing or unreadable.
    """
    _control_change(
        cli,
        lambda who: resume_backfill(
            cli.control_store(), changed_by=who, reason=reason, clock=cli.hooks.clock
        ),
        lambda _: "backfill resumed",
        as_json,
    )
