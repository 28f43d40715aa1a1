"""The backfill's contracts without a table: inputs, plan, phases, summary, exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from saga_index import keys
from saga_index.backfill.direction import Direction
from saga_index.backfill.messages import (
    ANOMALY_KEY_BUDGET,
    MAX_ANOMALY_KEYS,
    MAX_CONCURRENT_SEGMENTS,
    BackfillRequest,
    SegmentCounts,
    SegmentRequest,
    SegmentResult,
    VerificationResult,
    plan_segments,
    summarise,
)
from saga_index.errors import InvalidInputError
from saga_index.model import Phase
from saga_index_cli.backfill import exit_code


def segment(**fields: Any) -> SegmentRequest:
    base: dict[str, Any] = {
        "direction": "forward",
        "segment": 0,
        "totalSegments": 4,
        "maxWritesPerSecond": 12.5,
        "dryRun": False,
        "shardCount": 16,
    }
    return SegmentRequest.model_validate({**base, **fields})


def test_a_valid_segment_input_parses_from_camel_case_json() -> None:
    cursor = {"PK": {"S": "RSAGA#x"}, "SK": {"S": "META"}}
    parsed = segment(segment=3, cursor=cursor, dryRun=True)
    assert (parsed.direction, parsed.segment, parsed.cursor, parsed.dry_run) == (
        Direction.FORWARD,
        3,
        cursor,
        True,
    )
    assert parsed.max_writes_per_second == 12.5
    assert parsed.anomaly_key_limit == MAX_ANOMALY_KEYS


def test_every_violation_of_a_segment_input_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        segment(
            direction="up",
            totalSegments=0,
            maxWritesPerSecond=0,
            dryRun=1,
            shardCount=3,
            cursor="next",
        )
    fields = {str(error["loc"][0]) for error in caught.value.errors()}
    assert fields == {
        "direction",
        "totalSegments",
        "maxWritesPerSecond",
        "dryRun",
        "shardCount",
        "cursor",
    }


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"segment": 4}, "segment must be less than totalSegments (4), got 4"),
        ({"totalSegments": 1001}, "less than or equal to 1000"),
        ({"maxWritesPerSecond": 1000.5}, "less than or equal to 1000"),
        ({"maxWritesPerSecond": True}, "maxWritesPerSecond"),
        ({"segment": 1.0}, "segment"),
        ({"shardCount": 2048}, "power of two from 1 to 1024"),
        ({"cursor": {"PK": {"S": "a"}}}, "got attributes ['PK']"),
        ({"cursor": {"PK": {"S": ""}, "SK": {"S": "META"}}}, "cursor.PK"),
        ({"unknown": 1}, "Extra inputs are not permitted"),
    ],
)
def test_a_bad_segment_input_names_its_problem(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        segment(**fields)
    assert problem in str(caught.value)


def test_a_run_request_needs_an_explicit_dry_run_flag_and_defaults_the_rest() -> None:
    with pytest.raises(ValidationError, match="dryRun"):
        BackfillRequest.model_validate({"direction": "forward"})
    request = BackfillRequest.model_validate({"direction": "rollback", "dryRun": False})
    assert (request.total_segments, request.max_writes_per_second) == (4, 50.0)


@pytest.mark.parametrize(
    ("segments", "total", "share"),
    [(1, 50, 50.0), (4, 50, 12.5), (16, 80, 5.0), (1000, 80, 80 / MAX_CONCURRENT_SEGMENTS)],
)
def test_each_segment_gets_its_share_of_the_total_cap_among_those_running_at_once(
    segments: int, total: float, share: float
) -> None:
    request = BackfillRequest(
        direction=Direction.FORWARD,
        total_segments=segments,
        max_writes_per_second=total,
        dry_run=False,
    )
    requests = request.segment_requests(shard_count=16)
    assert [r.segment for r in requests] == list(range(segments))
    assert {r.max_writes_per_second for r in requests} == {share}
    # never more than the total in flight at once
    assert share * min(segments, MAX_CONCURRENT_SEGMENTS) == pytest.approx(total)


@pytest.mark.parametrize("segments", [1, 4, 100, 399, 400, 401, 1000])
def test_the_map_state_of_any_run_stays_below_256_kb(segments: int) -> None:
    # Given segments whose results each carry their full share of anomaly keys
    request = BackfillRequest(direction=Direction.FORWARD, total_segments=segments, dry_run=False)
    plan = plan_segments(request, shard_count=16, phase=Phase.MIGRATING)
    limit = plan.template["anomalyKeyLimit"]
    assert limit * segments <= ANOMALY_KEY_BUDGET
    assert limit == min(MAX_ANOMALY_KEYS, ANOMALY_KEY_BUDGET // segments)
    long_key = {"PK": "RSAGA#" + "x" * 60, "SK": "META"}
    results = [
        SegmentResult(
            segment=n,
            scanned=10**9,
            restamped=10**7,
            skipped=10**7,
            anomalies=10**7,
            would_restamp=10**7,
            throttles=10**7,
            anomaly_keys=[long_key] * limit,
        ).to_json()
        for n in range(segments)
    ]
    # When the Map has added them to the state (Step Functions counts compact JSON)
    map_state = {**plan.to_json(), "segmentResults": results}
    size = len(json.dumps(map_state, separators=(",", ":")))
    # Then it fits, with room to spare
    assert size < 256 * 1024 * 0.9


def test_a_local_run_keeps_up_to_100_keys_per_segment() -> None:
    request = BackfillRequest(direction=Direction.FORWARD, total_segments=1000, dry_run=False)
    assert {r.anomaly_key_limit for r in request.segment_requests(16)} == {MAX_ANOMALY_KEYS}


@pytest.mark.parametrize(
    ("direction", "allowed"),
    [
        (Direction.FORWARD, {Phase.MIGRATING, Phase.SHARDED}),
        (Direction.ROLLBACK, {Phase.ROLLING_BACK, Phase.LEGACY}),
    ],
)
def test_a_direction_runs_only_where_the_writers_already_stamp_its_target(
    direction: Direction, allowed: set[Phase]
) -> None:
    for phase in Phase:
        if phase in allowed:
            direction.check_phase(phase)
        else:
            with pytest.raises(InvalidInputError, match="cdk deploy -c phase="):
                direction.check_phase(phase)


def test_the_plan_refuses_a_direction_the_deployed_phase_would_undo() -> None:
    request = BackfillRequest(direction=Direction.ROLLBACK, dry_run=True)
    with pytest.raises(InvalidInputError, match="phase rolling-back or legacy"):
        plan_segments(request, shard_count=16, phase="migrating")


def test_source_keys_and_targets_per_direction() -> None:
    shard_key = keys.shard_gsi4pk_for_person("p-1", 16)
    assert Direction.FORWARD.is_source(keys.LEGACY_GSI4PK)
    assert not Direction.FORWARD.is_source(shard_key)
    assert Direction.ROLLBACK.is_source(shard_key)
    assert not Direction.ROLLBACK.is_source(keys.LEGACY_GSI4PK)
    assert not Direction.ROLLBACK.is_source("RenewalSaga#x")
    assert not Direction.ROLLBACK.is_source(None)
    assert Direction.FORWARD.target("p-1", 16) == shard_key
    assert Direction.ROLLBACK.target("p-1", 16) == keys.LEGACY_GSI4PK
    assert Direction.ROLLBACK.source_partitions(4) == keys.all_shard_gsi4pks(4)


def test_totals_add_up_and_anomaly_keys_stop_at_the_limit() -> None:
    total = SegmentCounts(restamped=1, anomalies=60, anomaly_keys=[{"PK": "a", "SK": "M"}] * 60)
    total.add(SegmentCounts(restamped=2, anomalies=60, anomaly_keys=[{"PK": "b", "SK": "M"}] * 60))
    assert (total.restamped, total.anomalies, len(total.anomaly_keys)) == (3, 120, 100)


def verification(ok: bool, remaining_anomalies: int = 0) -> VerificationResult:
    return VerificationResult(
        direction=Direction.FORWARD,
        dry_run=False,
        partitions=[keys.LEGACY_GSI4PK],
        remaining=remaining_anomalies,
        remaining_anomalies=remaining_anomalies,
        remaining_other_entities=0,
        unexpected=0 if ok else 1,
        unexpected_keys=[],
        ok=ok,
        message="",
    )


@pytest.mark.parametrize(
    ("anomalies", "complete", "ok", "failed", "code"),
    [
        (0, True, True, False, 0),
        (2, True, True, False, 3),
        (0, True, False, False, 1),
        (2, False, True, False, 1),
        (0, True, True, True, 1),
    ],
)
def test_exit_codes(anomalies: int, complete: bool, ok: bool, failed: bool, code: int) -> None:
    request = BackfillRequest(direction=Direction.FORWARD, dry_run=False)
    summary = summarise(
        request,
        [SegmentResult(segment=0, anomalies=anomalies)],
        complete=complete,
        verification=verification(ok),
    )
    assert exit_code(summary, failed=failed) == code


def test_anomalies_found_only_by_the_verification_still_exit_3() -> None:
    request = BackfillRequest(direction=Direction.FORWARD, dry_run=False)
    summary = summarise(
        request, [], complete=True, verification=verification(True, remaining_anomalies=1)
    )
    assert exit_code(summary, failed=False) == 3
