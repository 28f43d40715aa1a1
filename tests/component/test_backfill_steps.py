"""The state machine's steps (layout_change.backfill.steps) on moto, where the handler tests do not
reach them: a lease lost while a worker runs, and a verification without (or after losing) the
run's lease."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import pytest
from moto import mock_aws

from handlers import backfill_worker
from saga_index.index import keys, names
from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.backfill import (
    BackfillRequest,
    PlanRequest,
    SegmentRequest,
    SegmentResult,
    VerifyRequest,
)
from saga_index.layout_change.backfill.keeper import token_for_execution
from saga_index.layout_change.backfill.pace_curve import PaceRules
from saga_index.layout_change.backfill.pacing import TokenBucket
from saga_index.layout_change.backfill.steps import plan_run, run_leased_segment, verify_run
from saga_index.layout_change.backfill.wire import RunTicket
from saga_index.layout_change.lease import LeaseLostError
from saga_index.layout_change.lease.grant import release_lease
from saga_index.layout_change.record.store import ControlStore
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import VALID, N, data_rows, plant, seed
from tests.support.control_seed import transition
from tests.support.faults import ThrottleInjector
from tests.support.lambda_harness import FakeLambdaContext, as_function, emf_documents

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Backfill:steps-1"
TOKEN = token_for_execution(EXECUTION)


def at_the_cap(rules: PaceRules) -> PaceRules:
    """The production rules, but a run that starts at its cap."""
    return dataclasses.replace(rules, start_fraction=1.0)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("backfill-steps", synthesized_template, endpoint_url=None)


def operator(dynamo: Backend) -> ControlStore:
    """Another process's view of the record (its own client)."""
    return ControlStore(dynamo.new_client(), dynamo.table_name)


def planned(dynamo: Backend, *, dry_run: bool = False) -> tuple[BackfillRequest, RunTicket]:
    """The record migrating, and the plan step's ticket for EXECUTION (one segment)."""
    plant(dynamo, "migrating")
    request = BackfillRequest.model_validate(
        {"direction": "forward", "totalSegments": 1, "maxWritesPerSecond": 1000, "dryRun": dry_run}
    )
    plan = plan_run(
        dynamo.client, dynamo.table_name, PlanRequest(request=request, holder=EXECUTION)
    )
    return request, plan.run


def segment(request: BackfillRequest, run: RunTicket) -> SegmentRequest:
    return request.segment_requests(run)[0]


def a_transition_once_the_scan_starts(dynamo: Backend) -> None:
    """`phase set` aborts the migration right after the worker's first Scan is sent: the lease's
    state version moves on while the worker writes."""
    fired: list[bool] = []

    def abort(**_: Any) -> None:
        if not fired:
            fired.append(True)
            abort_to_legacy = transition(
                Layout.sharded(N), LEGACY, version=2, previous=(LEGACY, Layout.sharded(N))
            )
            assert operator(dynamo).compare_and_set(1, abort_to_legacy)

    dynamo.client.meta.events.register("before-call.dynamodb.Scan", abort)


def moved(dynamo: Backend) -> int:
    """Valid sagas no longer on the legacy key."""
    valid = {f"RSAGA#{saga}" for saga in VALID}
    return sum(
        1
        for raw in data_rows(dynamo)
        if raw["PK"]["S"] in valid and raw.get("GSI4PK", {}).get("S") != keys.LEGACY_GSI4PK
    )


def test_given_the_lease_lost_while_a_worker_runs_then_the_outcome_carries_counts_and_the_loss(
    dynamo: Backend,
) -> None:
    # Given a leased run, and a transition once the worker's Scan starts
    seed(dynamo)
    request, run = planned(dynamo)
    a_transition_once_the_scan_starts(dynamo)

    # When the worker runs
    outcome = run_leased_segment(
        dynamo.client, dynamo.table_name, segment(request, run), remaining_seconds=lambda: 300.0
    )

    # Then a heartbeat found the lease gone (the re-stamps do not check STATE: no newer run
    # armed the fence slots, docs/control-contract.md "The fence", point 2), the counts say what
    # it moved, and unwrapping fails. What it moved went to the run's target, which readers in
    # `rolling-back` still read, and the rollback run, which arms the slots before its scan,
    # moves it back.
    assert outcome.lease_lost is not None
    assert "moved to version 2" in str(outcome.lease_lost)
    valid = {f"RSAGA#{saga}" for saga in VALID}
    for raw in data_rows(dynamo):
        if raw["PK"]["S"] in valid and raw["GSI4PK"]["S"] != keys.LEGACY_GSI4PK:
            assert raw["GSI4PK"]["S"] == keys.shard_gsi4pk_for_person(raw["personId"]["S"], N)
    assert (
        outcome.metric_values()[names.METRIC_RESTAMPED] == outcome.result.restamped == moved(dynamo)
    )
    with pytest.raises(LeaseLostError, match="moved to version 2"):
        outcome.unwrap()


