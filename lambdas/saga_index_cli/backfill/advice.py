"""What an operator should do after a backfill exits 1: advice by cause.

A refused plan wrote nothing and a second try fails the same way until its cause is gone; a run
that failed part-way (a segment, an interruption, a verification) is finished by running it
again, which converges; a lost lease means the record moved on, so running it again may be
wrong. The causes are named by their error type, which is also the error name a Step Functions
execution fails with (the plan, worker and verify Lambdas raise them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from datetime import datetime

from saga_index.index import BACKFILL_THROTTLED_ERROR, RetryLaterError, SagaIndexError
from saga_index.layout_change.backfill import Move
from saga_index.layout_change.lease import (
    LeaseDirectionError,
    LeaseHeldError,
    LeaseLostError,
    LeaseNotYetEffectiveError,
)
from saga_index.layout_change.record import (
    BackfillDirection,
    ControlRecordInvalidError,
    ControlRecordMissingError,
    ControlRecordUnavailableError,
    ControlState,
    Phase,
)

CONVERGES = "nothing is half-written: run the backfill again, it converges"

# A refused plan: nothing was written, and a retry meets the same refusal until its cause is
# gone. What to do about each cause.
REFUSAL_ADVICE: Mapping[str, str] = {
    LeaseHeldError.__name__: (
        "nothing was written. `saga-index status` shows the holder; let that run finish "
        "(follow a Step Functions run with `saga-index backfill --follow`) or, if it must not "
        "go on, stop it: Ctrl-C where a local run runs, or `saga-index backfill --stop` (a "
        "Step Functions run; or a local run that died: its lease is released once its "
        "process is gone from this host or its heartbeat is older than 60 s). Then run the "
        "same command again"
    ),
    LeaseNotYetEffectiveError.__name__: (
        "nothing was written. Start the same command again once that time has passed "
        "(`saga-index phase show --wait` returns then)"
    ),
    "LeaseDirectionError": (
        "nothing was written. `saga-index phase show` names the phase: forward while "
        "migrating, sharded or resharding, rollback while rolling-back; start the backfill with "
        "that --direction"
    ),
    ControlRecordMissingError.__name__: (
        "nothing was written. Restore the record with `saga-index phase restore`, check it with "
        "`saga-index status`, then start the backfill again"
    ),
    ControlRecordUnavailableError.__name__: (
        "nothing was written. Check --table, --region and your access with `saga-index status`, "
        "then start the backfill again"
    ),
    ControlRecordInvalidError.__name__: (
        "nothing was written. `saga-index phase show --history` shows the record's last good "
        "versions; repair the record before starting the backfill again"
    ),
}

LEASE_LOST_ADVICE = (
    "what it re-stamped stays and nothing is half-written, but no completion was recorded. "
    "Check `saga-index status` (the phase changed, an abort, `--stop`, or another run took "
    "over after the lease expired), then run the backfill again only if the record still calls "
    "for this direction"
)
THROTTLED_ADVICE = (
    "DynamoDB kept throttling past the retries; nothing is half-written. Lower the cap "
    "(`saga-index backfill throttle --max-writes-per-second R`) or wait for quieter traffic, "
    "then run the backfill again: it converges"
)
VERIFICATION_ADVICE = (
    "rows the run should have moved are still on the source key (named above): check that "
    "every writer follows the record (`saga-index status`), then run the backfill again: it "
    "converges"
)
TIMED_OUT_ADVICE = (
    "the execution ran out of its time limit; what it re-stamped stays and nothing is "
    "half-written. Run the backfill again: it picks up what is left (more --segments shorten "
    "a run)"
)
ABORTED_ADVICE = (
    "the execution was stopped (`saga-index backfill --stop`, Ctrl-C while following it, or "
    "the console); what it re-stamped stays and nothing is half-written. Run the backfill "
    "again to finish: it converges"
)
# The failure line already says "interrupted": the advice names the cause, not the word again.
INTERRUPTED_ADVICE = (
    "stopped by Ctrl-C or SIGTERM: the lease is released and nothing is half-written. Run "
    "the same command again to finish: it converges"
)
# The verify step's failure (infra/backfill.py VERIFICATION_FAILED_ERROR).
VERIFICATION_FAILED_ERROR = "BackfillVerificationFailed"

_RUN_FAILURE_ADVICE: Mapping[str, str] = {
    LeaseLostError.__name__: LEASE_LOST_ADVICE,
    BACKFILL_THROTTLED_ERROR: THROTTLED_ADVICE,
    VERIFICATION_FAILED_ERROR: VERIFICATION_ADVICE,
}


class BackfillRefusedError(SagaIndexError):
    """The backfill was refused before it wrote anything (exit 1); the message says why and
    what to do. `cause`: the refusal's own error type name (what the report's `error` says)."""

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause or type(self).__name__


class BackfillNotYetError(BackfillRefusedError, RetryLaterError):
    """Refused for now (exit 5): before effectiveAt, or a lease a live run holds; `retry_at`
    says when a retry can succeed, when that is known."""

    def __init__(self, message: str, *, cause: str, retry_at: datetime | None) -> None:
        BackfillRefusedError.__init__(self, message, cause=cause)
        self.retry_at = retry_at


def is_refusal(error: str | None) -> bool:
    return error in REFUSAL_ADVICE


def refusal_message(error: str, cause: str | None) -> str:
    """A refused plan's message: the refusal, then what to do about it."""
    return f"{cause or error}; {REFUSAL_ADVICE[error]}"


