"""What the backfill handlers publish, without a table: the worker's metrics are its own
invocation's counts, by the names the alarms and dashboard use; the verifier's are the
read-back's."""

from __future__ import annotations

import pytest

from saga_index.index import names
from saga_index.layout_change.backfill.steps import SegmentOutcome
from saga_index.layout_change.backfill.summary import VerificationResult
from saga_index.layout_change.backfill.wire import SegmentCounts, SegmentResult
from saga_index.layout_change.lease import LeaseLostError
from saga_index.layout_change.record.state import BackfillDirection

COUNTS = SegmentCounts(
    scanned=9, restamped=5, skipped=1, anomalies=2, would_restamp=0, throttles=3, pace_pauses=1
)


def test_segment_counts_give_every_worker_metric_in_the_published_order() -> None:
    values = COUNTS.metric_values()
    assert tuple(values) == names.BACKFILL_WORKER_METRICS
    assert list(values.values()) == [9, 5, 1, 2, 0, 3, 1]


def test_given_carried_totals_then_the_outcome_publishes_the_invocations_own_counts() -> None:
    # Given a result whose totals include earlier invocations' counts
    totals = SegmentResult(segment=0, scanned=100, restamped=50, invocation=COUNTS)
    outcome = SegmentOutcome(totals)
    # Then only this invocation's counts are published
    assert outcome.metric_values() == COUNTS.metric_values()
    # and without an invocation of its own (no totals handed in) the result is its own counts
    assert (
        SegmentOutcome(SegmentResult(segment=0, scanned=4)).metric_values()[names.METRIC_SCANNED]
        == 4
    )


def test_an_outcome_unwraps_to_its_result_unless_the_lease_was_lost() -> None:
    result = SegmentResult(segment=2, done=True)
    assert SegmentOutcome(result).unwrap() is result
    lost = LeaseLostError("taken over by bob")
    with pytest.raises(LeaseLostError, match="taken over by bob"):
        SegmentOutcome(result, lease_lost=lost).unwrap()


def test_a_verification_gives_the_source_key_rows_and_the_unexpected_ones() -> None:
    verification = VerificationResult(
        direction=BackfillDirection.FORWARD,
        dry_run=False,
        partitions=["RSAGA"],
        remaining=7,
        remaining_anomalies=4,
        remaining_other_entities=1,
        unexpected=2,
        unexpected_keys=[],
        ok=False,
        message="two left",
    )
    assert verification.metric_values() == {
        names.METRIC_SOURCE_KEY_ROWS: 7,
        names.METRIC_UNEXPECTED_SOURCE_KEY_ROWS: 2,
    }
