"""The backfill's contracts without a table: inputs, plan, the move the record names, summary,
exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from saga_index.index import InvalidInputError, keys
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.names import MAX_CONCURRENT_SEGMENTS
from saga_index.index.shard import MAX_SHARD_COUNT
from saga_index.layout_change.backfill import BackfillRequest, SegmentRequest
from saga_index.layout_change.backfill.inputs import plan_segments
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.summary import VerificationResult, summarise
from saga_index.layout_change.backfill.wire import (
    ANOMALY_KEY_BUDGET,
    MAX_ANOMALY_KEYS,
    MAX_ANOMALY_REASON_CHARS,
    MAX_OPEN_EXAMPLES,
    MAX_OPEN_STATE_MACHINE_SEGMENTS,
    OPEN_ANOMALY_KEY_BUDGET,
    OPEN_EXAMPLE_BUDGET,
    LayoutSpec,
    OpenCounts,
    RunTicket,
    SegmentCounts,
    SegmentResult,
    anomaly_key,
)
from saga_index.layout_change.lease import LeaseDirectionError
from saga_index.layout_change.record.errors import ControlRecordMissingError
from saga_index.layout_change.record.state import (
    BackfillDirection,
    BackfillKind,
    ControlState,
    RecordCondition,
)
from saga_index_cli.backfill.output import exit_code
from tests.support.control_seed import transition

Direction = BackfillDirection
FORWARD_16 = Move.between_legacy_and(Direction.FORWARD, 16)


def ticket(move: Move = FORWARD_16, token: str | None = "token-1") -> RunTicket:  # noqa: S107
    return RunTicket.of(
        move,
        state_version=3,
        holder="alice@host/42",
        lease_token=token,
        started_at="2026-03-01T09:01:15.000Z",
    )


def segment(**fields: Any) -> SegmentRequest:
    base: dict[str, Any] = {
        "run": ticket().to_json(),
        "segment": 0,
        "totalSegments": 4,
        "maxWritesPerSecond": 12.5,
        "dryRun": False,
    }
    return SegmentRequest.model_validate({**base, **fields})


def test_a_valid_segment_input_parses_from_camel_case_json() -> None:
    cursor = {"PK": {"S": "RSAGA#x"}, "SK": {"S": "META"}}
    parsed = segment(segment=3, cursor=cursor, dryRun=True)
    assert (parsed.move, parsed.segment, parsed.cursor, parsed.dry_run) == (
        FORWARD_16,
        3,
        cursor,
        True,
    )
    assert parsed.max_writes_per_second == 12.5
    assert parsed.anomaly_key_limit == MAX_ANOMALY_KEYS


def test_every_violation_of_a_segment_input_is_named_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        segment(
            run={**ticket().to_json(), "direction": "up"},
            totalSegments=0,
            maxWritesPerSecond=0,
            dryRun=1,
            cursor="next",
        )
    fields = {str(error["loc"][0]) for error in caught.value.errors()}
    assert fields == {"run", "totalSegments", "maxWritesPerSecond", "dryRun", "cursor"}


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"segment": 4}, "segment must be less than totalSegments (4), got 4"),
        ({"totalSegments": 1001}, "less than or equal to 1000"),
        ({"maxWritesPerSecond": 1000.5}, "less than or equal to 1000"),
        ({"maxWritesPerSecond": True}, "maxWritesPerSecond"),
        ({"segment": 1.0}, "segment"),
        (
            {"run": {**ticket().to_json(), "target": {"kind": "sharded", "shardCount": 2048}}},
            "power of two from 1 to 1024",
        ),
        ({"run": {**ticket().to_json(), "source": {"kind": "circular"}}}, "run.source.kind"),
        ({"run": ticket(token=None).to_json()}, "a run that writes needs run.leaseToken"),
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
    requests = request.segment_requests(ticket())
    assert [r.segment for r in requests] == list(range(segments))
    assert {r.max_writes_per_second for r in requests} == {share}
    # never more than the total in flight at once
    assert share * min(segments, MAX_CONCURRENT_SEGMENTS) == pytest.approx(total)


def test_every_anomaly_key_carries_its_reason_cut_to_the_limit() -> None:
    raw = {"PK": {"S": "RSAGA#s1"}, "SK": {"S": "META"}}
    assert anomaly_key(raw, "personId must be a non-empty string") == {
        "PK": "RSAGA#s1",
        "SK": "META",
        "reason": "personId must be a non-empty string",
    }
    long = anomaly_key(raw, "r" * 5000)["reason"]
    assert len(long) == MAX_ANOMALY_REASON_CHARS
    assert long.endswith("...")
    assert anomaly_key(raw, "personId 'é'")["reason"] == "personId '\\xe9'"


def open_ticket(token: str | None = "token-1") -> RunTicket:  # noqa: S107
    return RunTicket.of(
        Move(Direction.FORWARD, LEGACY, LEGACY),
        state_version=3,
        holder="alice@host/42",
        lease_token=token,
        started_at="2026-03-01T09:01:15.000Z",
        open_shard_count=MAX_SHARD_COUNT,
    )


SEGMENT_COUNTS = [1, 4, 5, 20, 100, 299, 300, 301, 399, 400, 401]


@pytest.mark.parametrize(
    ("kind", "segments"),
    [
        *((BackfillKind.LAYOUT, n) for n in [*SEGMENT_COUNTS, 1000]),
        *((BackfillKind.OPEN_INDEX, n) for n in [*SEGMENT_COUNTS, MAX_OPEN_STATE_MACHINE_SEGMENTS]),
    ],
)
def test_the_map_state_of_any_run_stays_below_256_kb(kind: BackfillKind, segments: int) -> None:
    # Given segments whose results each carry their full share of anomaly keys and caps, each
    # key with the longest reason it can carry, of characters that escape to six bytes each
    # (an open-index run's: and its open counts, with its full share of example rows)
    opens = kind is BackfillKind.OPEN_INDEX
    request = BackfillRequest(
        direction=Direction.FORWARD, total_segments=segments, dry_run=False, kind=kind
    )
    plan = plan_segments(request, open_ticket() if opens else ticket())
    limit = plan.template["anomalyKeyLimit"]
    budget = OPEN_ANOMALY_KEY_BUDGET if opens else ANOMALY_KEY_BUDGET
    assert limit * segments <= budget
    assert limit == min(MAX_ANOMALY_KEYS, budget // segments)
    examples = plan.template["openExampleLimit"]
    assert examples == min(MAX_OPEN_EXAMPLES, OPEN_EXAMPLE_BUDGET // segments)
    long_key = anomaly_key({"PK": {"S": "RSAGA#" + "x" * 60}, "SK": {"S": "META"}}, "é" * 5000)
    example = {"PK": "RSAGA#" + "x" * 60, "SK": "META", "change": "remove"}
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
            # and its full share of applied caps, each as long as a rounded cap can print
            applied_caps=[999.999] * plan.template["appliedCapLimit"],
            open=OpenCounts(
                saga_rows=10**9, removed=10**7, would_remove=10**7, examples=[example] * examples
            )
            if opens
            else None,
        ).to_json()
        for n in range(segments)
    ]
    # When the Map has added them to the state (Step Functions counts the UTF-8 bytes of
    # compact JSON, escaped or not)
    map_state = {**plan.to_json(), "segmentResults": results}
    size = max(
        len(json.dumps(map_state, separators=(",", ":"), ensure_ascii=ascii).encode())
        for ascii in (True, False)
    )
    # Then it fits, with room to spare
    assert size < 256 * 1024 * 0.9


def test_the_state_machine_refuses_an_open_index_run_its_state_cannot_carry() -> None:
    too_many = MAX_OPEN_STATE_MACHINE_SEGMENTS + 1
    request = BackfillRequest(
        direction=Direction.FORWARD,
        total_segments=too_many,
        dry_run=False,
        kind=BackfillKind.OPEN_INDEX,
    )
    with pytest.raises(InvalidInputError, match=f"at most {MAX_OPEN_STATE_MACHINE_SEGMENTS}"):
        plan_segments(request, open_ticket())
    # A local run keeps its results in memory: every segment carries its examples.
    assert {r.open_example_limit for r in request.segment_requests(open_ticket())} == {
        MAX_OPEN_EXAMPLES
    }


def test_the_verification_scan_rate_travels_with_an_open_index_run_only() -> None:
    opens = BackfillRequest(
        direction=Direction.FORWARD,
        dry_run=False,
        kind=BackfillKind.OPEN_INDEX,
        verify_read_units_per_second=250.0,
    )
    assert opens.to_json()["verifyReadUnitsPerSecond"] == 250.0
    assert BackfillRequest.model_validate(opens.to_json()) == opens
    # Unset, the execution input is what it was before the field existed.
    assert (
        "verifyReadUnitsPerSecond"
        not in BackfillRequest(
            direction=Direction.FORWARD, dry_run=False, kind=BackfillKind.OPEN_INDEX
        ).to_json()
    )
    with pytest.raises(ValidationError, match="verifyReadUnitsPerSecond is an open-index run"):
        BackfillRequest(
            direction=Direction.FORWARD, dry_run=False, verify_read_units_per_second=250.0
        )


def test_a_local_run_keeps_up_to_100_keys_per_segment() -> None:
    request = BackfillRequest(direction=Direction.FORWARD, total_segments=1000, dry_run=False)
    assert {r.anomaly_key_limit for r in request.segment_requests(ticket())} == {MAX_ANOMALY_KEYS}


def test_a_dry_run_segment_needs_no_lease_and_the_plan_carries_the_ticket_once() -> None:
    dry = segment(run=ticket(token=None).to_json(), dryRun=True)
    assert dry.run.lease_token is None
    request = BackfillRequest(direction=Direction.FORWARD, total_segments=3, dry_run=False)
    plan = plan_segments(request, ticket()).to_json()
    assert plan["run"] == ticket().to_json()
    assert "run" not in plan["template"]
    assert plan["run"]["source"] == {"kind": "legacy", "shardCount": None}
    assert plan["run"]["target"] == {"kind": "sharded", "shardCount": 16}


def test_a_request_is_laid_out_only_for_a_ticket_of_its_own_direction() -> None:
    request = BackfillRequest(direction=Direction.ROLLBACK, dry_run=True)
    with pytest.raises(Exception, match="the run's ticket is forward"):
        request.segment_requests(ticket())


def test_a_layout_in_a_payload_round_trips() -> None:
    for layout in (LEGACY, Layout.sharded(1), Layout.sharded(1024)):
        assert LayoutSpec.model_validate(LayoutSpec.of(layout).to_json()).layout() == layout
    with pytest.raises(ValidationError, match="legacy layout has no shard count"):
        LayoutSpec.model_validate({"kind": "legacy", "shardCount": 4})


def state(current: Layout, moving_to: Layout | None = None, **kwargs: Any) -> ControlState:
    return ControlState(transition=transition(current, moving_to), **kwargs)


SHARDED_16 = Layout.sharded(16)


@pytest.mark.parametrize(
    ("record", "direction", "source", "target"),
    [
        (state(LEGACY, SHARDED_16), Direction.FORWARD, LEGACY, SHARDED_16),
        # sharded: rows repaired later still move forward
        (state(SHARDED_16), Direction.FORWARD, LEGACY, SHARDED_16),
        (state(SHARDED_16, LEGACY), Direction.ROLLBACK, SHARDED_16, LEGACY),
        # a re-shard's split is the same kind of move
        (state(SHARDED_16, Layout.sharded(32)), Direction.FORWARD, SHARDED_16, Layout.sharded(32)),
        # legacy after a migration: the clean-up of stray rows, from every shard key of any N
        (state(LEGACY), Direction.ROLLBACK, Layout.sharded(MAX_SHARD_COUNT), LEGACY),
    ],
)
def test_the_record_names_the_move_never_a_flag(
    record: ControlState, direction: BackfillDirection, source: Layout, target: Layout
) -> None:
    assert Move.for_state(record, direction) == Move(direction, source, target)


@pytest.mark.parametrize(
    ("record", "direction"),
    [
        (ControlState.never_migrated(), Direction.FORWARD),
        (state(LEGACY, SHARDED_16), Direction.ROLLBACK),
        (state(SHARDED_16), Direction.ROLLBACK),
        (state(SHARDED_16, LEGACY), Direction.FORWARD),
        (ControlState.never_migrated(), Direction.ROLLBACK),
    ],
)
def test_a_direction_the_records_writers_would_undo_is_refused_with_exit_2(
    record: ControlState, direction: BackfillDirection
) -> None:
    with pytest.raises(LeaseDirectionError, match=f"a {direction.value} backfill needs"):
        Move.for_state(record, direction)


def test_a_missing_record_is_refused_until_restored() -> None:
    missing = ControlState(
        transition=transition(SHARDED_16, None), condition=RecordCondition.MISSING
    )
    with pytest.raises(ControlRecordMissingError, match="restore"):
        Move.for_state(missing, Direction.FORWARD)


def test_the_row_rule_source_keys_and_targets_per_move() -> None:
    shard_key = keys.shard_gsi4pk_for_person("p-1", 16)
    rollback = Move.between_legacy_and(Direction.ROLLBACK, 16)
    assert FORWARD_16.must_move(keys.LEGACY_GSI4PK, "p-1")
    # a forward run sweeps the target's keys too: a row on its person's key stays, a
    # misrouted one (on another shard key of the target) moves
    assert FORWARD_16.is_on_source(shard_key)
    assert not FORWARD_16.must_move(shard_key, "p-1")
    misrouted = next(k for k in keys.all_shard_gsi4pks(16) if k != shard_key)
    assert FORWARD_16.must_move(misrouted, "p-1")
    assert not FORWARD_16.is_on_source(keys.sharded_gsi4pk(16))  # not a key of sharded(16)
    assert FORWARD_16.swept_partitions() == [keys.LEGACY_GSI4PK, *keys.all_shard_gsi4pks(16)]
    assert FORWARD_16.source_partitions() == [keys.LEGACY_GSI4PK]
    assert rollback.must_move(shard_key, "p-1")
    # any of the N shard keys is a rollback's source, even the wrong one for the person
    assert rollback.must_move(keys.shard_gsi4pk_for_person("p-2", 16), "p-1")
    assert not rollback.is_on_source(keys.LEGACY_GSI4PK)
    assert not rollback.is_on_source("RenewalSaga#x")
    assert not rollback.is_on_source("RenewalSaga#16")  # not a key of sharded(16)
    assert not rollback.is_on_source(None)
    assert FORWARD_16.target_key("p-1") == shard_key
    assert rollback.target_key("p-1") == keys.LEGACY_GSI4PK
    assert Move.between_legacy_and(Direction.ROLLBACK, 4).source_partitions() == (
        keys.all_shard_gsi4pks(4)
    )
    # a split: a row whose shard of 32 is its shard of 16 stays where it is
    split = Move(Direction.FORWARD, SHARDED_16, Layout.sharded(32))
    stays = next(
        f"p-{n}"
        for n in range(100)
        if keys.shard_gsi4pk_for_person(f"p-{n}", 16) == keys.shard_gsi4pk_for_person(f"p-{n}", 32)
    )
    assert not split.must_move(keys.shard_gsi4pk_for_person(stays, 16), stays)


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


@pytest.mark.parametrize("rate", [1e-300, 0.05, 0.0, 1000.5, float("nan")])
def test_given_a_total_write_cap_outside_the_bounds_then_the_request_is_refused_naming_it(
    rate: float,
) -> None:
    # A Step Functions input of 1e-300 would start a run that never writes: refused up front.
    with pytest.raises(ValidationError) as caught:
        BackfillRequest.model_validate(
            {"direction": "forward", "maxWritesPerSecond": rate, "dryRun": False}
        )

    assert caught.value.errors()[0]["loc"] == ("maxWritesPerSecond",)


def test_the_legacy_clean_up_moves_a_row_on_any_shard_key_of_any_n_home() -> None:
    clean_up = Move.for_state(state(LEGACY), Direction.ROLLBACK)
    for stray in (keys.sharded_gsi4pk(3), keys.sharded_gsi4pk(40), keys.sharded_gsi4pk(1023)):
        assert clean_up.must_move_row({"GSI4PK": stray, "personId": "p-1"})
    assert not clean_up.must_move_row({"GSI4PK": keys.LEGACY_GSI4PK, "personId": "p-1"})
    # the row has no usable personId: the legacy key needs none, so it moves too
    assert clean_up.must_move_row({"GSI4PK": keys.sharded_gsi4pk(3)})
