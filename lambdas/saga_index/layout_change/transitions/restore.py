"""`phase restore`: rebuild a lost or unreadable STATE item (docs/control-contract.md, "Missing or
unreadable record"; docs/runbook.md, "The control record is lost or unreadable").

  STATE parses                  nothing to restore (its history item is settled)
  STATE missing or unparseable  rebuilt from the history item `restore_point` picks (the newest
                                applied one, or the newest undecided intent when following it
                                hides nothing); an unparseable STATE is replaced only while it
                                is still the item read
  no history either             rebuilt from the rows (`rows`): which keys carry them, refused
                                (exit 3) when that is ambiguous; rows of two layouts: the move
                                between them (rows_move.py); no row on a shard key: never
                                migrated, nothing written

Lease, throttle, pause and the last backfill are not in history: they come back empty, so a
completing move needs a new verified backfill.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from saga_index.index import LEGACY
from saga_index.layout_change.checks import InferredLayout, RowsSeen, infer_layout
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    ControlError,
    ControlRecordInvalidError,
    ControlState,
    ControlStore,
    ControlTiming,
    Transition,
    WallClock,
    parse_state_item,
    to_millis,
    utc_now,
)
from saga_index.layout_change.transitions.errors import PreconditionFailedError, PreconditionResult
from saga_index.layout_change.transitions.rows_move import (
    KeyRows,
    check_rows_layout,
    rows_on_keys,
)
from saga_index.layout_change.transitions.settle import repair_history

log = logging.getLogger(__name__)

ROWS_REASON = "restored from rows"
CHECK_ROWS_NAME_ONE_LAYOUT = "rows-name-one-layout"


class RestoreRaceError(ControlError):
    """The unparseable STATE item changed while it was being replaced (CLI exit 1)."""


@dataclass(frozen=True)
class Restored:
    """What a restore did: `source` is None (nothing to do), "history" or "rows"."""

    state: ControlState
    source: str | None
    replaced_unreadable: bool = False
    history_version: int | None = None
    rows: RowsSeen | None = None
    detail: str = ""


def restore_state(
    store: ControlStore,
    *,
    rows: Callable[[], RowsSeen] | None = None,
    key_rows: KeyRows | None = None,
    changed_by: str = "saga-index phase restore",
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
) -> Restored:
    """Rebuild the STATE item when it is missing or does not parse; see the module docstring.

    With no history, `rows` probes one row per key, and the keys where rows of another layout
    could sit unseen are then read to their end (`key_rows`; by default through the store's
    client: rows_move.py). Raises PreconditionFailedError (exit 3, nothing written) when the
    rows are ambiguous or name no single move,
    RestoreRaceError when the unparseable item changed meanwhile; client errors propagate.
    """
    raw = store.read_raw_state()
    unreadable: ControlRecordInvalidError | None = None
    if raw is not None:
        try:
            state = parse_state_item(raw)
        except ControlRecordInvalidError as err:
            unreadable = err
        else:
            repair_history(store, state)
            return Restored(state=state, source=None, detail="the STATE item exists and parses")
    point = store.restore_point()
    seen: RowsSeen | None = None
    if point is not None:
        rebuilt = ControlState(transition=point.transition)
        detail = f"from history version {point.version}"
        source = "history"
    else:
        if rows is None:
            return Restored(state=ControlState.never_migrated(), source=None, detail="no history")
        seen = rows()
        read_keys = key_rows or rows_on_keys(store.client, store.table_name, store.index_name)
        inferred = check_rows_layout(infer_layout(seen), read_keys)
        if inferred.problem is not None:
            raise PreconditionFailedError(
                "restore", [PreconditionResult(CHECK_ROWS_NAME_ONE_LAYOUT, False, inferred.problem)]
            )
        if inferred.moving_to is None and inferred.layout == LEGACY:
            return Restored(
                state=ControlState.never_migrated(),
                source=None,
                rows=seen,
                detail=f"never migrated: {inferred.detail}",
            )
        rebuilt = ControlState(transition=_from_rows(inferred, changed_by, clock, timing))
        detail, source = inferred.detail, "rows"
    transition = rebuilt.transition
    if transition is None:  # both branches above build one
        raise ControlRecordInvalidError("a restore must rebuild a transition")
    if source == "rows":
        # History first, as every transition: no STATE without its history item.
        store.put_intent(transition)
    if unreadable is not None and raw is not None:
        if not store.replace_unreadable_state(rebuilt, raw):
            raise RestoreRaceError(
                "the unparseable STATE item changed while it was being replaced: read it "
                "again (saga-index status) and run the restore again"
            )
    else:
        store.restore(rebuilt)
    store.settle_history(transition)
    log.warning(
        "control STATE item %s %s",
        "replaced (it did not parse)" if unreadable is not None else "restored",
        detail,
        extra={"version": transition.version, "source": source},
    )
    return Restored(
        state=store.read(),
        source=source,
        replaced_unreadable=unreadable is not None,
        history_version=transition.version if source == "history" else None,
        rows=seen,
        detail=detail,
    )


def _from_rows(
    inferred: InferredLayout, changed_by: str, clock: WallClock, timing: ControlTiming
) -> Transition:
    """Version 1 over never migrated: what every reader followed since the record was lost."""
    if inferred.layout is None:
        raise ControlRecordInvalidError(f"the rows name no layout: {inferred.detail}")
    now = to_millis(clock())
    return Transition(
        version=1,
        layout=inferred.layout,
        moving_to=inferred.moving_to,
        previous_layout=LEGACY,
        previous_moving_to=None,
        changed_at=now,
        changed_by=changed_by,
        reason=ROWS_REASON,
        effective_at=now + timing.effective_delay,
        checks_passed=(CHECK_ROWS_NAME_ONE_LAYOUT,),
    )
