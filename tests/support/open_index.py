"""What the open-saga index's tests share: the index on a test table (added as the owning stack
or the AWS CLI command adds it, when the synthesised template does not have it yet), readiness
verdicts standing for DescribeTable's, an unleased open-index run, and the fixtures of a moto
table with the index, its control store and an injected clock, with the open index's moves on
them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from saga_index.index import Layout, names
from saga_index.layout_change.backfill import (
    BackfillRequest,
    Move,
    RunTicket,
    run_backfill,
)
from saga_index.layout_change.backfill.local import LocalRun
from saga_index.layout_change.backfill.wire import UNLEASED_TOKEN
from saga_index.layout_change.record import (
    BackfillDirection,
    BackfillKind,
    ControlStore,
    format_time,
    utc_now,
)
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index.layout_change.transitions import CompletionCheckOptions, change_open_index
from tests.support.control_fixtures import Clock, moto_fixtures, probe_64_shard_keys


@dataclass(frozen=True)
class Verdict:
    """A readiness verdict as saga_index.store's open_index_readiness gives one."""

    ready: bool
    exists: bool
    problem: str | None
    index_status: str | None = "ACTIVE"
    backfilling: bool | None = False
    keys_as_expected: bool | None = True
    projection_as_expected: bool | None = True


READY = Verdict(True, True, None)
MISSING = Verdict(
    False,
    False,
    f"the table has no index {names.OPEN_INDEX_NAME}: add it (docs/deploy.md)",
    index_status=None,
    backfilling=None,
    keys_as_expected=None,
    projection_as_expected=None,
)
BUILDING = Verdict(
    False,
    True,
    f"{names.OPEN_INDEX_NAME} is CREATING (Backfilling): wait until it is ACTIVE",
    index_status="CREATING",
    backfilling=True,
)
MISBUILT = Verdict(
    False,
    True,
    f"{names.OPEN_INDEX_NAME} projects KEYS_ONLY: delete it and add it again",
    projection_as_expected=False,
)


def readiness_of(verdict: Verdict) -> Any:
    """A readiness callable that answers `verdict` and counts its calls."""
    calls: list[str] = []

    def readiness(_client: Any, table_name: str) -> Verdict:
        calls.append(table_name)
        return verdict

    readiness.calls = calls  # type: ignore[attr-defined]
    return readiness


def add_open_index(client: Any, table_name: str) -> None:
    """Add the open index to the table unless it has it (moto builds it ACTIVE at once)."""
    table = client.describe_table(TableName=table_name)["Table"]
    indexes = table.get("GlobalSecondaryIndexes", [])
    if any(i["IndexName"] == names.OPEN_INDEX_NAME for i in indexes):
        return
    client.update_table(
        TableName=table_name,
        AttributeDefinitions=[
            {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": names.OPEN_INDEX_SORT_KEY, "AttributeType": "S"},
        ],
        GlobalSecondaryIndexUpdates=[
            {
                "Create": {
                    "IndexName": names.OPEN_INDEX_NAME,
                    "KeySchema": [
                        {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "KeyType": "HASH"},
                        {"AttributeName": names.OPEN_INDEX_SORT_KEY, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            }
        ],
    )


def drop_open_index(client: Any, table_name: str) -> None:
    """Delete the open index from the table (a table whose owner has not added it yet)."""
    client.update_table(
        TableName=table_name,
        GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": names.OPEN_INDEX_NAME}}],
    )


def open_ticket(direction: str, shard_count: int = 16) -> RunTicket:
    """An unleased ticket of an open-index run (outside any control record: the lease and the
    record are tested in tests/component/test_open_index_backfill.py), N = `shard_count`."""
    return RunTicket.of(
        Move(BackfillDirection(direction), Layout.legacy(), Layout.legacy()),
        state_version=0,
        holder="contract",
        lease_token=UNLEASED_TOKEN,
        started_at=format_time(utc_now()),
        open_shard_count=shard_count,
    )


def open_backfill(client: Any, table_name: str, direction: str, *, segments: int = 2) -> LocalRun:
    """An unleased open-index run of every segment in this process (backfill.run_backfill, the
    worker's code), `direction` forward (stamp) or rollback (remove): its LocalRun."""
    request = BackfillRequest(
        direction=BackfillDirection(direction),
        kind=BackfillKind.OPEN_INDEX,
        total_segments=segments,
        max_writes_per_second=1000,
        dry_run=False,
    )
    return run_backfill(client, table_name, request, run=open_ticket(direction))


# The completing moves' checks without the re-check's wait, at a rate moto answers at once.
OPTIONS = CompletionCheckOptions(recheck_delay_seconds=0, scan_rate=10_000, segments=2)


def open_index_fixtures(
    name: str,
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """control_fixtures.moto_fixtures of a table with the open index: `dynamo, clock, store`."""
    return moto_fixtures(name, lambda backend: add_open_index(backend.client, backend.table_name))


class Moves:
    """`open-index set` as the tests make it: the index READY unless `readiness` says
    otherwise, the checks' waits skipped, the first move's probe over 64 shard keys, `clock`."""

    def __init__(self, store: ControlStore, clock: Clock) -> None:
        self.store, self.clock = store, clock

    def __call__(self, to: str, *, readiness: Any = None, settle: bool = False, **kw: Any) -> Any:
        """The move to `to` (`settle`: then the clock past its settled switch)."""
        change = change_open_index(
            self.store,
            to,
            changed_by="tester@host",
            reason=f"to {to}",
            readiness=readiness or readiness_of(READY),
            options=OPTIONS,
            probe=probe_64_shard_keys,
            sleep=lambda _s: None,
            clock=self.clock,
            **kw,
        )
        if settle:
            self.settle()
        return change

    def settle(self) -> None:
        """Past the state's effectiveAt plus the in-flight margin."""
        effective = self.store.read().effective_at
        assert effective is not None
        self.clock.now = effective + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS + 1)
