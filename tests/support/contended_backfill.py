"""The contended local backfill: rows seeded and the record planted as the component tests do,
then devkit.semantics.contended's run (the fence a parameter), either on moto under the
in-process model (moto serving requests in turn and rolling transactions back cheaply,
moto_harness) or on the fast engine, whose semantics proxy applies the same model to every
client (`engine`)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from devkit.capacity.table_schema import TableSchema
from devkit.engine import Engine
from devkit.semantics.contended import (
    PRODUCT_FENCE,
    SHARED_STATE_FENCE,
    UNFENCED,
    Contended,
    FenceVariant,
    run_contended,
)
from devkit.semantics.model import DEFAULT_IN_FLIGHT_SECONDS, DynamoSemantics
from devkit.semantics.moto_harness import cheap_transactions, one_request_at_a_time
from saga_index.index import keys
from tests.support.backends import Backend
from tests.support.backfill_contract import Clock, plant

__all__ = ["PRODUCT_FENCE", "SHARED_STATE_FENCE", "UNFENCED", "ContendedRun", "FenceVariant"]


@dataclass
class ContendedRun:
    outcome: Contended
    rows: int
    left_on_legacy: int


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


def run_contended_backfill(
    dynamo: Backend,
    schema: TableSchema,
    *,
    fence: FenceVariant,
    rows: int = 160,
    segments: int = 8,
    rate: float = 40.0,
    in_flight: float = DEFAULT_IN_FLIGHT_SECONDS,
    poll_seconds: float = 0.1,
    engine: Engine | None = None,
) -> ContendedRun:
    """Seed `rows` legacy sagas, plant `migrating`, and run a forward backfill under the
    semantics layer (real clock) while an operator throttles, pauses and resumes it: in this
    process on moto, or, given the `engine` `dynamo` is on, under its proxy."""
    seed_rows(dynamo, rows)
    plant(dynamo, "migrating")
    semantics = (
        DynamoSemantics(dynamo.table_name, clock=time.monotonic, in_flight=in_flight)
        if engine is None
        else None
    )
    harness = contextlib.ExitStack()
    if engine is None:
        harness.enter_context(one_request_at_a_time())
        harness.enter_context(cheap_transactions())
    with harness:
        outcome = run_contended(
            dynamo.new_client,
            dynamo.table_name,
            schema,
            fence=fence,
            segments=segments,
            rate=rate,
            semantics=semantics,
            server_stats=None if engine is None else lambda: engine.table_stats(dynamo.table_name),
            clock=Clock(),
            poll_seconds=poll_seconds,
        )
    return ContendedRun(outcome, rows, on_legacy(dynamo))


def describe(contended: ContendedRun) -> str:
    """What a contended run came to, for an assertion's message."""
    outcome = contended.outcome
    return (
        f"stats={outcome.stats} failures={outcome.stopped_segments} "
        f"lease_lost={outcome.run.lease_lost} left={contended.left_on_legacy} "
        f"heartbeats={outcome.heartbeats.outcomes} operator={outcome.operator.outcomes}"
    )
