"""A sweep never acts on a partial list: one shard that stays throttled through every retry fails
the invocation, and nothing is published, claimed or counted as read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from handlers import runtime
from handlers import sweeps as handlers
from saga_index.index import keys
from saga_index.index.errors import EnumerationError
from saga_index.index.shard import shard
from tests.component.sweeps_support import (
    SHARDS,
    SweepWorld,
    payload,
    world,
)
from tests.support.faults import ThrottleInjector, queries_partition
from tests.support.lambda_harness import (
    FakeLambdaContext,
    emf_documents,
    metric,
)

__all__ = ["world"]

T = datetime(2026, 7, 10, 12, 2, tzinfo=UTC)
LONG_AGO = "2026-07-01T00:00:00.000Z"

SWEEPS: dict[str, Callable[[dict[str, Any], Any], dict[str, Any]]] = {
    "workflow-health-sweep": handlers.workflow_health_sweep,
    "retry-failed-prepare": handlers.retry_failed_prepare,
    "stuck-saga-sweep": handlers.stuck_saga_sweep,
    "agent-metrics-snapshot": handlers.agent_metrics_snapshot,
}


@pytest.mark.parametrize("job", list(SWEEPS))
def test_given_one_shard_throttled_through_every_retry_when_a_sweep_runs_then_it_fails_and_acts_on_nothing(  # noqa: E501
    world: SweepWorld, job: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Sagas every sweep would act on, on the legacy key and on shards (migrating: both read).
    b = world.backend
    for n in range(12):
        b.put_saga(
            f"s{n}",
            f"p-{n}",
            gsi4pk="shard" if n % 2 else None,
            state="PREPARE_FAILED",
            opened_at=LONG_AGO,
            updatedAt=LONG_AGO,
        )
    throttled = keys.sharded_gsi4pk(shard("p-1", SHARDS))
    before = b.scan_all()
    # A client with few attempts keeps the test fast; botocore still retries each throttle.
    client = b.new_client(max_attempts=2)
    injector = ThrottleInjector(client, "Query", times=None, match=queries_partition(throttled))
    runtime.clients.use(dynamodb=client, events=world.events_client)

    with pytest.raises(EnumerationError, match=throttled):
        SWEEPS[job](payload(job, T), FakeLambdaContext())

    assert injector.injected >= 2  # botocore retried the shard before the read gave up
    assert world.drain() == []  # nothing published
    assert b.scan_all() == before  # nothing claimed or otherwise written
    docs = emf_documents(capsys.readouterr().out)
    assert metric(docs, "SagasRead") == []
    assert metric(docs, "OpenSagas") == []
    assert len(metric(docs, "SweepDuration")) == 1  # the failed run is still timed
