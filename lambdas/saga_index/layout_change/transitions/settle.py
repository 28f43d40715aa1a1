"""Settle the HISTORY item of the record's current version from its STATE item: what every
`phase set` (executor.py) does before it moves, and what a restore (restore.py) does when the STATE
item is there after all. Its own module so that both build on it and neither on the other."""

from __future__ import annotations

import logging

from saga_index.layout_change.record import ControlState, ControlStore, RecordCondition

# The executor's logger, which these repairs have always been logged under: a log filter or
# alarm on it keeps seeing them.
log = logging.getLogger("saga_index.layout_change.transitions.executor")


def repair_history(store: ControlStore, state: ControlState | None = None) -> bool:
    """Settle the HISTORY item of the record's current version from the STATE item: write it
    when missing (a record written before intents existed), mark it applied when it is still an
    intent, replace another's unconfirmed intent in its slot. True when it wrote. Earlier
    versions' items are settled already: an intent for v+1 is written only after v is."""
    current = store.read() if state is None else state
    if current.condition is not RecordCondition.PRESENT or current.transition is None:
        return False
    entry = store.history_entry(current.version)
    if entry is not None and entry.applied:
        if entry.transition != current.transition:
            log.error(
                "history version %d is applied but differs from the STATE item",
                current.version,
                extra={"version": current.version},
            )
        return False
    written = store.settle_history(current.transition)
    if written:
        log.warning(
            "control history item of version %d was %s: settled from the STATE item",
            current.version,
            "missing" if entry is None else "an unconfirmed intent",
            extra={"version": current.version},
        )
    return written
