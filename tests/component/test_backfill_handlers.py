"""The three backfill handlers on moto: parsed input, one domain call, metrics as EMF."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from pydantic import ValidationError

from handlers import backfill_plan, backfill_verify, backfill_worker
from saga_index import names
from saga_index.errors import InvalidInputError
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import ANOMALIES, VALID, N, seed
from tests.support.lambda_harness import FakeLambdaContext, as_function, emf_documents

# A refused input publishes no metrics; Powertools warns about that, by design here.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture
def dynamo(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("handlers", synthesized_template, endpoint_url=None)
        monkeypatch.setenv("SAGA_TABLE_NAME", backend.table_name)
        monkeypatch.setenv("SAGA_INDEX_NAME", names.INDEX_NAME)
        monkeypatch.setenv("SAGA_INDEX_PHASE", "migrating")
        monkeypatch.setenv("SAGA_INDEX_SHARDS", str(N))
        with as_function(monkeypatch, service=None):
            yield backend


def worker_event(**overrides: Any) -> dict[str, Any]:
    return {
        "direction": "forward",
        "segment": 0,
        "totalSegments": 1,
        "cursor": None,
        "maxWritesPerSecond": 1000,
        "dryRun": False,
        "shardCount": N,
        **overrides,
    }


def emf(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return emf_documents(capsys.readouterr().out)


def test_given_a_segment_when_the_worker_runs_then_it_returns_counts_and_publishes_emf(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo)
    capsys.readouterr()

    result = backfill_worker.handler(worker_event(), FakeLambdaContext())

    assert result["cursor"] is None
    assert (result["restamped"], result["anomalies"], result["skipped"]) == (
        len(VALID),
        len(ANOMALIES),
        0,
    )
    assert len(result["anomalyKeys"]) == len(ANOMALIES)
    [blob] = emf(capsys)
    [directive] = blob["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "RenewalSagaIndex"
    assert {"TableName", "IndexName"} <= set(directive["Dimensions"][0])
    assert blob["TableName"] == dynamo.table_name
    assert blob["IndexName"] == names.INDEX_NAME
    metric_names = {m["Name"] for m in directive["Metrics"]}
    assert {"Restamped", "Skipped", "Anomalies", "Throttles", "Scanned"} <= metric_names
    assert blob["Restamped"] == [float(len(VALID))]
    assert blob["Anomalies"] == [float(len(ANOMALIES))]
    assert blob["Throttles"] == [0.0]


def test_given_little_time_left_when_the_worker_runs_then_it_stops_with_a_cursor_and_totals(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deadline 3 s past the 60 s safety margin, one second per check
    seed(dynamo)
    capsys.readouterr()
    event = worker_event()
    invocations = 0
    while True:
        result = backfill_worker.handler(
            event, FakeLambdaContext(remaining_ms=63_000, step_ms=1000)
        )
        invocations += 1
        if result["cursor"] is None:
            break
        assert set(result["cursor"]) == {"PK", "SK"}
        event = worker_event(cursor=result["cursor"], totals=result)
    # Then the last result holds the whole segment's totals
    assert invocations > 3
    assert result["restamped"] == len(VALID)
    # and each invocation published only its own counts
    published = sum(blob["Restamped"][0] for blob in emf(capsys))
    assert published == len(VALID)


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"direction": "sideways"}, "direction"),
        ({"segment": 4, "totalSegments": 4}, "segment must be less than totalSegments (4)"),
        ({"segment": -1}, "segment"),
        ({"totalSegments": 0}, "totalSegments"),
        ({"totalSegments": 1001}, "totalSegments"),
        ({"maxWritesPerSecond": 0}, "maxWritesPerSecond"),
        ({"maxWritesPerSecond": "50"}, "maxWritesPerSecond"),
        ({"dryRun": "yes"}, "dryRun"),
        ({"shardCount": 12}, "power of two"),
        ({"cursor": {"PK": "RSAGA#x"}}, "cursor"),
        ({"cursor": {"PK": {"S": "RSAGA#x"}, "SK": {"N": "1"}}}, "cursor.SK"),
        ({"segmnet": 0}, "segmnet"),
    ],
)
def test_given_a_bad_worker_input_when_invoked_then_it_fails_naming_the_problem(
    dynamo: Backend, overrides: dict[str, Any], problem: str
) -> None:
    seed(dynamo, VALID[:2])
    before = dynamo.scan_all()
    with pytest.raises(ValidationError) as caught:
        backfill_worker.handler(worker_event(**overrides), FakeLambdaContext())
    assert problem in str(caught.value)
    assert dynamo.scan_all() == before


def test_given_a_shard_count_other_than_the_deployed_one_then_the_worker_refuses(
    dynamo: Backend,
) -> None:
    with pytest.raises(InvalidInputError, match="differs from the deployed shard count 16"):
        backfill_worker.handler(worker_event(shardCount=32), FakeLambdaContext())


@pytest.mark.parametrize(("direction", "phase"), [("forward", "legacy"), ("rollback", "migrating")])
def test_given_writers_in_a_phase_that_undoes_the_run_then_the_worker_refuses(
    dynamo: Backend, monkeypatch: pytest.MonkeyPatch, direction: str, phase: str
) -> None:
    monkeypatch.setenv("SAGA_INDEX_PHASE", phase)
    with pytest.raises(InvalidInputError, match="cdk deploy -c phase="):
        backfill_worker.handler(worker_event(direction=direction), FakeLambdaContext())


def test_given_a_run_when_planned_then_each_segment_gets_its_share_of_the_cap(
    dynamo: Backend,
) -> None:
    plan = backfill_plan.handler(
        {"direction": "forward", "totalSegments": 40, "maxWritesPerSecond": 80, "dryRun": True},
        FakeLambdaContext(),
    )
    assert plan["segments"] == list(range(40))
    # at most 16 segments run at once: each may write 80 / 16 per second
    assert plan["template"] == {
        "direction": "forward",
        "totalSegments": 40,
        "maxWritesPerSecond": 5.0,
        "dryRun": True,
        "shardCount": N,
        "anomalyKeyLimit": 10,  # 400 keys over 40 segments keeps the Map state small
    }
    assert plan["request"]["maxWritesPerSecond"] == 80


def test_given_a_plan_without_dry_run_then_it_is_refused(dynamo: Backend) -> None:
    with pytest.raises(ValidationError, match="dryRun"):
        backfill_plan.handler({"direction": "forward"}, FakeLambdaContext())


def test_given_an_unfinished_segment_when_verified_then_the_run_is_not_ok(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, VALID[:2])
    request = {"direction": "forward", "totalSegments": 2, "dryRun": False}
    done = {"segment": 0, "cursor": None, "restamped": 0}

    summary = backfill_verify.handler({"request": request, "segments": [done]}, FakeLambdaContext())

    assert summary["complete"] is False
    assert summary["verification"]["ok"] is False
    assert "segment(s) [1] did not finish" in summary["verification"]["message"]
    [blob] = emf(capsys)
    assert blob["UnexpectedSourceKeyRows"] == [2.0]