def test_given_the_lease_lost_while_the_worker_handler_runs_then_it_publishes_then_fails(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    request, run = planned(dynamo)
    a_transition_once_the_scan_starts(dynamo)
    monkeypatch.setenv(names.ENV_TABLE, dynamo.table_name)
    capsys.readouterr()

    with (
        as_function(monkeypatch, service=None, dynamodb=dynamo.client),
        pytest.raises(LeaseLostError, match="moved to version 2"),
    ):
        backfill_worker.handler(segment(request, run).to_json(), FakeLambdaContext())

    # the counts are published all the same (what it moved before a heartbeat found the lease
    # gone: the run's target, which the aborted state still reads)
    [blob] = emf_documents(capsys.readouterr().out)
    assert blob[names.METRIC_RESTAMPED] == [float(moved(dynamo))]


def test_given_the_lease_released_by_someone_else_then_verify_fails_and_records_nothing(
    dynamo: Backend,
) -> None:
    seed(dynamo, VALID[:2])
    request, run = planned(dynamo)
    result = run_leased_segment(
        dynamo.client, dynamo.table_name, segment(request, run), remaining_seconds=lambda: 300.0
    ).unwrap()
    release_lease(operator(dynamo), token=TOKEN)  # no completion: the run's is not recorded

    with pytest.raises(LeaseLostError):
        verify_run(
            dynamo.client,
            dynamo.table_name,
            VerifyRequest(request=request, run=run, segments=[result]),
            index_name=names.INDEX_NAME,
        )

    assert operator(dynamo).read().last_backfill is None


def test_given_a_dry_run_then_verify_reads_back_and_records_nothing(dynamo: Backend) -> None:
    seed(dynamo, VALID[:3])
    request, run = planned(dynamo, dry_run=True)
    assert run.lease_token is None
    result = run_leased_segment(
        dynamo.client, dynamo.table_name, segment(request, run), remaining_seconds=lambda: 300.0
    ).unwrap()
    before = data_rows(dynamo)

    summary = verify_run(
        dynamo.client,
        dynamo.table_name,
        VerifyRequest(request=request, run=run, segments=[result]),
        index_name=names.INDEX_NAME,
    )

    assert summary.dry_run is True
    assert summary.would_restamp == 3
    assert summary.verification is not None
    assert summary.verification.ok is True
    assert summary.verification.metric_values() == {
        names.METRIC_SOURCE_KEY_ROWS: summary.verification.remaining,
        names.METRIC_UNEXPECTED_SOURCE_KEY_ROWS: 0,
    }
    state = operator(dynamo).read()
    assert (state.lease, state.last_backfill) == (None, None)
    assert data_rows(dynamo) == before


def test_given_a_throttled_invocation_then_the_next_one_goes_on_at_its_pace_and_status_shows_it(
    dynamo: Backend,
) -> None:
    # Given a leased one-segment run whose re-stamps DynamoDB throttles for the table's
    # provisioned throughput (botocore's retry lands each write)
    seed(dynamo)
    request, run = planned(dynamo)
    ThrottleInjector(
        dynamo.client,
        "TransactWriteItems",
        times=3,
        reasons=[{"reason": "TableWriteProvisionedThroughputExceeded", "resource": "table"}],
    )
    # When the first invocation runs out of time after a few rows (each invocation paced on
    # its own virtual clock, which its bucket's waits move: how long the machine takes is not
    # part of the pace)
    calls = iter(range(1_000_000))
    worker = segment(request, run)

    def bucket(clock: VirtualTime, rules: PaceRules | None = None) -> TokenBucket:
        return TokenBucket(
            worker.max_writes_per_second,
            clock=clock,
            sleep=clock.sleep,
            rules=rules or worker.pace_rules(),
        )

    first = run_leased_segment(
        dynamo.client,
        dynamo.table_name,
        worker,
        remaining_seconds=lambda: 300.0 if next(calls) < 8 else 0.0,
        # Started at the cap: a few rows are not the run's rise from its start (PaceRules)
        bucket=bucket(VirtualTime(1_000.0), at_the_cap(worker.pace_rules())),
    ).unwrap()
    # Then it returns its cursor with the pace it ended at (the run's rate stepped back to 90 %
    # of the cap it was throttled at, three refusals being too few to halve it, held there by
    # the memory of that rate), and why
    assert not first.done
    assert first.pace is not None
    assert first.pace["rate"] == pytest.approx(900.0)
    assert first.pace["badRate"] == 1000.0
    assert first.pace["reason"] == "TableWriteProvisionedThroughputExceeded"
    # When the state machine hands its result to the next invocation (through JSON)
    carried = SegmentResult.model_validate(first.to_json())
    second = run_leased_segment(
        dynamo.client,
        dynamo.table_name,
        worker.model_copy(update={"cursor": carried.cursor, "totals": carried}),
        remaining_seconds=lambda: 300.0,
        bucket=bucket(VirtualTime(7.0)),
    ).unwrap()
    # Then it went on at that pace (not the cap) and its heartbeat told the record why
    assert second.done
    assert second.pace is None  # a finished segment carries none to the verification
    lease = operator(dynamo).read().lease
    assert lease is not None
    assert re.fullmatch(
        r"segment 0: 9\d\d/s of 1e\+03/s \(TableWriteProvisionedThroughputExceeded\)",
        lease.pace or "",
    ), lease.pace


class VirtualTime:
    """An invocation's own clock: it moves only when its bucket waits."""

    def __init__(self, origin: float) -> None:
        self.now = origin

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_given_a_segment_slowed_by_a_key_range_then_its_next_invocation_starts_slowed(
    dynamo: Backend,
) -> None:
    # Given a leased two-segment run at the production cap, and segment 1's first re-stamp
    # throttled for the hot key's range (botocore's retry lands it)
    seed(dynamo)
    plant(dynamo, "migrating")
    request = BackfillRequest.model_validate(
        {"direction": "forward", "totalSegments": 2, "maxWritesPerSecond": 1000, "dryRun": False}
    )
    run = plan_run(
        dynamo.client, dynamo.table_name, PlanRequest(request=request, holder=EXECUTION)
    ).run
    worker = request.segment_requests(run)[1]
    share = worker.max_writes_per_second  # 500/s: the segment's share of the run's cap
    ThrottleInjector(
        dynamo.client,
        "TransactWriteItems",
        times=1,
        reasons=[{"reason": "IndexWriteKeyRangeThroughputExceeded", "resource": "index"}],
    )

    def invocation(
        clock: VirtualTime, rows: int, **update: Any
    ) -> tuple[SegmentResult, list[float]]:
        """One worker invocation on `clock`, out of time after `rows` re-stamps; the virtual
        times they were sent at."""
        sent: list[float] = []
        handler = lambda **_: sent.append(clock.now)  # noqa: E731
        dynamo.client.meta.events.register("before-call.dynamodb.TransactWriteItems", handler)
        # The first invocation starts at the cap (a few rows are not the run's rise from its
        # start); the next one goes on from the pace handed to it.
        rules = worker.pace_rules() if update else at_the_cap(worker.pace_rules())
        bucket = TokenBucket(share, clock=clock, sleep=clock.sleep, rules=rules)
        try:
            result = run_leased_segment(
                dynamo.client,
                dynamo.table_name,
                worker.model_copy(update=update),
                remaining_seconds=lambda: 300.0 if len(sent) < rows else 0.0,
                bucket=bucket,
            ).unwrap()
        finally:
            dynamo.client.meta.events.unregister("before-call.dynamodb.TransactWriteItems", handler)
        return result, sent

    # When its first invocation returns
    first, _ = invocation(VirtualTime(1_000.0), 2)
    # Then the pace it hands on carries the segment's slowdown: stepped back, the run's rate not
    assert not first.done
    assert first.pace is not None
    assert (first.pace["slowedSegment"], first.pace["rate"]) == (1, share)
    assert first.pace["segmentRate"] == pytest.approx(0.9 * share, rel=0.01)
    assert first.pace["segmentReason"] == "IndexWriteKeyRangeThroughputExceeded"

    # When the state machine hands it (through JSON) to the next invocation, on another clock
    carried = SegmentResult.model_validate(first.to_json())
    second, sent = invocation(VirtualTime(7.0), 100, cursor=carried.cursor, totals=carried)
    # Then that invocation's re-stamps start at the slowed rate (one every 1/450 s, not the
    # run bucket's burst at 500/s) and stay there, held at 90 % of the throttled rate
    assert second.done
    rates = [1 / (later - earlier) for earlier, later in pairwise(sent)]
    assert len(rates) >= 3
    assert rates == pytest.approx([0.9 * share] * len(rates), rel=0.01)
