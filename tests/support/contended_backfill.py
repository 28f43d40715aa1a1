"""A local backfill on moto under DynamoDB's conflict rules and per-key ceilings
(devkit.semantics), with an operator pausing, resuming and throttling it while it runs.

The fence the run uses is a parameter (`FenceVariant`):
  PRODUCT_FENCE       whatever backfill_locally builds (layout_change.backfill.fence)
  SHARED_STATE_FENCE  every re-stamp a TransactWriteItems of [ConditionCheck on the ONE control
                      STATE item, the row's Update]: the design that makes STATE a hot item,
                      kept here as a known-bad variant so the scenario keeps showing what the
                      layer catches after the product's fence changes
A new fence is run through the same scenario by passing PRODUCT_FENCE (or a variant of its own).

Every client of the scenario (the run's re-stamps, its heartbeats, the operator's commands) is
put under ONE model; the outcome counts what each of them saw.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from botocore.exceptions import BotoCoreError, ClientError

from devkit.capacity.table_schema import TableSchema
from devkit.semantics.hooks import SemanticsHooks
from devkit.semantics.model import DEFAULT_IN_FLIGHT_SECONDS, DynamoSemantics
from saga_index.index import keys
from saga_index.index.errors import SagaIndexError
from saga_index.index.names import CONTROL_PK
from saga_index.layout_change.backfill import local as local_backfill
from saga_index.layout_change.backfill.fence import LEASE_STILL_OURS, LeaseFence, fence_for_run
from saga_index.layout_change.backfill.local import LocalBackfill, backfill_locally
from saga_index.layout_change.lease.controls import pause_backfill, resume_backfill, set_throttle
from saga_index.layout_change.record.items import (
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    VERSION,
    state_key,
)
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.store.dynamo.client import error_code
from saga_index.store.dynamo.codec import serialize
from tests.support.backends import Backend
from tests.support.backfill_contract import Clock, plant, request


class SharedStateFence(LeaseFence):
    """The fence whose every re-stamp ConditionChecks the ONE control STATE item."""

    def _transaction(self, update: Any) -> dict[str, Any]:
        row = {k: v for k, v in update.items() if k != "ReturnValues"}
        names = {f"#{a}": a for a in (LEASE_TOKEN, VERSION, LEASE_STATE_VERSION, LEASE_EXPIRES_AT)}
        check = {
            "TableName": self.table_name,
            "Key": serialize(state_key()),
            "ConditionExpression": LEASE_STILL_OURS,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {
                ":fenceToken": {"S": self.token},
                ":fenceVersion": {"N": str(self.state_version)},
                ":fenceNow": {"S": format_time(self.clock())},
            },
        }
        return {"TransactItems": [{"ConditionCheck": check}, {"Update": row}]}


@dataclass(frozen=True)
class FenceVariant:
    """Which fence a scenario's run uses: `install` makes backfill_locally build it."""

    name: str
    install: Callable[[], contextlib.AbstractContextManager[object]]


def _shared_state_fence(*args: Any, **kwargs: Any) -> LeaseFence:
    built = fence_for_run(*args, **kwargs)
    fence = SharedStateFence(
        built.client,
        built.table_name,
        token=built.token,
        state_version=built.state_version,
        max_heartbeat_age=built.max_heartbeat_age,
        transactional=kwargs.get("transactional", True),
        clock=built.clock,
        monotonic=built.monotonic,
        sleep=built.sleep,
    )
    fence.partition_cap = built.partition_cap
    return fence


PRODUCT_FENCE = FenceVariant("product", contextlib.nullcontext)
SHARED_STATE_FENCE = FenceVariant(
    "shared-state",
    lambda: mock.patch.object(local_backfill, "fence_for_run", _shared_state_fence),
)


@dataclass
class Tally:
    """What one client's writes of the control STATE item came to: "ok" or the error code."""

    outcomes: Counter[str] = field(default_factory=Counter)

    def watch(self, client: Any) -> Any:
        def after(http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
            if context.get("contended.state"):
                status = getattr(http_response, "status_code", 200)
                code = (parsed.get("Error") or {}).get("Code") if status >= 300 else None
                self.outcomes[code or "ok"] += 1

        def mark(params: Any, context: dict[str, Any], **_: Any) -> None:
            context["contended.state"] = params.get("Key", {}).get("PK", {}).get("S") == CONTROL_PK

        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", mark)
        client.meta.events.register("after-call.dynamodb.UpdateItem", after)
        return client

    @property
    def ok(self) -> int:
        return self.outcomes["ok"]

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())