def failure_advice(error: str | None) -> str:
    """What to do after a run that failed with `error` (an error type name)."""
    if error is None:
        return CONVERGES
    if error in REFUSAL_ADVICE:
        return REFUSAL_ADVICE[error]
    return _RUN_FAILURE_ADVICE.get(error, CONVERGES)


def execution_advice(status: str, error: str | None, segment_error: str | None) -> str:
    """What to do after a Step Functions execution that did not succeed. A failed segment fails
    the parent with Step Functions' generic error: the segment's own decides."""
    if status == "TIMED_OUT":
        return TIMED_OUT_ADVICE
    if status == "ABORTED":
        return ABORTED_ADVICE
    return failure_advice(segment_error or error)


def local_failure_advice(failures: Mapping[int, str], interrupted: bool) -> str:
    """What to do after a local run whose segments failed ("ErrorType: message" each) or that
    was interrupted."""
    errors = {failure.split(":", 1)[0] for failure in failures.values()}
    if LeaseLostError.__name__ in errors:
        return LEASE_LOST_ADVICE
    if BACKFILL_THROTTLED_ERROR in errors:
        return THROTTLED_ADVICE
    if interrupted and not failures:
        return INTERRUPTED_ADVICE
    return CONVERGES


_REFUSALS = (
    LeaseHeldError,
    LeaseNotYetEffectiveError,
    ControlRecordMissingError,
    ControlRecordUnavailableError,
    ControlRecordInvalidError,
)


def as_refusal(err: BaseException) -> BackfillRefusedError | None:
    """A refusal met before a run wrote anything, as BackfillRefusedError (its message, then
    what to do about it); None for any other error."""
    if not isinstance(err, _REFUSALS):
        return None
    name = type(err).__name__
    message = refusal_message(name, str(err))
    if isinstance(err, RetryLaterError):
        return BackfillNotYetError(message, cause=name, retry_at=err.retry_at)
    return BackfillRefusedError(message, cause=name)


def direction_hint(state: ControlState, direction: BackfillDirection) -> str | None:
    """What to type when `direction` is the wrong one for the record's phase: the flag the
    phase needs; None when no direction fits (legacy: nothing moves until `phase set`)."""
    if state.phase is Phase.ROLLING_BACK and direction is BackfillDirection.FORWARD:
        return "add --direction rollback (the record is rolling back: step R2 of the runbook)"
    if direction is BackfillDirection.ROLLBACK and state.phase in (
        Phase.MIGRATING,
        Phase.SHARDED,
    ):
        return "drop --direction rollback (forward is the default while migrating or sharded)"
    if state.phase is Phase.LEGACY:
        return "nothing moves while legacy: `saga-index phase set migrating` first (step 2)"
    return None


def move_for(state: ControlState, direction: BackfillDirection) -> Move:
    """Move.for_state, with the fix named when the direction disagrees with the record."""
    try:
        return Move.for_state(state, direction)
    except LeaseDirectionError as err:
        hint = direction_hint(state, direction)
        if hint is None:
            raise
        raise LeaseDirectionError(f"{err}: {hint}") from err


@contextlib.contextmanager
def refusals_explained() -> Iterator[None]:
    """Around the steps before a run writes anything: a refusal raised there becomes
    BackfillRefusedError."""
    try:
        yield
    except _REFUSALS as err:
        raise as_refusal(err) or err from err
