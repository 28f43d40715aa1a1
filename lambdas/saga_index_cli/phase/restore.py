"""`saga-index phase restore`: rebuild a lost or unparseable STATE item, from history or from the
rows (saga_index.layout_change.transitions.restore; docs/runbook.md, "The control record is lost
or unreadable")."""

from __future__ import annotations

import click

from saga_index.layout_change.checks import probe_keys
from saga_index.layout_change.record import ControlRecordInvalidError
from saga_index.layout_change.transitions import Restored, restore_state
from saga_index_cli.context import CliContext, OverrideDisagreesError, pass_cli
from saga_index_cli.output import emit, json_option
from saga_index_cli.phase.documents import record_document, record_lines


@click.command("restore")
@json_option
@pass_cli
def restore_command(cli: CliContext, as_json: bool) -> None:
    """Rebuild a lost or unparseable STATE item: from history, or from the rows when no history
    is left.

    \b
      STATE parses              nothing to do (its history item is settled)
      STATE missing/unparseable rebuilt from the newest applied HISTORY item (an intent whose
                                STATE write is undecided is followed unless it completes a
                                move; an abandoned one never)
      no history either         rebuilt from which keys carry rows (one Query with Limit 1 per
                                key: the legacy key and 1024 shard keys): no shard row: never
                                migrated, nothing written; shard rows that fit exactly one N:
                                sharded(N), or migrating(N) when the legacy key has rows too,
                                reason "restored from rows"; otherwise refused (exit 3)

    The lease, throttle, pause flag and last backfill are not in history: they come back
    empty, so a completing move needs a new verified backfill.

    \b
    --json: the record as `phase show --json` prints it, plus restored (bool), restoredFrom
    (history | rows | null), replacedUnreadable (bool), detail, and requests (queries of the
    rows, 0 when none were read).
    Exit 0 restored or nothing to do; 1 the STATE item changed meanwhile, or a read failed; 3
    the rows are ambiguous ({"refused": true, "failed": [...]}): nothing written.
    """
    store = cli.control_store()
    try:
        before = cli.read_state()
    except ControlRecordInvalidError:
        if cli.overridden:
            raise OverrideDisagreesError(
                "the STATE item does not parse, so --phase/--shards cannot be checked against "
                "it: drop them"
            ) from None
    else:
        cli.require_overrides_agree(before)
    restored = restore_state(
        store,
        rows=lambda: probe_keys(cli.client, store.table_name),
        changed_by=cli.changed_by(),
        clock=cli.hooks.clock,
        timing=cli.hooks.timing,
    )
    doc = record_document(restored.state, store.table_name, cli.now())
    doc.update(
        {
            "restored": restored.source is not None,
            "restoredFrom": restored.source,
            "replacedUnreadable": restored.replaced_unreadable,
            "detail": restored.detail,
            "requests": restored.rows.requests if restored.rows else 0,
        }
    )
    if as_json:
        emit(doc)
    else:
        click.echo("\n".join(record_lines(doc)))
    click.echo(f"saga-index: {_restore_summary(restored)}", err=True)


def _restore_summary(restored: Restored) -> str:
    if restored.source is None:
        if restored.state.transition is None:
            return f"nothing to restore: {restored.detail}"
        return "the STATE item exists: nothing to restore"
    what = "replaced the unparseable STATE item" if restored.replaced_unreadable else "restored"
    return f"STATE {what} {restored.detail} (version {restored.state.version})"
