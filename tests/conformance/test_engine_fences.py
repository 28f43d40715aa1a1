"""The backfill's fences on the fast engine: the semantics proxy in front of dynalite judges every
client (the re-stamps, the lease keeper's heartbeats, the operator's commands) as the in-process
layer does on moto (tests/component/test_fence_under_dynamodb_semantics.py), here at HTTP level
and with the proxy serving the transactions dynalite lacks.

The known-bad shared-state fence (every re-stamp ConditionChecks the ONE control STATE item) is
starved: its re-stamps cancel each other and the heartbeats and the operator's writes of STATE
meet TransactionConflictException. The product's per-segment fence moves every row with none of
that."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devkit.capacity.table_schema import TableSchema
from devkit.engine import Engine
from saga_index.layout_change.lease.events import EVENT_PAUSE, EVENT_RESUME, EVENT_THROTTLE
from saga_index.layout_change.record.store import ControlStore
from tests.support.backends import Backend, make_backend
from tests.support.contended_backfill import (
    PRODUCT_FENCE,
    SHARED_STATE_FENCE,
    describe,
    run_contended_backfill,
)

pytestmark = pytest.mark.conformance

ROWS = 160
SEGMENTS = 8


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    """One engine for the module's runs (seconds to start): each run has a table of its own,
    and the proxy counts what it refused per table."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ACCESS_KEY_ID", "local")
        patch.setenv("AWS_SECRET_ACCESS_KEY", "local")
        with Engine() as running:
            yield running


@pytest.fixture
def dynamo(engine: Engine, synthesized_template: dict[str, Any]) -> Backend:
    return make_backend("engine-fence", synthesized_template, endpoint_url=engine.endpoint_url)


def test_the_shared_state_fence_is_starved_on_the_engine(
    engine: Engine, dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    schema = TableSchema.from_template(synthesized_template, dynamo.table_name)

    contended = run_contended_backfill(
        dynamo, schema, fence=SHARED_STATE_FENCE, rows=ROWS, segments=SEGMENTS, engine=engine
    )

    outcome, report = contended.outcome, describe(contended)
    # The re-stamps cancel each other on the STATE item they all check.
    assert outcome.stats.cancelled_transactions > 0, report
    assert outcome.stats.conflicts["TransactWriteItems"] == outcome.stats.cancelled_transactions
    # Heartbeats and the operator's pause/resume/throttle are refused while a re-stamp holds
    # STATE (counted per attempt: the control writes' retries get most of them through).
    assert outcome.heartbeats.outcomes["TransactionConflictException"] > 0, report
    assert outcome.operator.outcomes["TransactionConflictException"] > 0, report
    print(report)


def test_the_product_fence_holds_on_the_engine(
    engine: Engine, dynamo: Backend, synthesized_template: dict[str, Any]
) -> None:
    schema = TableSchema.from_template(synthesized_template, dynamo.table_name)

    contended = run_contended_backfill(
        dynamo, schema, fence=PRODUCT_FENCE, rows=ROWS, segments=SEGMENTS, engine=engine
    )

    outcome, report = contended.outcome, describe(contended)
    # Every re-stamp was a transaction the proxy served (the fence's slot check and the row)
    assert outcome.stats.transactions >= ROWS, report
    assert outcome.stats.cancelled_transactions == 0, report
    assert outcome.stopped_segments == {}, report
    assert outcome.run.lease_lost is None, report
    assert contended.left_on_legacy == 0, report
    assert outcome.run.summary.restamped == ROWS, report
    assert outcome.heartbeats.ok == outcome.heartbeats.total > 0, report
    assert outcome.operator.ok == outcome.operator.total > 0, report
    assert outcome.operator_failures == [], report
    applied = {e["event"] for e in ControlStore(dynamo.client, dynamo.table_name).events()}
    assert {EVENT_THROTTLE, EVENT_PAUSE, EVENT_RESUME} <= applied, report


def test_the_bench_sets_the_fenced_run_beside_the_unfenced_one_on_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bench import fence

    saved: dict[str, Any] = {}
    monkeypatch.setattr(fence, "save", lambda name, document: saved.update(document))

    assert fence.main(["--engine", "--tiny"]) == 0

    runs = {r["fence"]: r for r in saved["runs"]}
    assert set(runs) == {"unfenced", "per-segment"}
    assert runs["unfenced"]["vs_unfenced"] == pytest.approx(1.0)
    for run in runs.values():
        assert run["restamped"] == run["rows"]
        assert run["lease_lost"] is None
        assert run["cancelled_transactions"] == 0
        # The arming (lease, fence slots) is reported apart from the steady state
        assert run["arming_seconds"] > 0
        assert 0 < run["steady_over_cap"] <= 1.5
    assert saved["operator_every_seconds"] is None
