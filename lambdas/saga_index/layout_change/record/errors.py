"""The control record's errors: what a reader refuses, and what a write of the record meets.
Each names what the operator can do next. The moves' errors are the transitions room's
(transitions/errors.py), the backfill lease's the lease room's (lease/errors.py).

The CLI maps them to exit codes: InvalidInputError subclasses to 2, PreconditionFailedError to 3,
RetryLaterError (a held lease, a state not yet effective) to 5, everything else to 1
(docs/control-contract.md, "Exit codes").
"""

from __future__ import annotations

from enum import StrEnum

from saga_index.index import SagaIndexError


class ControlError(SagaIndexError):
    """Base class of the control record's errors."""


class ControlRecordInvalidError(ControlError):
    """The control item exists but does not parse under the contract (treated as unreadable)."""


class Refusal(StrEnum):
    """Why a reader refuses a control item, in words every implementation shares (the contract
    vectors pair each refused item with its kind and the attribute it names)."""

    WRONG_ITEM = "wrong-item"  # not the STATE / HISTORY item (PK, entityType, SK)
    MISSING = "missing"  # a required attribute is absent (or NULL)
    UNEXPECTED = "unexpected"  # present where the contract says absent (a count without sharded)
    WRONG_TYPE = "wrong-type"  # present with another DynamoDB type
    INVALID_VALUE = "invalid-value"  # the right type, a value the contract does not allow
    INCONSISTENT = "inconsistent"  # allowed alone, contradicted by other attributes


class ControlItemInvalidError(ControlRecordInvalidError):
    """One control item breaks the contract: `kind` says how, `attribute` names where."""

    def __init__(self, message: str, *, kind: Refusal, attribute: str) -> None:
        self.kind = kind
        self.attribute = attribute
        super().__init__(message)


class ControlRecordLostError(ControlRecordInvalidError):
    """No STATE item, and what the history leaves to follow reads only the legacy key (no
    HISTORY item, an abandoned first intent, a completed rollback), but saga rows on shard keys:
    a move was applied and its record lost (the control partition deleted, or STATE lost after
    a write whose answer was lost). Following the legacy key would answer wrong as if right,
    so the record is treated as unreadable (served stale within the grace, then every read and
    write fails) until `phase restore` rebuilds it."""

    def __init__(self, gsi4pk: str, pk: str, requests: int, *, history_version: int = 0) -> None:
        self.gsi4pk = gsi4pk
        self.pk = pk
        self.history_version = history_version
        found = (
            "no STATE and no HISTORY item"
            if not history_version
            else f"no STATE item, and the history (newest: version {history_version}) confirms "
            "no move away from the legacy key"
        )
        super().__init__(
            f"the control record is lost: {found}, but 1 shard key(s) carry rows: {gsi4pk} "
            f"({pk}) ({requests} queries read). A move was applied and its STATE item lost: "
            "reading the legacy key would miss every saga on the shard keys, so reads and "
            "writes fail until it is restored (saga-index phase restore, docs/runbook.md)"
        )


class ControlRecordUnavailableError(ControlError):
    """The record could not be read and no last good state is young enough to serve."""


class ControlRecordMissingError(ControlError):
    """The STATE item is gone although history shows a migration began: refuse to change it."""

    def __init__(self, newest_history_version: int) -> None:
        self.newest_history_version = newest_history_version
        super().__init__(
            "the control record (STATE) is missing but its history ends at version "
            f"{newest_history_version}: someone deleted it. Readers route over every layout "
            "that history names; restore the record from history (restore_state) before "
            "changing the phase or running a backfill"
        )


class VersionConflictError(ControlError):
    """The compare-and-set lost: someone changed the record since it was read (CLI exit 1)."""

    def __init__(self, expected_version: int, actual_version: int, actual_phase: str) -> None:
        self.expected_version = expected_version
        self.actual_version = actual_version
        self.actual_phase = actual_phase
        super().__init__(
            f"lost the race: the record moved from version {expected_version} to version "
            f"{actual_version} (phase {actual_phase!r}) while this change was checked; "
            "nothing was written. Read it (phase show) and decide again"
        )
