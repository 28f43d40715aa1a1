"""`saga-index backfill clear-fence`: delete fence slots no run holds (docs/runbook.md, "A
backfill refused by a fence slot")."""

from __future__ import annotations

import click

from saga_index.layout_change.backfill import clear_fence
from saga_index_cli.context import CliContext, pass_cli
from saga_index_cli.output import emit, json_option


def _reason(_: click.Context, __: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter("must say why (it is recorded in the control record's event)")
    return value.strip()


@click.command("clear-fence")
@click.option(
    "--reason",
    required=True,
    callback=_reason,
    help="Why (recorded in the control record's `fence-cleared` event).",
)
@json_option
@pass_cli
def clear_fence_command(cli: CliContext, reason: str, as_json: bool) -> None:
    """Delete the backfill's fence slots when no run holds the lease: for a backfill refused
    because a fence slot holds an epoch no run holds (its message names the slot, its epoch and
    the record's leaseEpoch). Each slot is deleted only while it still holds the epoch read, so
    a run that starts meanwhile keeps what it armed; the next run arms fresh slots.

    Exit 0 cleared (or nothing to clear: no slot exists); 5 a run holds a live lease (its slots
    are its fence: nothing deleted; retryAt is when the lease expires); 1 the record is missing
    (restore it first: `saga-index phase restore`); 2 no --reason; 4 DynamoDB could not be
    reached.
    """
    state = cli.read_state()
    cli.require_overrides_agree(state)
    result = clear_fence(
        cli.control_store(), changed_by=cli.changed_by(), reason=reason, clock=cli.hooks.clock
    )
    doc = {
        "table": cli.require_table(),
        "found": {str(slot): epoch for slot, epoch in sorted(result.found.items())},
        "cleared": list(result.cleared),
        "changedMeanwhile": list(result.changed),
        "highestEpochCleared": result.highest_cleared,
        "leaseEpoch": result.lease_epoch,
    }
    if as_json:
        emit(doc)
        return
    if not result.found:
        click.echo("no fence slot exists: nothing to clear")
        return
    click.echo(
        f"cleared {len(result.cleared)} fence slot(s) (highest epoch {result.highest_cleared}); "
        f"the record's leaseEpoch is {result.lease_epoch}: the next backfill arms fresh slots"
    )
    if result.changed:
        click.echo(
            f"left {len(result.changed)} slot(s) a run armed meanwhile: "
            f"{', '.join(map(str, result.changed))} (`saga-index status` shows its lease)"
        )
