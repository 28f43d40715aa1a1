"""The adapter for real threads: botocore hooks that put a client's requests under the model.

    semantics = DynamoSemantics(table_name, clock=time.monotonic)
    hooks = SemanticsHooks(semantics, schema, reader=make_client(...))
    client = hooks.attach(make_client(...))

Before a request is sent (`before-call`): a read, a single-item write or a transaction whose
estimated units would take a key past its ceiling this second is answered with the throttle,
and a write that conflicts with an ongoing transaction with TransactionConflictException or
TransactionCanceledException, without reaching the server. An admitted TransactWriteItems marks
its items ongoing and holds them for the model's in-flight time with a real sleep, then the
server runs it; its items are released when its answer arrives (`after-call`). What the request
consumed is charged then, from the items before and after it, read through `reader` (a client
of the same server with no hooks; strongly consistent GetItems: two extra requests per write).

A refusal answered here is final for the caller: botocore does not retry an answer given in
`before-call`, so a throttle is what the caller would see after the SDK's retries gave up (as
the simulator's throttles are). A request that failed is charged nothing.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from devkit.capacity.pricing import Charge
from devkit.capacity.table_schema import TableSchema
from devkit.semantics.model import DynamoSemantics, Refusal, Transaction
from devkit.semantics.requests import (
    READS,
    SINGLE_WRITES,
    Touch,
    item_ref,
    read_cost,
    touched,
    write_cost,
)
from devkit.semantics.wire import answer

_PARAMS = "devkit.semantics.params"
_PENDING = "devkit.semantics.pending"
_TRANSACTIONS = frozenset({"TransactWriteItems", "TransactGetItems"})


@dataclass
class _Pending:
    operation: str
    params: Mapping[str, Any]
    touch: Touch
    before: dict[Any, Mapping[str, Any] | None]
    transaction: Transaction | None


class SemanticsHooks:
    """Puts every DynamoDB request of the clients it is attached to under one model."""

    def __init__(
        self,
        semantics: DynamoSemantics,
        schema: TableSchema,
        *,
        reader: Any,
        sleep: Callable[[float], object] = time.sleep,
        on_charge: Callable[[str, list[Charge]], None] | None = None,
    ) -> None:
        if schema.name != semantics.table_name:
            raise ValueError(
                f"the schema is of {schema.name!r}, the model of {semantics.table_name!r}"
            )
        self.semantics = semantics
        self.schema = schema
        self.reader = reader
        self.sleep = sleep
        self.on_charge = on_charge

    def attach(self, client: Any) -> Any:
        events = client.meta.events
        # First: the request is judged before any other hook of the client may answer it.
        events.register_first("before-parameter-build.dynamodb.*", self._keep)
        events.register_first("before-call.dynamodb.*", self._before_call)
        events.register("after-call.dynamodb.*", self._after_call)
        events.register("after-call-error.dynamodb.*", self._after_error)
        return client

    # ---- hooks -------------------------------------------------------------------------

    @staticmethod
    def _keep(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_PARAMS] = copy.deepcopy(dict(params))

    def _before_call(self, model: Any, context: dict[str, Any], **_: Any) -> Any:
        operation = model.name
        params = context.get(_PARAMS)
        if params is None:
            return None
        touch = touched(self.schema, operation, params)
        if not touch.actions and operation not in READS:
            return None
        # The conflict rules first: they judge the moment the request arrives, before the
        # reads that price it (which only this adapter makes) take any time.
        transaction = None
        refusal: Refusal | None = None
        if operation in SINGLE_WRITES and touch.refs:
            refusal = self.semantics.admit_write(operation, touch.refs[0])
        elif operation in _TRANSACTIONS:
            begun = self.semantics.begin_transaction(
                [a.ref for a in touch.actions], operation=operation
            )
            if isinstance(begun, Refusal):
                refusal = begun
            else:
                transaction = begun
        if refusal is not None:
            return answer(refusal, operation)
        before = self._before_items(operation, params, touch)
        estimate = (
            read_cost(self.schema, operation, params, before)
            if operation in READS
            else write_cost(self.schema, touch, before)
        )
        refusal = self.semantics.admit(estimate)
        if refusal is not None:
            if transaction is not None:
                self.semantics.finish(transaction)
            return answer(refusal, operation)
        context[_PENDING] = _Pending(operation, params, touch, before, transaction)
        if transaction is not None and transaction.items:
            # The rest of its in-flight time: others meet its items until it has passed.
            self.sleep(max(0.0, transaction.until - self.semantics.clock()))
        return None

    def _after_call(
        self, http_response: Any, parsed: Mapping[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        pending: _Pending | None = context.pop(_PENDING, None)
        if pending is None:
            return
        try:
            if getattr(http_response, "status_code", 200) < 300:
                charges = self._consumed(pending, parsed)
                self.semantics.charge(charges)
                if self.on_charge is not None:
                    self.on_charge(pending.operation, charges)
        finally:
            if pending.transaction is not None:
                self.semantics.finish(pending.transaction)

    def _after_error(self, context: dict[str, Any], **_: Any) -> None:
        pending: _Pending | None = context.pop(_PENDING, None)
        if pending is not None and pending.transaction is not None:
            self.semantics.finish(pending.transaction)

    # ---- items -------------------------------------------------------------------------

    def _consumed(self, pending: _Pending, parsed: Mapping[str, Any]) -> list[Charge]:
        if pending.operation in READS:
            return read_cost(self.schema, pending.operation, pending.params, pending.before, parsed)
        if pending.operation == "TransactGetItems":
            return []
        after = {
            # A ConditionCheck changes nothing: its item is read once, before.
            a.ref: pending.before.get(a.ref) if a.kind == "ConditionCheck" else self._get(a.key)
            for a in pending.touch.actions
            if a.ref is not None
        }
        return write_cost(self.schema, pending.touch, pending.before, after)

    def _before_items(
        self, operation: str, params: Mapping[str, Any], touch: Touch
    ) -> dict[Any, Mapping[str, Any] | None]:
        if not self.semantics.ceilings_on:
            return {}
        if operation == "GetItem" and params.get("TableName") == self.schema.name:
            key = {a: params["Key"][a] for a in self.schema.key_attributes}
            return {item_ref(self.schema, self.schema.name, key): self._get(key)}
        return {a.ref: self._get(a.key) for a in touch.actions if a.ref is not None}

    def _get(self, key: Mapping[str, Any]) -> Mapping[str, Any] | None:
        response = self.reader.get_item(
            TableName=self.schema.name, Key=dict(key), ConsistentRead=True
        )
        item: Mapping[str, Any] | None = response.get("Item")
        return item
