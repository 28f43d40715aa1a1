"""`phase set P` when the record already is exactly P: exit 0, nothing written (a runbook step
run again under `set -e` goes on); and the `effective: true|false` line of the human record,
the words the runbook waits for."""

from __future__ import annotations

from typing import Any

import click

from saga_index.layout_change.record import ControlState, Phase, RecordCondition
from saga_index_cli.context import CliContext, record_shard_count
from saga_index_cli.output import emit
from saga_index_cli.phase.documents import record_document, record_lines


def is_already(state: ControlState, phase: Phase, shards: int | None) -> bool:
    """Whether the record already is exactly `phase` (with `shards`, when given, its N): the
    move would change nothing. Not for a missing record (restore it first) nor for resharding
    without --shards, whose `phase set` is the abort and needs its N."""
    if state.condition is RecordCondition.MISSING or state.phase is not phase:
        return False
    if phase is Phase.RESHARDING and shards is None:
        return False
    return shards is None or shards == record_shard_count(state)


def print_unchanged(
    cli: CliContext,
    table: str,
    state: ControlState,
    as_json: bool,
    *,
    history_settled: bool = False,
) -> None:
    """Exit 0, the record as `phase show` prints it, `changed: false` (the STATE item is
    unchanged). `history_settled`: its version's HISTORY item was written now, settled from the
    STATE item (`historySettled: true`); else nothing was written."""
    doc = {
        **record_document(state, table, cli.now()),
        "changed": False,
        "historySettled": history_settled,
    }
    if as_json:
        emit(doc)
    else:
        click.echo("\n".join(with_effective_line(record_lines(doc), doc)))
    written = (
        f"its HISTORY item of version {state.version} was not confirmed applied (an intent, or "
        "marked abandoned after a write whose answer was lost): settled from the STATE item, "
        "nothing else written"
        if history_settled
        else "nothing written"
    )
    click.echo(
        f"saga-index: the record already is {state.phase.value} (version {state.version}): "
        f"{written}",
        err=True,
    )


def with_effective_line(lines: list[str], doc: dict[str, Any]) -> list[str]:
    """`effective: true|false` (what the runbook waits for) after the effectiveAt line."""
    at = next(
        (i for i, line in enumerate(lines) if line.lstrip().startswith("effectiveAt:")),
        len(lines) - 2,
    )
    effective = f"  effective:    {'true' if doc['effective'] else 'false'}"
    return [*lines[: at + 1], effective, *lines[at + 1 :]]
