"""What the control-record tests (the store contract, `phase`, `status`, the open index) share:
the injected wall clock, so nothing waits for effectiveAt or a lease's TTL, and a fresh moto
table with its control store, as fixtures."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto import mock_aws

from saga_index.layout_change.checks.layout_probe import RowsSeen, probe_keys
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token, release_lease
from saga_index.layout_change.record import Phase
from saga_index.layout_change.record.state import BackfillCompletion, BackfillDirection
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import DEFAULT_TIMING, ControlTiming, WallClock, utc_now
from saga_index.layout_change.transitions import PhaseChange, executor
from saga_index.layout_change.transitions.rules import Precondition
from tests.support.backends import Backend, make_backend

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def probe_64_shard_keys(client: Any, table_name: str) -> RowsSeen:
    """The first `phase set`'s shard-key probe over the keys of every layout up to sharded(64)
    (64 Queries, not 1,024): for the CLI tests whose tables hold no row past them. The probe's
    own tests (test_phase_record_safety.py, and the full count in test_phase_cli.py) keep
    CliHooks' default, every key."""
    return probe_keys(client, table_name, include_legacy=False, to_shard=64)


def set_phase(
    store: ControlStore,
    requested: Phase | str,
    *,
    changed_by: str,
    reason: str,
    shard_count: int | None = None,
    force: bool = False,
    checks: Sequence[Precondition] = (),
    guards: Sequence[Precondition] = (),
    clock: WallClock = utc_now,
    timing: ControlTiming = DEFAULT_TIMING,
) -> PhaseChange:
    """The executor's write of a move with the preconditions a TEST names in place of the ones
    `change_phase` chooses: for the tests of the write protocol (intent, compare-and-set, settle,
    races) and of setups that plant a record. No product code can do this: `change_phase` is
    the only public way a move is written (tests/component/test_phase_entry_points.py)."""
    return executor._set_phase(
        store,
        requested,
        changed_by=changed_by,
        reason=reason,
        shard_count=shard_count,
        force=force,
        requirements=lambda _state, _move: (checks, guards),
        clock=clock,
        timing=timing,
    )


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@contextmanager
def moto_backend(name: str, template: dict[str, Any]) -> Iterator[Backend]:
    """A fresh table from the synthesised template, inside moto for the duration."""
    with mock_aws():
        yield make_backend(name, template, endpoint_url=None)


def moto_fixtures(
    name: str, prepare: Callable[[Backend], None] | None = None
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """The fixtures `dynamo` (a fresh moto table `name`, `prepare`d), `clock` and `store` (the
    table's control store), for a module to bind: `dynamo, clock, store = moto_fixtures(...)`."""

    @pytest.fixture
    def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
        with moto_backend(name, synthesized_template) as backend:
            if prepare is not None:
                prepare(backend)
            yield backend

    @pytest.fixture
    def clock() -> Clock:
        return Clock()

    @pytest.fixture
    def store(dynamo: Backend) -> ControlStore:
        return ControlStore(dynamo.client, dynamo.table_name)

    return dynamo, clock, store


def record_early_backfill(store: ControlStore, clock: Clock) -> None:
    """A verified forward backfill 1 s after effectiveAt: the switch has not settled yet."""
    state = store.read()
    assert state.effective_at is not None
    clock.now = state.effective_at + timedelta(seconds=1)
    token = new_lease_token()
    grant = acquire_lease(store, holder="test-run", token=token, direction="forward", clock=clock)
    completion = BackfillCompletion(
        direction=BackfillDirection.FORWARD,
        source=grant.source,
        target=grant.target,
        state_version=state.version,
        started_at=clock.now,
        completed_at=clock.now + timedelta(seconds=0.5),
        scanned=0,
        restamped=0,
        anomalies=0,
        complete=True,
        verified=True,
        holder="test-run",
        lease_token=token,
    )
    clock.advance(0.5)
    release_lease(store, token=token, completion=completion, clock=clock)
