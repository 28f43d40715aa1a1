"""A local backfill under the semantics layer with an operator at work, and the fences it may
run with: what tests/component and bench/fence.py both drive.

The fence the run uses is a parameter (`FenceVariant`), handed to backfill_locally as it is:
  UNFENCED            the clock fence only (`transactional_fence=False`): plain UpdateItems
  PRODUCT_FENCE       whatever backfill_locally builds (layout_change.backfill.fence)
  SHARED_STATE_FENCE  every re-stamp a TransactWriteItems of [ConditionCheck on the ONE control
                      STATE item, the row's Update]: the design that makes STATE a hot item,
                      kept here as a known-bad variant so it stays measurable after the
                      product's fence changes (its check, SharedStateCheck, is a FenceCheck
                      passed in as `fence_check`)
Every client of the run (its re-stamps, its heartbeats, the operator's commands) is put under
ONE model: in this process (`semantics`: botocore hooks on each client), or by the server the
clients talk to (`semantics=None`, `server_stats`: the semantics proxy of devkit.engine, which
judges every client at HTTP level). The outcome counts what each of them saw and, in this
process only, what the re-stamps consumed. `time_scale` (devkit.semantics.dilation) runs the
run's clocks (wall, monotonic) and waits (pacing, heartbeats, the fence's backoffs, the
operator's turns) in engine seconds, as a dilated engine judges them; `poll_seconds` and
`operator_every` are engine seconds then.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from devkit.capacity.pricing import Charge
from devkit.capacity.table_schema import TableSchema
from devkit.semantics.dilation import REAL_TIME, TimeScale
from devkit.semantics.hooks import SemanticsHooks
from devkit.semantics.model import DynamoSemantics, Stats
from saga_index.index import CONTROL_PK, FENCE_PK_PREFIX, SagaIndexError
from saga_index.layout_change.backfill import (
    BackfillRequest,
    FenceCheck,
    LeaseFence,
    LocalBackfill,
    SegmentCounts,
    backfill_locally,
    paced_rules,
)
from saga_index.layout_change.lease import pause_backfill, resume_backfill, set_throttle
from saga_index.layout_change.record import (
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    VERSION,
    BackfillDirection,
    ControlStore,
    WallClock,
    format_time,
    state_key,
    utc_now,
)
from saga_index.store.dynamo import error_code, serialize

# The lease as the shared-state fence checked it on STATE at write time: the run's token, under
# the version it was taken under, not yet expired by the writer's clock.
LEASE_STILL_OURS = (
    f"#{LEASE_TOKEN} = :fenceToken AND #{VERSION} = :fenceVersion "
    f"AND #{LEASE_STATE_VERSION} = :fenceVersion AND #{LEASE_EXPIRES_AT} > :fenceNow"
)

# What a contended run measures is the fence at the run's cap: it starts at it (a backfill's
# rise from its start to its cap is bench.pacing's).
AT_THE_CAP = paced_rules(start_fraction=1.0)


class SharedStateCheck(FenceCheck):
    """Every re-stamp ConditionChecks the ONE control STATE item."""

    def condition_check(self, fence: LeaseFence, slot: int) -> dict[str, Any]:
        names = {f"#{a}": a for a in (LEASE_TOKEN, VERSION, LEASE_STATE_VERSION, LEASE_EXPIRES_AT)}
        return {
            "TableName": fence.table_name,
            "Key": serialize(state_key()),
            "ConditionExpression": LEASE_STILL_OURS,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {
                ":fenceToken": {"S": fence.token},
                ":fenceVersion": {"N": str(fence.state_version)},
                ":fenceNow": {"S": format_time(fence.clock())},
            },
        }


@dataclass(frozen=True)
class FenceVariant:
    """Which fence a scenario's run uses: what backfill_locally is told to build."""

    name: str
    check: FenceCheck | None = None  # None: the product's own (the segment's fence slot)
    transactional: bool = True  # False: the run's clock fence only


PRODUCT_FENCE = FenceVariant("product")
UNFENCED = FenceVariant("unfenced", transactional=False)
SHARED_STATE_FENCE = FenceVariant("shared-state", SharedStateCheck())


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
    # What the model refused and admitted: this process's, or the server's.
    stats: Stats
    heartbeats: Tally
    operator: Tally
    operator_failures: list[str]
    # "rows", "index", "control", "slots" (the fence slots): what the run's own writes consumed
    # (empty when the server applies the model: it prices them there)
    restamp_wcu: dict[str, float]
    seconds: float

    @property
    def stopped_segments(self) -> dict[int, str]:
        return self.run.run.failures