@dataclass
class Contended:
    run: LocalBackfill
    semantics: DynamoSemantics
    heartbeats: Tally
    operator: Tally
    operator_failures: list[str]
    rows: int
    left_on_legacy: int

    @property
    def stopped_segments(self) -> dict[int, str]:
        return self.run.run.failures


def seed_rows(dynamo: Backend, rows: int) -> None:
    for n in range(rows):
        dynamo.put_saga(f"c{n:04}", f"person-{n % 97}")


def on_legacy(dynamo: Backend) -> int:
    return sum(
        1
        for raw in dynamo.scan_all()
        if raw.get("entityType", {}).get("S") == keys.ENTITY_TYPE
        and raw.get("GSI4PK", {}).get("S") == keys.LEGACY_GSI4PK
    )


def _operator_loop(
    store: ControlStore, stop: threading.Event, failures: list[str], every: float
) -> None:
    """The operator's commands while the run runs, one every `every` seconds: mostly
    `backfill throttle` (it changes nothing the run does), now and then a short `pause` and its
    `resume`."""
    commands: list[Callable[[], object]] = [
        lambda: set_throttle(store, 1000, changed_by="ops", reason="keep the cap"),
        lambda: set_throttle(store, 1000, changed_by="ops", reason="keep the cap"),
        lambda: pause_backfill(store, changed_by="ops", reason="peak"),
        lambda: resume_backfill(store, changed_by="ops", reason="off-peak"),
    ]
    turn = 0
    while not stop.wait(every):
        try:
            commands[turn % len(commands)]()
        except (ClientError, BotoCoreError, SagaIndexError) as err:
            code = error_code(err) if isinstance(err, ClientError) else type(err).__name__
            failures.append(code)
        turn += 1
    # Whatever the last command was, the run is left resumed.
    with contextlib.suppress(ClientError, BotoCoreError, SagaIndexError):
        resume_backfill(store, changed_by="ops", reason="done")


def run_contended_backfill(
    dynamo: Backend,
    *,
    fence: FenceVariant,
    rows: int = 300,
    segments: int = 8,
    rate: float = 1000.0,
    in_flight: float = DEFAULT_IN_FLIGHT_SECONDS,
    poll_seconds: float = 0.05,
    operator_every: float = 0.03,
    schema: TableSchema,
) -> Contended:
    """Seed `rows` legacy sagas, plant `migrating`, and run a forward backfill of `segments`
    segments at `rate` writes/s under the semantics layer while an operator pauses, resumes and
    throttles it."""
    seed_rows(dynamo, rows)
    plant(dynamo, "migrating")
    semantics = DynamoSemantics(dynamo.table_name, clock=time.monotonic, in_flight=in_flight)
    hooks = SemanticsHooks(semantics, schema, reader=dynamo.new_client())
    heartbeats, operator = Tally(), Tally()
    run_client = hooks.attach(dynamo.new_client())
    keeper_client = heartbeats.watch(hooks.attach(dynamo.new_client()))
    operator_client = operator.watch(hooks.attach(dynamo.new_client()))
    stop_operator = threading.Event()
    failures: list[str] = []
    ops = threading.Thread(
        target=_operator_loop,
        args=(
            ControlStore(operator_client, dynamo.table_name),
            stop_operator,
            failures,
            operator_every,
        ),
        name="contended-operator",
    )
    with fence.install():
        ops.start()
        try:
            outcome = backfill_locally(
                run_client,
                dynamo.table_name,
                request(segments=segments, rate=rate),
                holder="contended@host/1",
                store=ControlStore(keeper_client, dynamo.table_name),
                clock=Clock(),
                poll_seconds=poll_seconds,
            )
        finally:
            stop_operator.set()
            ops.join(timeout=30)
    return Contended(
        run=outcome,
        semantics=semantics,
        heartbeats=heartbeats,
        operator=operator,
        operator_failures=failures,
        rows=rows,
        left_on_legacy=on_legacy(dynamo),
    )


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    box: list[float] = []
    started = time.perf_counter()
    yield box
    box.append(time.perf_counter() - started)
