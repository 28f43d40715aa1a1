"""Pure parts of parity (snapshots, sampling) and of the watch (verdicts, incomplete data)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from saga_index.index.errors import InvalidInputError
from saga_index.layout_change.checks.parity import Snapshot
from saga_index.layout_change.checks.parity._snapshot import (
    CHECK_ALL,
    CHECK_OPEN,
    CHECK_PERSON,
    InvalidSnapshotError,
    Read,
)
from saga_index.layout_change.checks.parity._verifier import sample_persons
from saga_index.store.watch import (
    MetricReadError,
    WatchReport,
    read_throttle_window,
    validate_days,
)

# ---- snapshots ----------------------------------------------------------------------------------


def snapshot() -> Snapshot:
    return Snapshot(
        table_name="propflow-prod",
        index_name="renewal-saga-person-index",
        phase="legacy",
        shard_count=16,
        created_at="2026-07-01T00:00:00.000000Z",
        persons=("p-1", "p-2"),
        results={
            Read(CHECK_ALL): frozenset({("RSAGA#a", "META"), ("RSAGA#b", "META")}),
            Read(CHECK_OPEN): frozenset({("RSAGA#a", "META")}),
            Read(CHECK_PERSON, "p-1"): frozenset({("RSAGA#a", "META")}),
            Read(CHECK_PERSON, "p-2"): frozenset(),
        },
    )


def test_a_snapshot_survives_its_document_unchanged() -> None:
    original = snapshot()
    document = original.to_document()
    assert document["results"][CHECK_ALL] == [["RSAGA#a", "META"], ["RSAGA#b", "META"]]
    assert Snapshot.from_document(document) == original


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": None}, "not a verify snapshot"),
        ({"version": "1"}, "unsupported snapshot version"),
        ({"table": ""}, "snapshot table must be a non-empty string"),
        ({"shardCount": "16"}, "shardCount must be an integer"),
        ({"persons": ["p-1", "p-1"]}, "must not repeat"),
        ({"persons": [1]}, "non-empty strings"),
        ({"results": []}, "results must be an object"),
    ],
)
def test_a_damaged_snapshot_document_is_rejected_naming_the_field(
    change: dict[str, Any], message: str
) -> None:
    document = {**snapshot().to_document(), **change}
    with pytest.raises(InvalidSnapshotError, match=message):
        Snapshot.from_document(document)


def test_a_snapshot_error_is_invalid_input_so_the_cli_exits_2() -> None:
    assert issubclass(InvalidSnapshotError, InvalidInputError)


# ---- sampling and qualifying --------------------------------------------------------------------


def rows(*persons: Any) -> list[dict[str, Any]]:
    return [{"personId": p} for p in persons]


def test_the_sample_is_reproducible_by_seed_and_holds_routable_persons_only() -> None:
    population = rows(*(f"p-{n}" for n in range(50)), None, 42, "", "p-1")
    first = sample_persons(population, 10, seed=3)
    assert first == sample_persons(population, 10, seed=3)
    assert len(first) == 10
    assert list(first) == sorted(first)
    assert all(isinstance(p, str) and p.startswith("p-") for p in first)
    assert sample_persons(rows("a", "b"), 10, seed=1) == ("a", "b")
    assert sample_persons(rows("a"), 0, seed=1) == ()


def test_a_negative_sample_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="sample"):
        sample_persons([], -1, seed=None)


def test_which_rows_each_read_must_return() -> None:
    row = {"personId": "p-1", "state": "SIGNED"}
    assert Read(CHECK_ALL).qualifies(row)
    assert not Read(CHECK_OPEN).qualifies(row)
    assert Read(CHECK_OPEN).qualifies({**row, "state": "PREPARE_FAILED"})
    assert Read(CHECK_PERSON, "p-1").qualifies(row)
    assert not Read(CHECK_PERSON, "p-10").qualifies(row)
    assert Read(CHECK_PERSON, "p-1").label == "by-person:p-1"


# ---- the watch ----------------------------------------------------------------------------------

END = datetime(2026, 7, 10, tzinfo=UTC)


def watch(throttles: float = 0, activity: float = 0) -> WatchReport:
    return WatchReport(
        table_name="t",
        index_name="i",
        start=END - timedelta(days=7),
        end=END,
        index_throttles={"ReadThrottleEvents": throttles},
        index_activity={"ConsumedReadCapacityUnits": activity},
        table_throttled_requests={"Query": 5},
        throttle_hours=(),
    )


def test_the_verdict_needs_evidence_that_the_index_was_watched() -> None:
    assert (watch(activity=10).verdict, watch(activity=10).ok) == ("none", True)
    assert (watch(throttles=1, activity=10).verdict, watch(throttles=1).ok) == ("throttled", False)
    assert (watch().verdict, watch().ok) == ("no-data", False)


def test_table_level_throttled_requests_do_not_decide_the_verdict() -> None:
    report = watch(activity=10)
    assert report.to_dict()["tableThrottledRequests"] == {"Query": 5}
    assert report.verdict == "none"


class IncompleteCloudWatch:
    def get_metric_data(self, **request: Any) -> dict[str, Any]:
        return {
            "MetricDataResults": [
                {"Id": q["Id"], "Timestamps": [], "Values": [], "StatusCode": "PartialData"}
                for q in request["MetricDataQueries"]
            ]
        }


def test_incomplete_cloudwatch_data_is_an_error_not_a_clean_verdict() -> None:
    with pytest.raises(MetricReadError, match="incomplete data"):
        read_throttle_window(IncompleteCloudWatch(), "t", "i", days=7, end=END)


@pytest.mark.parametrize("days", [0, 456, True, 1.5])
def test_the_window_is_1_to_455_whole_days(days: Any) -> None:
    with pytest.raises(InvalidInputError, match="days"):
        validate_days(days)
