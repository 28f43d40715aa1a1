"""The backfill lease's errors: a lease held by another run, a state not yet effective, a
direction the record's writers would undo, a lease lost, an invalid control change, an acquire
whose outcome is unknown. The CLI maps
the first two (RetryLaterError) to exit 5 and the InvalidInputError ones to 2
(docs/control-contract.md, "Exit codes").
"""

from __future__ import annotations

from datetime import datetime

from saga_index.index import InvalidInputError, RetryLaterError
from saga_index.layout_change.record import ControlError


class LeaseHeldError(ControlError, RetryLaterError):
    """Another backfill run holds a live lease (CLI exit 5: retry once it is free).
    `retry_at`: when the lease expires unless its holder heartbeats again."""

    def __init__(
        self, holder: str, expires_at: str, *, retry_at: datetime | None = None, kind: str = ""
    ) -> None:
        self.holder = holder
        self.expires_at = expires_at
        # A run of another kind (the open index's beside the layout's) holds the same lease.
        what = f" ({kind} run)" if kind and kind != "layout" else ""
        RetryLaterError.__init__(
            self,
            f"another backfill run holds the lease: {holder!r}{what}, live until {expires_at} "
            "unless it heartbeats. Wait for it, or for the lease to expire if that run died",
            retry_at=retry_at,
        )


class LeaseNotYetEffectiveError(ControlError, RetryLaterError):
    """The current state is younger than its effectiveAt: some writers may still use the old key
    (CLI exit 5; `retry_at` is the effectiveAt)."""

    def __init__(
        self, effective_at: str, seconds_to_wait: float, *, retry_at: datetime | None = None
    ) -> None:
        self.effective_at = effective_at
        self.seconds_to_wait = seconds_to_wait
        RetryLaterError.__init__(
            self,
            f"the current state takes effect at {effective_at}: writers may still stamp the old "
            f"key until then. Wait {seconds_to_wait:.0f} s and start again",
            retry_at=retry_at,
        )


class LeaseDirectionError(ControlError, InvalidInputError):
    """The requested backfill direction disagrees with the state (CLI exit 2)."""


class LeaseLostError(ControlError):
    """This run no longer holds the lease (taken over after expiry, or the state changed)."""


class InvalidBackfillControlError(ControlError, InvalidInputError):
    """A throttle value outside the backfill's bounds, or another invalid control change."""


class LeaseOutcomeUnknownError(ControlError):
    """The lease acquire got no answer and reading the record back failed too: whether this
    run holds the lease is unknown (CLI exit 1, never "nothing was written")."""

    def __init__(self, token: str, cause: BaseException, read_error: BaseException) -> None:
        self.token = token
        super().__init__(
            f"the backfill lease acquire got no answer ({type(cause).__name__}: {cause}) and "
            f"reading the record back failed too ({type(read_error).__name__}: {read_error}): "
            f"unknown whether this run (token {token}) holds the lease. Run `saga-index "
            "status`: if it names this token, `saga-index backfill --stop` releases it (or it "
            "expires after its TTL); then start the run again"
        )
