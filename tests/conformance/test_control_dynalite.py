"""The control record on a real DynamoDB-compatible server (dynalite): the same contract as on
moto (transitions, compare-and-set, lease), and Node reading a record Python wrote.

Node (tests/node/check_control_record.mjs, AWS SDK for JavaScript v3) follows only
docs/control-contract.md; agreeing with saga_index.layout_change.record for every person of
docs/shard-vectors.json in every state checks the contract across languages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from saga_index.index.layout import Layout
from saga_index.index.names import CONTROL_PK
from saga_index.layout_change.record.items import STATE_SK
from saga_index.layout_change.record.routing import routing_for
from saga_index.layout_change.record.state import ControlState, Transition
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.transitions import executor
from tests.component.test_control_store import ControlContract
from tests.support.backends import Backend, make_backend
from tests.support.control_fixtures import Clock

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
NODE_READER = ROOT / "tests" / "node" / "check_control_record.mjs"
VECTORS = json.loads((ROOT / "docs" / "shard-vectors.json").read_text(encoding="utf-8"))
PERSONS = list(dict.fromkeys(v["personId"] for v in VECTORS["vectors"]))
AT = datetime(2026, 3, 1, tzinfo=UTC)


class TestControlOnDynalite(ControlContract):
    @pytest.fixture
    def dynamo(self, synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
        return make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)


# ---- Node reads what Python wrote ------------------------------------------------------------


def _through(store: ControlStore, *phases: str, shards: int = 16) -> None:
    clock = Clock()
    for phase in phases:
        executor.set_phase(
            store,
            phase,
            changed_by="conformance",
            reason=f"to {phase}",
            shard_count=shards if phase == "migrating" else None,
            force=True,
            clock=clock,
        )


def _resharding(store: ControlStore, source: int, target: int) -> None:
    """Issue 13's state, written directly: no transition reaches it yet."""
    store.restore(
        ControlState(
            transition=Transition(
                version=5,
                layout=Layout.sharded(source),
                moving_to=Layout.sharded(target),
                previous_layout=Layout.sharded(source),
                previous_moving_to=None,
                changed_at=AT,
                changed_by="conformance",
                reason="split",
                effective_at=AT + timedelta(seconds=75),
            )
        )
    )


def _delete_state(backend: Backend) -> None:
    backend.client.delete_item(
        TableName=backend.table_name,
        Key={"PK": {"S": CONTROL_PK}, "SK": {"S": STATE_SK}},
    )


def _missing_after(*phases: str) -> Callable[[ControlStore, Backend], None]:
    def scenario(store: ControlStore, backend: Backend) -> None:
        _through(store, *phases)
        _delete_state(backend)

    return scenario


SCENARIOS: dict[str, Callable[[ControlStore, Backend], None]] = {
    "never-migrated": lambda store, backend: None,
    "migrating-16": lambda store, backend: _through(store, "migrating"),
    "migrating-1": lambda store, backend: _through(store, "migrating", shards=1),
    "migrating-1024": lambda store, backend: _through(store, "migrating", shards=1024),
    "sharded-16": lambda store, backend: _through(store, "migrating", "sharded"),
    "rolling-back-16": lambda store, backend: _through(store, "migrating", "rolling-back"),
    "back-to-migrating": lambda store, backend: _through(
        store, "migrating", "sharded", "rolling-back", "migrating"
    ),
    "legacy-again": lambda store, backend: _through(store, "migrating", "rolling-back", "legacy"),
    "resharding-16-32": lambda store, backend: _resharding(store, 16, 32),
    "resharding-64-32": lambda store, backend: _resharding(store, 64, 32),
    "missing-after-sharded": _missing_after("migrating", "sharded"),
    "missing-after-rollback": _missing_after("migrating", "rolling-back", "legacy"),
}


def _node_reads(backend: Backend) -> dict[str, Any]:
    node = shutil.which("node")
    assert node, "node (>= 20) must be on PATH: it reads the record with the AWS SDK v3"
    assert backend.endpoint_url is not None
    result = subprocess.run(
        [node, str(NODE_READER), "--endpoint", backend.endpoint_url, "--table", backend.table_name],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "AWS_REGION": "us-east-1"},
    )
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_given_a_record_written_by_python_when_node_reads_it_then_both_route_alike(
    scenario: str, synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    store = ControlStore(backend.client, backend.table_name)
    SCENARIOS[scenario](store, backend)
    state = store.read()
    routing = routing_for(state)

    seen = _node_reads(backend)

    assert seen["condition"] == state.condition.value
    assert (seen["phase"], seen["version"]) == (state.phase.value, state.version)
    assert seen["layout"] == str(state.layout)
    assert seen["movingTo"] == (None if state.moving_to is None else str(state.moving_to))
    assert seen["routing"]["source"] == str(routing.source)
    assert seen["routing"]["target"] == str(routing.target)
    assert seen["routing"]["enumerationStages"] == [list(s) for s in routing.enumeration_stages()]
    python_persons = [
        {"personId": p, "writeKey": routing.write_key(p), "readKeys": list(routing.read_keys(p))}
        for p in PERSONS
    ]
    assert seen["routing"]["persons"] == python_persons


def test_given_a_state_item_that_breaks_the_contract_then_node_refuses_it(
    synthesized_template: dict[str, Any], dynalite_endpoint: str
) -> None:
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    _through(ControlStore(backend.client, backend.table_name), "migrating")
    backend.client.update_item(
        TableName=backend.table_name,
        Key={"PK": {"S": CONTROL_PK}, "SK": {"S": STATE_SK}},
        UpdateExpression="SET #phase = :p",
        ExpressionAttributeNames={"#phase": "phase"},
        ExpressionAttributeValues={":p": {"S": "sharded"}},
    )
    node = shutil.which("node")
    assert node
    assert backend.endpoint_url is not None

    result = subprocess.run(
        [node, str(NODE_READER), "--endpoint", backend.endpoint_url, "--table", backend.table_name],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert result.returncode == 1
    assert "phase sharded disagrees with its layouts (migrating)" in result.stderr
