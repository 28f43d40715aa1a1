"""Exit-1 advice by cause: a refused plan is not "run it again", a lost lease is checked first,
a failed or interrupted run converges when run again."""

from __future__ import annotations

import pytest

from saga_index.index.errors import SagaIndexError
from saga_index.layout_change.lease import LeaseHeldError, LeaseNotYetEffectiveError
from saga_index.layout_change.record.errors import ControlRecordMissingError
from saga_index_cli.backfill.advice import (
    ABORTED_ADVICE,
    CONVERGES,
    INTERRUPTED_ADVICE,
    LEASE_LOST_ADVICE,
    THROTTLED_ADVICE,
    TIMED_OUT_ADVICE,
    VERIFICATION_ADVICE,
    BackfillRefusedError,
    as_refusal,
    execution_advice,
    local_failure_advice,
)
from saga_index_cli.backfill.execution_progress import SegmentFailure
from saga_index_cli.backfill.follow import failure_message


def test_a_held_lease_refusal_names_the_holder_and_says_how_to_see_and_stop_it() -> None:
    refused = as_refusal(LeaseHeldError("bob@ci/77", "2026-03-01T09:03:15.000Z"))
    assert isinstance(refused, BackfillRefusedError)
    message = str(refused)
    assert message.startswith("another backfill run holds the lease: 'bob@ci/77'")
    assert "nothing was written" in message
    assert "`saga-index status` shows the holder" in message
    assert "`saga-index backfill --stop`" in message
    assert "converges" not in message


def test_a_state_not_yet_effective_refusal_says_to_wait() -> None:
    message = str(as_refusal(LeaseNotYetEffectiveError("2026-03-01T09:02:15.000Z", 45)))
    assert "Wait 45 s and start again" in message
    assert "once that time has passed" in message
    assert "converges" not in message


def test_a_missing_record_refusal_says_to_restore_it() -> None:
    message = str(as_refusal(ControlRecordMissingError(4)))
    assert "`saga-index phase restore`" in message


def test_other_errors_are_not_refusals() -> None:
    assert as_refusal(SagaIndexError("boom")) is None


@pytest.mark.parametrize(
    ("status", "error", "segment_error", "advice"),
    [
        ("TIMED_OUT", "States.Timeout", None, TIMED_OUT_ADVICE),
        ("ABORTED", "StoppedByOperator", None, ABORTED_ADVICE),
        ("FAILED", "BackfillVerificationFailed", None, VERIFICATION_ADVICE),
        (
            "FAILED",
            "States.ExceedToleratedFailureThreshold",
            "SegmentThrottledError",
            THROTTLED_ADVICE,
        ),
        ("FAILED", "States.ExceedToleratedFailureThreshold", "LeaseLostError", LEASE_LOST_ADVICE),
        ("FAILED", "States.ExceedToleratedFailureThreshold", "Sandbox.Timedout", CONVERGES),
        ("FAILED", "Lambda.Unknown", None, CONVERGES),
    ],
)
def test_each_failed_execution_gets_the_advice_of_its_cause(
    status: str, error: str, segment_error: str | None, advice: str
) -> None:
    assert execution_advice(status, error, segment_error) == advice


def test_a_plan_refused_in_step_functions_says_so_and_what_to_do() -> None:
    message = failure_message(
        {
            "status": "FAILED",
            "error": "LeaseHeldError",
            "cause": "another backfill run holds the lease: 'alice@laptop/4242', live until T",
        },
        None,
    )
    assert message.startswith(
        "execution FAILED: the plan step refused the run (LeaseHeldError): another backfill run "
        "holds the lease: 'alice@laptop/4242'"
    )
    assert "`saga-index status` shows the holder" in message
    assert "converges" not in message


def test_a_failed_segment_names_its_own_error_and_the_advice_follows_it() -> None:
    failure = SegmentFailure("arn:child", "FAILED", "SegmentThrottledError", "still throttled", 2)
    message = failure_message(
        {"status": "FAILED", "error": "States.ExceedToleratedFailureThreshold", "cause": "x"},
        failure,
    )
    assert "segment 2 FAILED (arn:child): SegmentThrottledError: still throttled" in message
    assert message.endswith(THROTTLED_ADVICE)


@pytest.mark.parametrize(
    ("failures", "interrupted", "advice"),
    [
        ({}, True, INTERRUPTED_ADVICE),
        ({1: "SegmentThrottledError: segment 1: Scan still throttled"}, False, THROTTLED_ADVICE),
        ({0: "LeaseLostError: taken over"}, True, LEASE_LOST_ADVICE),
        ({0: "ClientError: AccessDenied"}, False, CONVERGES),
        ({}, False, CONVERGES),
    ],
)
def test_a_local_run_that_failed_gets_the_advice_of_its_cause(
    failures: dict[int, str], interrupted: bool, advice: str
) -> None:
    assert local_failure_advice(failures, interrupted) == advice
