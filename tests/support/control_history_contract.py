"""History first, as one contract run on moto (tests/component/test_control_history_store.py)
and on dynalite (tests/conformance/test_control_dynalite.py): the conditional writes that keep a
STATE item from ever existing without its history, evaluated by the engine itself.

A subclass provides `dynamo`. Failures are injected in botocore's before-call hook of the
store's own client, before a request reaches the table."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from saga_index.index.layout import LEGACY, Layout
from saga_index.layout_change.record.errors import VersionConflictError
from saga_index.layout_change.record.state import RecordCondition
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.transitions import executor
from saga_index.layout_change.transitions.errors import StateWriteFailedError
from saga_index.layout_change.transitions.restore import restore_state
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, set_phase
from tests.support.control_seed import delete_state, seed_state

S16 = Layout.sharded(16)


def fail_calls(client: Any, operation: str, match: Callable[[dict[str, Any]], bool]) -> list[int]:
    """Every matching call of `client` fails before it is sent, as a service failure (not a
    throttle or a conflict: the control writes retry those); the list counts."""
    failed: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if match(json.loads(params.get("body") or b"{}")):
            failed.append(1)
            raise ClientError({"Error": {"Code": "InternalServerError"}}, operation)

    client.meta.events.register(f"before-call.dynamodb.{operation}", hook)
    return failed


def settles(body: dict[str, Any]) -> bool:
    return body.get("Item", {}).get("applied") == {"BOOL": True}


def to_state(body: dict[str, Any]) -> bool:
    return body.get("Key", {}).get("SK") == {"S": "STATE"}


class HistoryContract:
    @pytest.fixture
    def store(self, dynamo: Backend) -> ControlStore:
        return ControlStore(dynamo.client, dynamo.table_name)

    @pytest.fixture
    def failing_store(self, dynamo: Backend) -> ControlStore:
        """A store on a client of its own, whose calls the test can make fail."""
        return ControlStore(dynamo.new_client(max_attempts=1), dynamo.table_name)

    def _sharded(self, dynamo: Backend) -> None:
        seed_state(dynamo.client, dynamo.table_name, S16, version=2, previous=(LEGACY, S16))

    def _reshard(self, store: ControlStore, reason: str = "split") -> executor.PhaseChange:
        return set_phase(
            store, "resharding", changed_by="ops", reason=reason, shard_count=32, clock=Clock()
        )

    def test_the_history_intent_is_written_before_the_state_and_settled_after(
        self, store: ControlStore, dynamo: Backend, failing_store: ControlStore
    ) -> None:
        # Given the STATE write failing, the intent it follows is already there
        self._sharded(dynamo)
        failed = fail_calls(failing_store.client, "UpdateItem", to_state)
        with pytest.raises(StateWriteFailedError, match="NOT applied"):
            self._reshard(failing_store)
        assert failed
        entry = store.history_entry(3)
        assert entry is not None
        assert (entry.applied, entry.abandoned) == (False, True)
        assert store.read().version == 2
        # And a change that lands settles its own intent: applied
        change = self._reshard(store, "again")
        assert (change.history_written, change.warnings) == (True, ())
        settled = store.history_entry(3)
        assert settled is not None
        assert settled.applied
        assert settled.transition.reason == "again"

    def test_an_applied_history_item_is_never_overwritten(
        self, store: ControlStore, dynamo: Backend
    ) -> None:
        self._sharded(dynamo)
        change = self._reshard(store)
        other = replace(change.transition, reason="someone else")
        assert store.settle_history(other) is False
        entry = store.history_entry(3)
        assert entry is not None
        assert entry.transition.reason == "split"
        assert store.put_intent(other) is False

    def test_a_failed_settle_reports_the_move_applied_and_a_lost_state_follows_it(
        self, store: ControlStore, dynamo: Backend, failing_store: ControlStore
    ) -> None:
        self._sharded(dynamo)
        fail_calls(failing_store.client, "PutItem", settles)
        change = self._reshard(failing_store)
        assert change.transition.version == 3
        assert change.history_written is False
        assert "unconfirmed intent" in change.warnings[0]
        delete_state(dynamo.client, dynamo.table_name)
        missing = store.read()
        assert (missing.condition, missing.version) == (RecordCondition.MISSING, 3)
        restored = restore_state(store)
        assert (restored.source, restored.state.version) == ("history", 3)
        assert str(restored.state.moving_to) == "sharded(32)"

    def test_a_lost_race_leaves_the_winners_transition_in_the_slot(
        self, store: ControlStore, dynamo: Backend, failing_store: ControlStore
    ) -> None:
        self._sharded(dynamo)

        def rival(**_: Any) -> None:
            # Once, after this writer's intent and before its STATE write.
            failing_store.client.meta.events.unregister("before-call.dynamodb.UpdateItem", rival)
            set_phase(store, "rolling-back", changed_by="rival", reason="abort")

        failing_store.client.meta.events.register("before-call.dynamodb.UpdateItem", rival)
        with pytest.raises(VersionConflictError, match="to version 3"):
            self._reshard(failing_store)
        entry = store.history_entry(3)
        assert entry is not None
        assert entry.applied
        assert entry.transition.changed_by == "rival"
