"""The drift guard's read across runs, on moto: a read of the index that does not fit one run
resumes from the cursor item, each run before the last says "incomplete, N % read" and no
verdict, and the run that reaches every key's end publishes it. The pace is the handler's own
(one read unit per second per key: DRIFT_KEY_READ_UNITS 129 less a page's 128 banked; moto
charges 1 unit a page) on a fake clock, one row a page."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from moto import mock_aws

from handlers import drift_guard
from handlers.drift_guard import handler
from saga_index.index import keys, names
from saga_index.index.layout import Layout
from saga_index.layout_change.checks.drift import CursorStore, DriftChecker, cursor_layout
from saga_index.layout_change.checks.drift._cursor import CURSOR_KEY
from saga_index.layout_change.record.routing import resolve_routing
from saga_index.store.dynamo import serialize
from tests.support.backends import Backend, make_backend
from tests.support.control_seed import seed_state
from tests.support.lambda_harness import FakeLambdaContext, as_function, emf_datapoints

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

N = 16
SERVICE = "drift-guard"
LEGACY_ROWS = 60  # a COUNT and a judged read of 61 pages each, 16 shard pages: 138 units
RUN_BUDGET_MS = 66_000  # the handler keeps 20 s: 46 s of reads, 46 pages on one key
WHOLE_READ_MS = 2_000_000
SCHEDULED = "2026-07-10T10:05:00Z"  # a run that does not scan


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def dynamo(
    synthesized_template: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("cursor", synthesized_template, endpoint_url=None)
        seed_state(backend.client, backend.table_name, Layout.sharded(N))
        for name, value in {
            "SAGA_TABLE_NAME": backend.table_name,
            "SAGA_INDEX_NAME": names.INDEX_NAME,
            "SAGA_INDEX_MAX_ATTEMPTS": "2",
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": "RenewalSagaIndex",
            "DRIFT_SCAN_EVERY": "12",
            "DRIFT_GUARD_PERIOD_MINUTES": "5",
            names.ENV_DRIFT_KEY_READ_UNITS: "129",
        }.items():
            monkeypatch.setenv(name, value)
        clock = FakeClock()
        monkeypatch.setattr(
            drift_guard, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=clock.sleep)
        )
        monkeypatch.setattr(
            drift_guard, "DriftChecker", functools.partial(DriftChecker, page_size=1)
        )
        with as_function(monkeypatch, SERVICE):
            yield backend


def plant_legacy_rows(dynamo: Backend) -> None:
    for n in range(LEGACY_ROWS):
        person = f"p-{n:04d}"
        dynamo.client.put_item(
            TableName=dynamo.table_name,
            Item=serialize(
                {
                    **keys.saga_table_key(f"s-{n:04d}"),
                    "sagaId": f"s-{n:04d}",
                    "personId": person,
                    "GSI4PK": keys.LEGACY_GSI4PK,
                    "GSI4SK": keys.gsi4sk(person, "2026-01-01T00:00:00Z"),
                }
            ),
        )


def run(capsys: pytest.CaptureFixture[str], remaining_ms: int) -> tuple[dict[str, Any], dict]:
    payload = {"job": "drift-guard", "scheduledTime": SCHEDULED, "executionId": "e", "attempt": 1}
    result = handler(payload, FakeLambdaContext(function_name=SERVICE, remaining_ms=remaining_ms))
    points = emf_datapoints(capsys.readouterr().out)
    return result, {p.name: p.value for p in points if p.name != "RowsPerShard"}


def saga_rows(dynamo: Backend) -> list[dict[str, Any]]:
    items = dynamo.client.scan(TableName=dynamo.table_name)["Items"]
    return sorted(
        (i for i in items if i["PK"]["S"].startswith(keys.SAGA_PK_PREFIX)),
        key=lambda i: i["PK"]["S"],
    )


def test_a_read_that_needs_three_runs_completes_in_three_and_says_incomplete_before(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given rows left on the legacy key in sharded(16), read once whole (the measure of "% read")
    plant_legacy_rows(dynamo)
    whole, first = run(capsys, WHOLE_READ_MS)
    assert whole["complete"] is True
    assert first["UnexpectedLegacyRows"] == LEGACY_ROWS
    assert first["DriftReadIncomplete"] == 0
    # When the guard runs with a third of the read's time per run
    one, after_one = run(capsys, RUN_BUDGET_MS)
    two, after_two = run(capsys, RUN_BUDGET_MS)
    three, after_three = run(capsys, RUN_BUDGET_MS)
    # Then the first two runs say incomplete with how much is read, and publish no verdict
    assert (one["complete"], two["complete"]) == (False, False)
    assert 30 <= one["percentRead"] <= 37
    assert 63 <= two["percentRead"] <= 70
    for metrics, percent in ((after_one, one["percentRead"]), (after_two, two["percentRead"])):
        assert metrics["DriftReadIncomplete"] == 1
        assert metrics["DriftReadPercent"] == pytest.approx(percent, abs=0.1)
        assert "UnexpectedLegacyRows" not in metrics
        assert "LegacyRows" not in metrics
    # And the third completes the read and publishes the verdict, counted exactly across runs
    assert three["complete"] is True
    assert three["unexpectedLegacyRows"] == LEGACY_ROWS
    assert after_three["UnexpectedLegacyRows"] == LEGACY_ROWS
    assert after_three["LegacyRows"] == LEGACY_ROWS
    assert after_three["DriftReadIncomplete"] == 0
    assert after_three["DriftReadPercent"] == 100


def test_a_first_read_that_does_not_fit_says_incomplete_with_no_percent(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_legacy_rows(dynamo)
    result, metrics = run(capsys, RUN_BUDGET_MS)
    assert result == {"complete": False, "percentRead": None}
    assert metrics == {"DriftReadIncomplete": 1}


def test_a_cursor_item_that_does_not_parse_is_discarded_and_the_read_starts_over(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a cursor item whose progress is not JSON, claiming the read under this state
    plant_legacy_rows(dynamo)
    routing = resolve_routing(None, "sharded", N)
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item={
            **CURSOR_KEY,
            "entityType": {"S": "RenewalSagaIndexDriftCursor"},
            "format": {"N": "1"},
            "recordVersion": {"N": "1"},
            "layout": {"S": cursor_layout(routing)},
            "progress": {"S": "{not json"},
        },
    )
    before = saga_rows(dynamo)
    # When the guard runs
    result, metrics = run(capsys, WHOLE_READ_MS)
    # Then it says so, reads everything from the start, and writes nothing to the saga rows
    assert "does not parse" in caplog.text
    assert "progress is not JSON" in caplog.text
    assert result["complete"] is True
    assert metrics["UnexpectedLegacyRows"] == LEGACY_ROWS
    assert saga_rows(dynamo) == before
    # And the item it leaves parses again, with no read in progress
    item = dynamo.client.get_item(TableName=dynamo.table_name, Key=CURSOR_KEY)["Item"]
    assert json.loads(item["progress"]["S"]) == {}


def test_a_cursor_taken_under_another_record_version_is_discarded_saying_so(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Given a read stopped part-way under version 1
    plant_legacy_rows(dynamo)
    stopped, _ = run(capsys, RUN_BUDGET_MS)
    assert stopped["complete"] is False
    layout = cursor_layout(resolve_routing(None, "sharded", N))
    store = CursorStore(dynamo.client, dynamo.table_name)
    assert store.resume(1, layout).reads
    # When the record is at version 2 (or names another layout)
    fresh = store.resume(2, layout)
    other = store.resume(1, cursor_layout(resolve_routing(None, "legacy", N)))
    # Then the read starts over, and the log says why
    assert fresh.reads == {}
    assert other.reads == {}
    assert "taken under record version 1" in caplog.text
