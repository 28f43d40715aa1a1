"""Planning a run under its lease (backfill.keeper.take_run, backfill.steps.plan_run) on moto: the
control record is read ONCE, and the lease is taken under that very state."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index.layout import LEGACY, Layout
from saga_index.index.names import CONTROL_PK
from saga_index.layout_change import lease
from saga_index.layout_change.backfill import BackfillRequest, PlanRequest, backfill_locally
from saga_index.layout_change.backfill.keeper import take_run, token_for_execution
from saga_index.layout_change.backfill.steps import plan_run
from saga_index.layout_change.lease import LeaseHeldError
from saga_index.layout_change.lease.grant import acquire_lease
from saga_index.layout_change.record.errors import VersionConflictError
from saga_index.layout_change.record.items import STATE_SK
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import utc_now
from saga_index_cli.backfill import start as cli_start
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import N, plant

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:Backfill:lease-1"


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("backfill-lease", synthesized_template, endpoint_url=None)


def state_reads(dynamo: Backend) -> list[dict[str, Any]]:
    """Every GetItem of the STATE item `dynamo.client` sends from now on."""
    reads: list[dict[str, Any]] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        if params.get("Key") == {"PK": {"S": CONTROL_PK}, "SK": {"S": STATE_SK}}:
            reads.append(params)

    dynamo.client.meta.events.register("before-parameter-build.dynamodb.GetItem", count)
    return reads


def request(*, dry_run: bool) -> BackfillRequest:
    return BackfillRequest.model_validate(
        {"direction": "forward", "totalSegments": 4, "maxWritesPerSecond": 100, "dryRun": dry_run}
    )


@pytest.mark.parametrize("dry_run", [False, True], ids=["leased", "dry-run"])
def test_planning_reads_the_record_once(dynamo: Backend, dry_run: bool) -> None:
    planted = plant(dynamo, "migrating")
    reads = state_reads(dynamo)
    plan = plan_run(
        dynamo.client,
        dynamo.table_name,
        PlanRequest(request=request(dry_run=dry_run), holder=EXECUTION),
    )
    assert len(reads) == 1
    assert all(read["ConsistentRead"] is True for read in reads)
    move = plan.run.move()
    assert (move.source, move.target) == (LEGACY, Layout.sharded(N))
    assert plan.run.state_version == planted.version
    expected_token = None if dry_run else token_for_execution(EXECUTION)
    assert plan.run.lease_token == expected_token


def test_a_retried_plan_finds_its_lease_with_one_read(dynamo: Backend) -> None:
    plant(dynamo, "migrating")
    store = ControlStore(dynamo.client, dynamo.table_name)
    token = token_for_execution(EXECUTION)
    first, _ = take_run(store, request(dry_run=False), holder=EXECUTION, token=token)
    reads = state_reads(dynamo)
    again, state = take_run(store, request(dry_run=False), holder=EXECUTION, token=token)
    assert len(reads) == 1
    assert again == first
    assert state.lease is not None
    assert state.lease.token == token


def test_the_lease_is_taken_under_the_state_planning_read(dynamo: Backend) -> None:
    """A transition between planning's read and the lease's write is not missed: the
    compare-and-set on the version read refuses, and nothing is leased."""
    plant(dynamo, "migrating")
    store = ControlStore(dynamo.client, dynamo.table_name)
    stale = store.read()
    plant(dynamo, "migrating", version=2)
    with pytest.raises(VersionConflictError):
        acquire_lease(
            store,
            holder="planner",
            token="t-1",
            direction=BackfillDirection.FORWARD,
            state=stale,
        )
    assert store.read().lease is None


def test_the_start_rule_is_the_leases_and_every_starter_asks_it(dynamo: Backend) -> None:
    # The CLI's pre-check before a Step Functions execution is the lease's own rule, not a copy.
    assert cli_start.check_startable is lease.check_startable
    plant(dynamo, "migrating")
    store = ControlStore(dynamo.client, dynamo.table_name)
    acquire_lease(store, holder="other-run", token="other-token", direction="forward")
    state = store.read()
    with pytest.raises(LeaseHeldError) as rule:
        lease.check_startable(state, utc_now())
    # The Step Functions plan step and the local run are refused by the same rule, in its words.
    with pytest.raises(LeaseHeldError) as planned:
        plan_run(
            dynamo.client,
            dynamo.table_name,
            PlanRequest(request=request(dry_run=False), holder=EXECUTION),
        )
    with pytest.raises(LeaseHeldError) as local:
        backfill_locally(dynamo.client, dynamo.table_name, request(dry_run=False), holder="me")
    assert str(planned.value) == str(local.value) == str(rule.value)
    # The run holding the lease is no refusal to itself.
    lease.check_startable(state, utc_now(), token="other-token")
