"""backfill_locally, the one local orchestration the CLI and the demo call, against moto."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.backfill.local import backfill_locally
from saga_index.backfill.messages import SegmentCounts
from saga_index.errors import InvalidInputError
from saga_index.model import Phase
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import (
    ANOMALIES,
    VALID,
    N,
    assert_every_valid_saga_on_its_shard,
    request,
    seed,
)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("local-backfill", synthesized_template, endpoint_url=None)


def test_given_a_complete_run_then_totals_grow_to_the_summary_and_the_read_back_follows_the_run(
    dynamo: Backend,
) -> None:
    # Given legacy sagas, anomalies and other entities
    seed(dynamo)
    totals: list[SegmentCounts] = []
    inside = threading.Event()
    queries_inside: list[str] = []

    def count_queries(**_: Any) -> None:
        if inside.is_set():
            queries_inside.append("Query")

    @contextlib.contextmanager
    def while_running() -> Iterator[None]:
        inside.set()
        yield
        inside.clear()

    dynamo.client.meta.events.register("before-call.dynamodb.Query", count_queries)

    # When it runs with a progress callback and a context around the run
    outcome = backfill_locally(
        dynamo.client,
        dynamo.table_name,
        request(segments=3),
        phase=Phase.MIGRATING,
        shard_count=N,
        on_progress=lambda t: totals.append(t.model_copy()),
        while_running=while_running(),
    )

    # Then the run completed, was read back after the context closed, and verified
    summary = outcome.summary
    assert outcome.run.complete
    assert summary.complete
    assert summary.verified
    assert (summary.restamped, summary.anomalies) == (len(VALID), len(ANOMALIES))
    assert queries_inside == []
    assert outcome.seconds >= 0
    assert_every_valid_saga_on_its_shard(dynamo)
    # ...and the live totals only grew, ending at the run's counts
    handled = [t.handled for t in totals]
    assert handled == sorted(handled)
    assert handled[-1] == summary.restamped + summary.anomalies
    assert all(t.anomaly_keys == [] for t in totals)


def test_given_writers_that_would_undo_it_then_it_is_refused_before_anything_runs(
    dynamo: Backend,
) -> None:
    seed(dynamo)
    before = dynamo.scan_all()
    entered: list[bool] = []

    @contextlib.contextmanager
    def while_running() -> Iterator[None]:
        entered.append(True)
        yield

    with pytest.raises(InvalidInputError, match="phase"):
        backfill_locally(
            dynamo.client,
            dynamo.table_name,
            request(),
            phase=Phase.LEGACY,
            shard_count=N,
            while_running=while_running(),
        )

    assert entered == []
    assert dynamo.scan_all() == before


def test_given_a_stopped_run_then_it_is_summarised_as_incomplete_without_a_read_back(
    dynamo: Backend,
) -> None:
    seed(dynamo)
    stop = threading.Event()
    stop.set()

    outcome = backfill_locally(
        dynamo.client,
        dynamo.table_name,
        request(),
        phase=Phase.MIGRATING,
        shard_count=N,
        stop=stop,
    )

    assert outcome.run.interrupted
    assert not outcome.summary.complete
    assert outcome.summary.verification is None
    assert outcome.summary.restamped == 0