@dataclass
class _RunCharges:
    """What the run's own requests consumed (its re-stamps and scans), by kind of partition."""

    table_name: str
    wcu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, operation: str, charges: list[Charge]) -> None:
        with self.lock:
            for charge in charges:
                if not charge.wcu:
                    continue
                if charge.target != self.table_name:
                    self.wcu["index"] += charge.wcu
                elif charge.partition_key == CONTROL_PK:
                    self.wcu["control"] += charge.wcu
                elif str(charge.partition_key).startswith(FENCE_PK_PREFIX):
                    self.wcu["slots"] += charge.wcu
                else:
                    self.wcu["rows"] += charge.wcu


def _operator_loop(
    store: ControlStore,
    stop: threading.Event,
    failures: list[str],
    every: float,
    rate: float,
    time_scale: TimeScale,
) -> None:
    """The operator's commands while the run runs, one every `every` seconds: mostly
    `backfill throttle` to the run's own cap (it changes nothing the run does), now and then a
    short `pause` and its `resume`."""
    commands: list[Callable[[], object]] = [
        lambda: set_throttle(store, rate, changed_by="ops", reason="keep the cap"),
        lambda: set_throttle(store, rate, changed_by="ops", reason="keep the cap"),
        lambda: pause_backfill(store, changed_by="ops", reason="peak"),
        lambda: resume_backfill(store, changed_by="ops", reason="off-peak"),
    ]
    turn = 0
    while not time_scale.wait(stop, every):
        try:
            commands[turn % len(commands)]()
        except (ClientError, BotoCoreError, SagaIndexError) as err:
            code = (error_code(err) if isinstance(err, ClientError) else None) or type(err).__name__
            failures.append(code)
        turn += 1
    # Whatever the last command was, the run is left resumed.
    with contextlib.suppress(ClientError, BotoCoreError, SagaIndexError):
        resume_backfill(store, changed_by="ops", reason="done")


def run_contended(
    new_client: Callable[[], Any],
    table_name: str,
    schema: TableSchema,
    *,
    fence: FenceVariant,
    segments: int,
    rate: float,
    semantics: DynamoSemantics | None,
    server_stats: Callable[[], Stats] | None = None,
    poll_seconds: float = 0.05,
    operator_every: float | None = 0.03,
    clock: WallClock = utc_now,
    on_progress: Callable[[SegmentCounts], None] | None = None,
    time_scale: TimeScale | None = None,
) -> Contended:
    """A forward backfill of the record's move (the caller seeded the rows and the record) in
    `segments` segments at `rate` writes/s, every client under `semantics` (None: the server
    applies the model, and `server_stats` reads what it refused), while an operator throttles,
    pauses and resumes it every `operator_every` seconds (None: no operator)."""
    run_charges = _RunCharges(table_name)
    heartbeats, operator = Tally(), Tally()
    if semantics is not None:
        reader = new_client()
        hooks = SemanticsHooks(semantics, schema, reader=reader)
        run_client = SemanticsHooks(semantics, schema, reader=reader, on_charge=run_charges).attach(
            new_client()
        )
        keeper_client = heartbeats.watch(hooks.attach(new_client()))
        operator_client = operator.watch(hooks.attach(new_client()))
    elif server_stats is None:
        raise ValueError("without a model here, server_stats reads the server's")
    else:
        run_client = new_client()
        keeper_client = heartbeats.watch(new_client())
        operator_client = operator.watch(new_client())
    stop_operator = threading.Event()
    failures: list[str] = []
    scale = time_scale or TimeScale()
    # Dilated: the run's clocks and waits are the engine's; else the caller's wall clock and
    # the run's own real-time defaults.
    clocks: dict[str, Any] = (
        {"clock": scale.wall, "monotonic": scale.monotonic, "wait": scale.wait}
        if scale.scale != REAL_TIME
        else {"clock": clock}
    )
    ops = threading.Thread(
        target=_operator_loop,
        args=(
            ControlStore(operator_client, table_name),
            stop_operator,
            failures,
            operator_every or 0.0,
            rate,
            scale,
        ),
        name="contended-operator",
    )
    request = BackfillRequest(
        direction=BackfillDirection.FORWARD,
        total_segments=segments,
        max_writes_per_second=rate,
        dry_run=False,
    )
    started = time.monotonic()
    if operator_every is not None:
        ops.start()
    try:
        outcome = backfill_locally(
            run_client,
            table_name,
            request,
            holder="contended@host/1",
            store=ControlStore(keeper_client, table_name),
            poll_seconds=poll_seconds,
            transactional_fence=fence.transactional,
            fence_check=fence.check,
            on_progress=on_progress,
            pace_rules=AT_THE_CAP,
            **clocks,
        )
    finally:
        stop_operator.set()
        if ops.is_alive():
            ops.join(timeout=30)
    if semantics is not None:
        stats = semantics.stats
    else:
        assert server_stats is not None
        stats = server_stats()
    return Contended(
        run=outcome,
        stats=stats,
        heartbeats=heartbeats,
        operator=operator,
        operator_failures=failures,
        restamp_wcu=run_charges.wcu,
        seconds=outcome.seconds or (time.monotonic() - started),
    )
