"""The moves' errors: a move that is not allowed, a completing move whose checks failed (with
each check's verdict), and a STATE write whose outcome is not a plain success. The CLI maps
TransitionNotAllowedError to exit 2 and PreconditionFailedError to 3 (docs/control-contract.md,
"Exit codes").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from saga_index.index import InvalidInputError, RetryLaterError
from saga_index.layout_change.record import ControlError


class TransitionNotAllowedError(ControlError, InvalidInputError):
    """The requested phase is not reachable from the current one (CLI exit 2)."""

    def __init__(self, current: str, requested: str, allowed: Sequence[str], detail: str) -> None:
        self.current = current
        self.requested = requested
        self.allowed = tuple(allowed)
        moves = ", ".join(self.allowed) if self.allowed else "none"
        super().__init__(
            f"cannot move from {current!r} to {requested!r}: {detail}. "
            f"Allowed from {current!r}: {moves}"
        )


@dataclass(frozen=True)
class PreconditionResult:
    """One precondition's verdict: its name, pass/fail and what it saw."""

    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


class PreconditionFailedError(ControlError):
    """A forward transition's checks failed; nothing was written (CLI exit 3)."""

    def __init__(self, requested: str, failed: Sequence[PreconditionResult]) -> None:
        self.requested = requested
        self.failed = tuple(failed)
        names = "; ".join(f"{c.name}: {c.detail}" for c in self.failed)
        super().__init__(f"refused to move to {requested!r}: {names}")

    def to_json(self) -> dict[str, Any]:
        return {"refused": True, "failed": [c.to_json() for c in self.failed]}


class StateWriteFailedError(ControlError):
    """The STATE write failed and a read-back shows it did not land: the move was NOT applied
    (CLI exit 1). Its history intent stays, marked abandoned, and no reader follows it."""

    def __init__(self, version: int, cause: BaseException, abandoned: bool) -> None:
        self.version = version
        mark = (
            "marked abandoned"
            if abandoned
            else "left unconfirmed (marking it abandoned failed too; the next phase set takes "
            "it over)"
        )
        super().__init__(
            f"the STATE write of version {version} failed ({_describe(cause)}) and the record "
            f"still holds version {version - 1}: the move was NOT applied. Its history intent "
            f"(HISTORY version {version}) is {mark}. Run the same `phase set` again"
        )


class NotAppliedRetryLaterError(ControlError, RetryLaterError):
    """Every attempt of the STATE write was refused for now, and a read-back shows the record
    still at the version before: the move was NOT applied (CLI exit 5, `retryAt`)."""

    def __init__(self, version: int, cause: RetryLaterError, abandoned: bool) -> None:
        self.version = version
        mark = "marked abandoned" if abandoned else "left unconfirmed"
        RetryLaterError.__init__(
            self,
            f"{cause}. Read back, the record still holds version {version - 1}: the move was "
            f"NOT applied, and its history intent (HISTORY version {version}) is {mark}. Run "
            "the same `phase set` again",
            retry_at=cause.retry_at,
        )


class MoveOutcomeUnknownError(ControlError):
    """Neither the STATE write nor a read-back of it answered: applied or not is unknown."""

    def __init__(self, version: int, cause: BaseException, read_error: BaseException) -> None:
        super().__init__(
            f"the STATE write of version {version} failed ({_describe(cause)}) and reading it "
            f"back failed too ({_describe(read_error)}): unknown whether the move was applied: "
            f"run `saga-index phase show`: if it shows version {version}, it was applied (the "
            "same `phase set` then settles its history); run the same `phase set` otherwise"
        )


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"
