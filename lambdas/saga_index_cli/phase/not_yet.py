"""`phase set`'s "not yet" (exit 5) of a completing move, with the completion checks that
already fail: a script told to retry at `retryAt` learns at once that the change would be
refused then anyway (a backfill that never ran), instead of after the wait.

The checks are the completing move's own, run read-only against the record as read, before
the answer (transitions.failing_completion_checks): backfill-verified and the row checks. Parity
is left to the change itself: it scans the whole base table (consistent), which the answer "not
yet" should not wait for.
"""

from __future__ import annotations

from saga_index.index import RetryLaterError
from saga_index.layout_change.transitions import PreconditionResult


class NotYetError(RetryLaterError):
    """A completing move before its switch settled (exit 5), and the checks that already fail
    (`failed`: empty when none does so far)."""

    def __init__(self, refusal: RetryLaterError, failed: list[PreconditionResult]) -> None:
        self.failed = tuple(failed)
        message = str(refusal)
        if failed:
            message += (
                ". Meanwhile these checks of the move already fail, so at that time it would be "
                "refused (exit 3) unless they are fixed first: "
                + "; ".join(f"{check.name}: {check.detail}" for check in failed)
            )
        super().__init__(message, retry_at=refusal.retry_at)
