"""`saga-index status` when the STATE item does not parse: what it can read of it, the attribute
that fails and its value, and what the newest history item says (docs/runbook.md, "The control
record is lost or unreadable")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from saga_index.layout_change.record import (
    ControlItemInvalidError,
    ControlRecordInvalidError,
    ControlStore,
)
from saga_index_cli.output import emit
from saga_index_cli.phase.documents import transition_document


def bad_attribute(err: BaseException) -> str | None:
    """The attribute the decoder refused (ControlItemInvalidError names it), through the chain
    of errors that carried the refusal; None when no refusal names one."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, ControlItemInvalidError):
            return seen.attribute
        seen = seen.__cause__
    return None


def unreadable_document(
    store: ControlStore, table: str, err: ControlRecordInvalidError
) -> dict[str, Any]:
    """The STATE item as stored, the attribute that does not parse and its value, and the
    history item a restore would rewrite it from."""
    raw = store.read_raw_state() or {}
    attribute = bad_attribute(err)
    try:
        point = store.restore_point()
        history: dict[str, Any] | None = (
            None if point is None else transition_document(point.transition)
        )
        history_error = None
    except ControlRecordInvalidError as history_err:
        history, history_error = None, str(history_err)
    return {
        "table": table,
        "condition": "unreadable",
        "error": str(err),
        "badAttribute": attribute,
        "badValue": raw.get(attribute) if attribute else None,
        "stored": {k: v for k, v in sorted(raw.items()) if k not in ("PK", "SK")},
        "restoreFrom": history,
        "historyError": history_error,
    }


def print_unreadable(doc: Mapping[str, Any], as_json: bool) -> None:
    click.echo(
        "saga-index: the control record's STATE item does not parse "
        f"({doc['badAttribute']}): processes serve their last good state for T + grace (60 s), "
        "then fail. Repair it: saga-index phase restore (docs/runbook.md)",
        err=True,
    )
    if as_json:
        emit(doc)
        return
    lines = [
        f"control record of {doc['table']}: UNREADABLE (the STATE item does not parse)",
        f"  error:         {doc['error']}",
        f"  bad attribute: {doc['badAttribute']} = {doc['badValue']!r}",
        "  stored:",
        *(f"    {name}: {value!r}" for name, value in doc["stored"].items()),
    ]
    restore = doc["restoreFrom"]
    if restore is not None:
        lines.append(
            f"  phase restore rewrites it from history version {restore['version']} "
            f"({restore['change']}, {restore['changedAt']})"
        )
    elif doc["historyError"]:
        lines.append(f"  history does not parse either: {doc['historyError']}")
    else:
        lines.append("  no history left: phase restore rebuilds it from the rows")
    click.echo("\n".join(lines))
