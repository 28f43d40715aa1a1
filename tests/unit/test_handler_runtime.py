"""The handlers' runtime: one control-record provider per execution environment, and settings
that carry no migration state."""

from __future__ import annotations

from typing import Any

import pytest

from handlers import runtime
from handlers.settings import HandlerSettings
from saga_index.index.layout import LEGACY
from saga_index.layout_change.record.provider import ControlProvider
from saga_index.layout_change.record.routing import Routing
from saga_index.layout_change.record.state import ControlState


class FakeStore:
    def __init__(self) -> None:
        self.reads = 0

    def read(self) -> ControlState:
        self.reads += 1
        return ControlState.never_migrated()


@pytest.fixture(autouse=True)
def fresh_runtime() -> Any:
    runtime.control.use()
    yield
    runtime.control.use()


def test_one_provider_serves_every_invocation_of_an_environment() -> None:
    client = object()
    first = runtime.control.provider(client, "sagas")  # type: ignore[arg-type]
    assert runtime.control.provider(client, "sagas") is first  # type: ignore[arg-type]
    assert first.store.table_name == "sagas"  # type: ignore[attr-defined]


def test_another_client_or_table_gets_its_own_provider() -> None:
    client = object()
    first = runtime.control.provider(client, "sagas")  # type: ignore[arg-type]
    assert runtime.control.provider(object(), "sagas") is not first  # type: ignore[arg-type]
    assert runtime.control.provider(client, "other") is not first  # type: ignore[arg-type]


def test_a_provider_handed_in_is_used_until_dropped() -> None:
    store = FakeStore()
    pinned = ControlProvider(store, clock=lambda: 0.0)
    runtime.control.use(pinned)
    assert runtime.control.provider(object(), "sagas") is pinned  # type: ignore[arg-type]
    assert pinned.routing() == Routing.between(LEGACY)
    assert pinned.routing() == Routing.between(LEGACY)
    assert store.reads == 1  # cached for T: not one read per request
    runtime.control.use()
    assert runtime.control.provider(object(), "sagas") is not pinned  # type: ignore[arg-type]


def test_settings_read_no_phase_and_no_shard_count_from_the_environment() -> None:
    settings = HandlerSettings.from_env(
        {"SAGA_TABLE_NAME": "sagas", "SAGA_INDEX_PHASE": "sharded", "SAGA_INDEX_SHARDS": "32"}
    )
    assert not {"phase", "shard_count"} & set(HandlerSettings.model_fields)
    repository = settings.repository(object(), Routing.between(LEGACY))
    assert repository.plan == Routing.between(LEGACY)
