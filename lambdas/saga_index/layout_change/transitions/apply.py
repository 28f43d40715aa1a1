"""How a move of the record is written, whatever it moves (executor.write_move calls it):
intent, compare-and-set, settle (docs/control-contract.md, "Transitions").

Crash safety without transactions: the HISTORY item of version v+1 is written FIRST, as an
intent (`applied = false`, only into an empty slot or over an intent nobody confirmed), then the
STATE compare-and-set on version v, then the intent is settled (`applied = true`). No STATE can
exist without its history item. A crash or failure after the intent leaves an item that is not
confirmed: a failed STATE write marks it abandoned, a lost race has the winner's transition
settled into the slot, and a crash leaves it undecided (record/history.py, `restore_point`, says
what a restore follows then). The next move (or `repair_history`, settle.py) settles the
current version's item from the STATE. Repeating any write changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import RetryLaterError
from saga_index.layout_change.record import (
    ControlRecordInvalidError,
    ControlState,
    ControlStore,
    RecordCondition,
    Transition,
    VersionConflictError,
)
from saga_index.layout_change.transitions.errors import (
    MoveOutcomeUnknownError,
    NotAppliedRetryLaterError,
    StateWriteFailedError,
)

# One logger for every step of a move's write (settle.py logs under it too).
log = logging.getLogger("saga_index.layout_change.transitions.executor")
_T = TypeVar("_T")

UNSETTLED = "applied, but its history item"


def apply_transition(store: ControlStore, state: ControlState, transition: Transition) -> list[str]:
    """Intent, compare-and-set, settle. Returns warnings about an APPLIED move (exit 0); raises
    when the move was not applied (lost the race, or the STATE write failed)."""
    try:
        _write_intent(store, state, transition)
    except (ClientError, BotoCoreError) as err:
        log.error(
            "the history intent of version %d could not be written (%s): the move was NOT "
            "applied, nothing changed",
            transition.version,
            describe_error(err),
        )
        raise
    try:
        won = store.compare_and_set(state.version, transition)
    except (RetryLaterError, ClientError, BotoCoreError) as err:
        # Refused past the retries, or no answer: an attempt may have landed with its answer
        # lost (botocore resends after a timeout or a dropped connection): STATE decides.
        return _after_failed_write(store, state, transition, err)
    if not won:
        current = store.read()
        # A retried request whose first attempt was applied finds its own transition.
        if current.transition != transition:
            if current.transition is not None and current.condition is RecordCondition.PRESENT:
                # The winner settles its own item too; doing it here as well means our
                # intent, if it took that version's slot, never outlives the race.
                _try_settle(store, current.transition)
            raise VersionConflictError(state.version, current.version, current.phase.value)
    return _settle_applied(store, transition)


def _write_intent(store: ControlStore, state: ControlState, transition: Transition) -> None:
    """HISTORY of version v+1 before STATE: no STATE can exist without its history item."""
    if store.put_intent(transition):
        return
    seen = store.history_entry(transition.version)
    if seen is not None and seen.transition == transition:
        return  # a retry of this very change
    current = store.read()
    if current.version != state.version:
        raise VersionConflictError(state.version, current.version, current.phase.value)
    if seen is not None and seen.applied:
        raise ControlRecordInvalidError(
            f"history version {transition.version} is marked applied while the STATE item is "
            f"at version {state.version}: the record was rolled back by hand. Compare them "
            "(phase show --history) before changing the phase"
        )
    # An intent over the same STATE version that no STATE write confirmed: another operator's
    # change in flight (the compare-and-set decides between us) or one whose STATE write
    # failed. Taking over its slot is safe either way: the STATE winner settles the slot.
    if seen is None or not store.take_over_intent(seen, transition):
        current = store.read()
        raise VersionConflictError(state.version, current.version, current.phase.value)
    log.warning(
        "history version %d held an unconfirmed intent by %s: taken over",
        transition.version,
        seen.transition.changed_by,
        extra={"version": transition.version},
    )


def _after_failed_write(
    store: ControlStore, state: ControlState, transition: Transition, err: Exception
) -> list[str]:
    """The STATE write raised (an error, or refusals past the retries): one of its requests
    may have landed with its answer lost, so what STATE holds now decides."""
    try:
        current = store.read()
    except (ClientError, BotoCoreError, RetryLaterError) as read_err:
        raise MoveOutcomeUnknownError(transition.version, err, read_err) from err
    # Only a STATE item holding the transition says it landed: with no STATE item (the first
    # move), the read follows the history, and our own intent is what it follows.
    stored = current.version if current.condition is RecordCondition.PRESENT else 0
    if current.condition is RecordCondition.PRESENT and current.transition == transition:
        return [
            f"the STATE write's answer was lost ({describe_error(err)}); read back, the record "
            f"holds version {transition.version}: the move was applied",
            *_settle_applied(store, transition),
        ]
    if stored != state.version:
        raise VersionConflictError(state.version, stored, current.phase.value) from err
    abandoned = _try(lambda: store.abandon_intent(transition))
    if isinstance(err, RetryLaterError):
        raise NotAppliedRetryLaterError(transition.version, err, abandoned is True) from err
    failed = StateWriteFailedError(transition.version, err, abandoned is True)
    # Said here too: a caller that reports the service failure behind it (the CLI's exit 4)
    # still tells the operator that nothing was applied.
    log.error("%s", failed)
    raise failed from err


def _settle_applied(store: ControlStore, transition: Transition) -> list[str]:
    if _try_settle(store, transition):
        return []
    return [
        f"{UNSETTLED} (HISTORY version {transition.version}) is still an unconfirmed intent: "
        "the next `phase set` or `phase restore` settles it from the STATE item; until then a "
        "restore after a lost STATE item follows it unless it completes a move"
    ]


def _try_settle(store: ControlStore, transition: Transition) -> bool:
    """True when the item of the transition's version is settled (written now or before)."""
    written = _try(lambda: store.settle_history(transition))
    if written is None:
        return False
    if not written:
        entry = _try(lambda: store.history_entry(transition.version))
        return entry is not None and entry.applied and entry.transition == transition
    return True


def _try(call: Callable[[], _T]) -> _T | None:
    try:
        return call()
    except (ClientError, BotoCoreError, RetryLaterError) as err:
        log.warning("control history write failed: %s", describe_error(err))
        return None


def describe_error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"
