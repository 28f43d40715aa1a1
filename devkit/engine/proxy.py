"""The semantics proxy: DynamoDB's conflict rules and per-key ceilings (devkit.semantics.model)
applied at HTTP level in front of a dynalite process, so that every client, in any language,
meets them.

A request is judged by its `X-Amz-Target` and JSON body, as DynamoDB judges it:

  GetItem, Query, Scan        admitted or throttled on the key they read (an estimate of one
                              read unit before they run), then charged what they returned
  PutItem, UpdateItem,        refused with TransactionConflictException while a transaction
  DeleteItem                  holds the item; else the item is read (strongly consistent),
                              the write priced and admitted or throttled, run, and charged
                              from the item before and after
  TransactWriteItems          served here on top of the server (dynalite has no transactions):
                              devkit.engine.transact
  anything else               forwarded unchanged (CreateTable, BatchWriteItem, ...): no rule
                              here covers it

A refusal is answered as DynamoDB answers it: HTTP 400, `x-amzn-ErrorType`, a JSON body whose
`__type` is `com.amazonaws.dynamodb.v20120810#<code>` with the modelled fields (devkit.semantics
.wire). The model's clock is this process's monotonic clock, slowed by the options' `time_scale`
(devkit.semantics.dilation: engine seconds per real second, 1 by default): a key's budget is
per whole engine second, and a transaction holds its items for its in-flight time in engine
seconds (at 0.01 the 10 ms hold lasts a real second).

Atomic as seen through the proxy: every write of an item (single or in a transaction) holds
that item's lock for as long as it runs, so a transaction's condition checks, writes and
rollback are never interleaved with another write through the proxy. NOT atomic against a
client that talks to the server directly (around the proxy): such a write can land between a
transaction's check and its write, and a reader there can see a transaction half applied.
Reads through the proxy take no lock: like DynamoDB's plain reads (not TransactGetItems), they
may see a transaction's writes before all of them landed.

Not served: TransactGetItems, PartiQL and TTL (the server answers UnknownOperationException or
its own error), ReturnConsumedCapacity (no ConsumedCapacity is added). BatchWriteItem and
BatchGetItem are forwarded without the rules (devkit.semantics says why).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from devkit.capacity.errors import MeterError
from devkit.capacity.table_schema import TableSchema
from devkit.capacity.units import PARTITION_RCU_CEILING, PARTITION_WCU_CEILING
from devkit.engine.items import ItemLocks, TableModel
from devkit.engine.transact import TokenMemory, transact_write
from devkit.engine.upstream import Reply, Upstream, UpstreamError, json_reply, refusal_reply
from devkit.semantics.dilation import REAL_TIME, check_time_scale, describe_time_scale, dilated
from devkit.semantics.model import (
    DEFAULT_IN_FLIGHT_SECONDS,
    THROTTLE_CODES,
    DynamoSemantics,
    Refusal,
    ThrottleCode,
)
from devkit.semantics.requests import READS, SINGLE_WRITES, item_ref, read_cost, touched, write_cost

SCHEMA_CHANGES = frozenset({"CreateTable", "DeleteTable", "UpdateTable"})
STATS_PATH = "/_devkit/engine/stats"
# A BatchWriteItem of 25 items of 400 KB is about 10 MB: the largest request DynamoDB takes.
MAX_REQUEST_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ProxyOptions:
    """Which rules the proxy applies, and with what figures (devkit.semantics.model)."""

    conflicts: bool = True
    ceilings: bool = True
    throttle_code: ThrottleCode = "ThrottlingException"
    in_flight: float = DEFAULT_IN_FLIGHT_SECONDS
    rcu_ceiling: float = PARTITION_RCU_CEILING
    wcu_ceiling: float = PARTITION_WCU_CEILING
    # Engine seconds per real second (devkit.semantics.dilation): below 1, time is dilated.
    time_scale: float = REAL_TIME

    def validate(self) -> ProxyOptions:
        if self.throttle_code not in THROTTLE_CODES:
            raise ValueError(f"throttle code must be one of {THROTTLE_CODES}")
        if not self.in_flight >= 0:
            raise ValueError(f"in-flight must be zero or more seconds, got {self.in_flight!r}")
        if not (self.rcu_ceiling > 0 and self.wcu_ceiling > 0):
            raise ValueError("the per-key ceilings must be positive")
        check_time_scale(self.time_scale)
        return self

    def semantics(self, table_name: str, clock: Callable[[], float]) -> DynamoSemantics:
        return DynamoSemantics(
            table_name,
            clock=clock,
            in_flight=self.in_flight,
            throttle_code=self.throttle_code,
            conflicts=self.conflicts,
            ceilings=self.ceilings,
            rcu_ceiling=self.rcu_ceiling,
            wcu_ceiling=self.wcu_ceiling,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "conflicts": self.conflicts,
            "ceilings": self.ceilings,
            "throttleCode": self.throttle_code,
            "inFlightSeconds": self.in_flight,
            "rcuCeiling": self.rcu_ceiling,
            "wcuCeiling": self.wcu_ceiling,
            "timeScale": self.time_scale,
            "time": describe_time_scale(self.time_scale),
        }


class SemanticsProxy:
    """The proxy's state: the server, the tables it modelled, the item locks, the counts."""

    def __init__(
        self,
        upstream_url: str,
        options: ProxyOptions,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.upstream = Upstream(upstream_url)
        self.options = options.validate()
        # The model's clock: engine seconds (real ones unless the options dilate time).
        self.clock = dilated(clock, self.options.time_scale)
        self.locks = ItemLocks()
        self.tables: dict[str, TableModel] = {}
        self.requests: Counter[str] = Counter()
        # (target, partition key) -> requests refused for that key's ceiling.
        self.throttled_keys: Counter[tuple[str, str]] = Counter()
        self.tokens = TokenMemory(self.clock)

    # ---- the HTTP front ----------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/", self._handle)
        app.router.add_get(STATS_PATH, self._stats)

        async def opened(_: web.Application) -> None:
            await self.upstream.open()

        async def closed(_: web.Application) -> None:
            await self.upstream.close()

        app.on_startup.append(opened)
        app.on_cleanup.append(closed)
        return app

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        operation = request.headers.get("X-Amz-Target", "").rpartition(".")[2]
        self.requests[operation] += 1
        reply = await self.dispatch(operation, request.headers, body)
        return web.Response(status=reply.status, body=reply.body, headers=dict(reply.headers))

    async def _stats(self, _: web.Request) -> web.Response:
        return web.json_response(self.stats())

    def stats(self) -> dict[str, Any]:
        """What the proxy refused and admitted, per table (with the writes it charged in each
        second of its clock, by operation), the keys it throttled, and its clock now."""
        tables = {}
        for name, model in self.tables.items():
            stats = model.semantics.stats
            tables[name] = {
                "transactions": stats.transactions,
                "cancelledTransactions": stats.cancelled_transactions,
                "conflicts": dict(stats.conflicts),
                "throttles": dict(stats.throttles),
                "writesPerSecond": _per_second(stats.writes),
            }
        return {
            "options": self.options.to_json(),
            # The model's clock now (engine seconds): where writesPerSecond's seconds fall.
            "clock": self.clock(),
            "requests": dict(self.requests),
            "tables": tables,
            "throttledKeys": [
                {"target": target, "key": key, "refused": count}
                for (target, key), count in self.throttled_keys.most_common()
            ],
        }

    # ---- dispatch ----------------------------------------------------------------------

    async def dispatch(self, operation: str, headers: Mapping[str, str], body: bytes) -> Reply:
        if operation == "TransactWriteItems":
            return await transact_write(self, _params(body))
        if operation not in READS and operation not in SINGLE_WRITES:
            reply = await self.upstream.forward(headers, body)
            if operation in SCHEMA_CHANGES:
                # The table changed (or went): it is described again on its next use.
                self.tables.pop(str(_params(body).get("TableName")), None)
            return reply
        params = _params(body)
        model = await self.model(params.get("TableName"))
        if model is None:
            return await self.upstream.forward(headers, body)
        try:
            if operation in READS:
                return await self._read(model, operation, params, headers, body)
            return await self._write(model, operation, params, headers, body)
        except UpstreamError as err:
            return err.reply
        except (KeyError, TypeError, ValueError, MeterError):
            # A request the model cannot read (a missing key, a wrong type): the server's
            # validation names the problem as DynamoDB's would.
            return await self.upstream.forward(headers, body)

    async def model(self, table_name: Any) -> TableModel | None:
        """The model of `table_name`, described on first use; None when the server has no
        such table (the request goes through, and the server answers it)."""
        if not isinstance(table_name, str):
            return None
        known = self.tables.get(table_name)
        if known is not None:
            return known
        reply = await self.upstream.call("DescribeTable", {"TableName": table_name})
        if not reply.ok:
            return None
        schema = TableSchema.from_create_kwargs(reply.json()["Table"])
        model = TableModel(schema, self.options.semantics(table_name, self.clock))
        return self.tables.setdefault(table_name, model)

    def real_seconds(self, engine_seconds: float) -> float:
        """How long a wait of `engine_seconds` on the model's clock lasts in real seconds."""
        return engine_seconds / self.options.time_scale

    def refuse(self, refusal: Refusal) -> Reply:
        if refusal.over is not None:
            self.throttled_keys[refusal.over] += 1
        return refusal_reply(refusal)

    # ---- reads and single writes -------------------------------------------------------

    async def _read(
        self,
        model: TableModel,
        operation: str,
        params: Mapping[str, Any],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Reply:
        semantics, schema = model.semantics, model.schema
        if not semantics.ceilings_on:
            return await self.upstream.forward(headers, body)
        refusal = semantics.admit(read_cost(schema, operation, params, {}))
        if refusal is not None:
            return self.refuse(refusal)
        reply = await self.upstream.forward(headers, body)
        if reply.ok:
            document = reply.json()
            if operation == "GetItem":
                ref = item_ref(schema, schema.name, params["Key"])
                items = {} if ref is None else {ref: document.get("Item")}
                charges = read_cost(schema, operation, params, items)
            else:
                charges = read_cost(schema, operation, params, {}, document)
            semantics.charge(charges)
        return reply

    async def _write(
        self,
        model: TableModel,
        operation: str,
        params: Mapping[str, Any],
        headers: Mapping[str, str],
        body: bytes,
    ) -> Reply:
        semantics, schema = model.semantics, model.schema
        touch = touched(schema, operation, params)
        action = touch.actions[0]
        ref = action.ref
        assert ref is not None  # the table is the modelled one
        refusal = semantics.admit_write(operation, ref)
        if refusal is not None:
            return self.refuse(refusal)
        async with self.locks.hold([ref]):
            if not semantics.ceilings_on:
                return await self.upstream.forward(headers, body)
            before = await self.get_item(schema.name, action.key)
            refusal = semantics.admit(write_cost(schema, touch, {ref: before}))
            if refusal is not None:
                return self.refuse(refusal)
            reply, after = await self._run_write(operation, params, headers, body, before)
            if reply.ok:
                semantics.charge(
                    write_cost(schema, touch, {ref: before}, {ref: after}), operation=operation
                )
            return reply

    async def _run_write(
        self,
        operation: str,
        params: Mapping[str, Any],
        headers: Mapping[str, str],
        body: bytes,
        before: Mapping[str, Any] | None,
    ) -> tuple[Reply, Mapping[str, Any] | None]:
        """The write, and the item after it (for its price)."""
        if operation == "PutItem":
            return await self.upstream.forward(headers, body), params["Item"]
        if operation == "DeleteItem":
            return await self.upstream.forward(headers, body), None
        asked = params.get("ReturnValues", "NONE")
        if asked not in ("NONE", "ALL_NEW"):
            reply = await self.upstream.forward(headers, body)
            after = await self.get_item(params["TableName"], params["Key"]) if reply.ok else before
            return reply, after
        # The item after the update comes back with the answer; the caller gets what it asked.
        reply = await self.upstream.call("UpdateItem", {**params, "ReturnValues": "ALL_NEW"})
        if not reply.ok:
            return reply, before
        document = reply.json()
        after = document.get("Attributes")
        if asked == "NONE":
            document.pop("Attributes", None)
        return json_reply(200, document, **_request_id(reply)), after

    async def get_item(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        """The item as it is (strongly consistent), None when absent."""
        reply = await self.upstream.call(
            "GetItem", {"TableName": table, "Key": dict(key), "ConsistentRead": True}
        )
        if not reply.ok:
            raise UpstreamError(reply)
        item: dict[str, Any] | None = reply.json().get("Item")
        return item


def _per_second(writes: Counter[tuple[str, int]]) -> dict[str, dict[str, int]]:
    """operation -> {second: writes}, seconds as JSON's keys (strings)."""
    out: dict[str, dict[str, int]] = {}
    for (operation, second), n in sorted(writes.items()):
        out.setdefault(operation, {})[str(second)] = n
    return out


def _params(body: bytes) -> dict[str, Any]:
    try:
        document = json.loads(body or b"{}")
    except ValueError:
        return {}
    return document if isinstance(document, dict) else {}


def _request_id(reply: Reply) -> dict[str, str]:
    request_id = reply.headers.get("x-amzn-RequestId")
    return {"x-amzn-RequestId": request_id} if request_id else {}
