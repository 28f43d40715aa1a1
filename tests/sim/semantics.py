"""The simulator's adapter of DynamoDB's semantics (devkit.semantics): the model on the virtual
clock, judging each request a simulated process sends, priced from the rows as the simulated
table holds them (no extra request).

An admitted TransactWriteItems parks its task for the model's in-flight time (its items ongoing:
the scheduler runs other tasks meanwhile, and their requests meet them); the table runs it when
the task is resumed, then frees its items. The in-flight park is not a request: a pause "at a
write" (tests/sim/world.py) never lands on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devkit.capacity.table_schema import IndexSchema, TableSchema
from devkit.semantics.model import DynamoSemantics, ItemRef, Refusal, Transaction
from devkit.semantics.requests import READS, SINGLE_WRITES, Touch, read_cost, touched, write_cost
from saga_index.index import names
from tests.sim.clock import VirtualTime
from tests.sim.requests import TABLE, TableKey
from tests.sim.requests import describe as _describe
from tests.sim.scheduler import Task

Rows = Mapping[TableKey, dict[str, Any]]


@dataclass(frozen=True)
class Arrived:
    """A request as it reached the table: what it includes and the rows it found."""

    operation: str
    params: dict[str, Any]
    touch: Touch
    before: dict[ItemRef, Any]


class SimSemantics:
    def __init__(self, time: VirtualTime, *, in_flight: float) -> None:
        self.schema = TableSchema(
            TABLE,
            "PK",
            "SK",
            (
                IndexSchema(names.INDEX_NAME, names.INDEX_PARTITION_KEY, names.INDEX_SORT_KEY),
                # Sparse: only a row carrying OpenSagaPK costs it a write (stamp, move, remove).
                IndexSchema(
                    names.OPEN_INDEX_NAME,
                    names.OPEN_INDEX_PARTITION_KEY,
                    names.OPEN_INDEX_SORT_KEY,
                ),
            ),
        )
        self.model = DynamoSemantics(TABLE, clock=lambda: time.now, in_flight=in_flight)

    def arrived(self, operation: str, params: dict[str, Any], rows: Rows) -> Arrived:
        touch = touched(self.schema, operation, params)
        before = {a.ref: rows.get(_row(a.ref)) for a in touch.actions if a.ref is not None}
        if operation == "GetItem" and params.get("TableName") == TABLE:
            key = (params["Key"]["PK"]["S"], params["Key"]["SK"]["S"])
            before = {(TABLE, key): rows.get(key)}
        return Arrived(operation, params, touch, before)

    def verdict(self, request: Arrived, task: Task | None) -> Refusal | Transaction | None:
        """A refusal, or an admitted transaction (its task parked for its in-flight time, its
        items ongoing meanwhile), or None: run it."""
        operation, touch = request.operation, request.touch
        if operation in SINGLE_WRITES and touch.refs:
            refusal = self.model.admit_write(operation, touch.refs[0])
            if refusal is not None:
                return refusal
        refusal = self.model.admit(self._cost(request))
        if refusal is not None or operation not in ("TransactWriteItems", "TransactGetItems"):
            return refusal
        begun = self.model.begin_transaction([a.ref for a in touch.actions], operation=operation)
        if not isinstance(begun, Refusal) and task is not None and begun.items:
            task.park(f"in flight: {operation} {_describe(request.params)}", begun.until)
        return begun

    def charge(self, request: Arrived, parsed: Mapping[str, Any], rows: Rows) -> None:
        """What a request that ran consumed, from the rows before and after it."""
        self.model.charge(self._cost(request, parsed, rows))

    def _cost(
        self,
        request: Arrived,
        parsed: Mapping[str, Any] | None = None,
        rows: Rows | None = None,
    ) -> list[Any]:
        operation, params = request.operation, request.params
        if operation in READS:
            return read_cost(self.schema, operation, params, request.before, parsed)
        if operation == "TransactGetItems":
            return []
        after = None
        if rows is not None:
            after = {a.ref: rows.get(_row(a.ref)) for a in request.touch.actions if a.ref}
        return write_cost(self.schema, request.touch, request.before, after)


def _row(ref: ItemRef) -> TableKey:
    pk, sk = ref[1]
    return (pk, sk)
