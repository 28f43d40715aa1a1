"""The meter: botocore event hooks that price every data-plane request of a client.

Each request is priced by devkit.capacity.pricing and recorded in a LoadLedger at the second of
the meter's clock at which it started; a replay on a virtual clock sets that clock.

How the meter learns the items (documented, because it costs extra requests on the server):
- writes: before the write is sent, the meter reads the current item with a SEPARATE client
  (`reader`, never metered) using a strongly consistent GetItem, and after the write it takes the
  new item from the request (PutItem), from ReturnValues=ALL_NEW, or from a second un-metered
  GetItem. Writes through one meter to the same table key are serialised by a per-key lock so
  the before/after pair belongs to that write.
- a Query/Scan whose response does not show every item it read (a FilterExpression dropped
  some, a ProjectionExpression/Select trimmed them) is repeated through the reader without the
  filter and projection, with the same key condition, ExclusiveStartKey and Limit: the page it
  returns is the page DynamoDB evaluated.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devkit.capacity.errors import MeterError
from devkit.capacity.ledger import LoadLedger, LoadSummary
from devkit.capacity.pricing import TRANSACTIONAL_FACTOR as TRANSACTIONAL_FACTOR
from devkit.capacity.pricing import (
    Charge,
    condition_check_charges,
    query_charge,
    query_partition_key,
    scan_charges,
    transactional,
    write_charges,
)
from devkit.capacity.table_schema import TableSchema, key_text
from devkit.capacity.units import read_units
from saga_index.store.dynamo import CONDITION_FAILED, item_size

log = logging.getLogger(__name__)

READ_OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
WRITE_OPERATIONS = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
# Data-plane operations the meter cannot price only once the server accepted them.
REFUSED_ONLY_OPERATIONS: frozenset[str] = frozenset()
# Data-plane operations the meter cannot price: refused loudly rather than silently uncounted.
UNMETERED_OPERATIONS = frozenset(
    {
        "TransactGetItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    }
)
_PENDING = "devkit.capacity.pending"
_LOCK_TIMEOUT_SECONDS = 60.0


@dataclass
class _Pending:
    operation: str
    params: Mapping[str, Any]
    second: int
    old_items: dict[tuple[str, ...], dict[str, Any] | None] = field(default_factory=dict)
    locked: list[threading.Lock] = field(default_factory=list)


class CapacityMeter:
    """Meters every data-plane request of the clients it is attached to, for one table.

        meter = CapacityMeter(schema, reader=make_client(...), clock=virtual_clock.now)
        client = meter.attach(make_client(...))

    `reader` must be a client of the same endpoint that is NOT attached to any meter: it reads
    the items a request touched (see the module docstring). `clock` returns the current second
    of the run (default: real seconds since the meter was made).
    """

    def __init__(
        self,
        schema: TableSchema,
        *,
        reader: Any,
        clock: Callable[[], float] | None = None,
        ledger: LoadLedger | None = None,
    ) -> None:
        self.schema = schema
        self.reader = reader
        started = time.monotonic()
        self.clock: Callable[[], float] = clock or (lambda: time.monotonic() - started)
        self.ledger = ledger or LoadLedger()
        self.requests = 0
        self.shadow_reads = 0
        self.shadow_mismatches = 0
        self._counter_lock = threading.Lock()
        self._key_locks: dict[tuple[str, ...], threading.Lock] = {}
        self._key_locks_guard = threading.Lock()

    # ---- wiring ------------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        events = client.meta.events
        # Wildcard nodes run before service-specific ones, and "first" handlers before the
        # rest: so the meter sees every request even when a stub or a fault injector answers
        # it, and reads the old item before anything else can short-circuit the call.
        events.register_first("before-parameter-build.*.*", self._before_parameter_build)
        events.register_first("before-call.*.*", self._before_call)
        events.register("after-call.*.*", self._after_call)
        events.register("after-call-error.*.*", self._after_call_error)
        return client

    def summary(self, target: str | None = None) -> LoadSummary:
        return self.ledger.summary(target or self.schema.name)

    # ---- hooks -------------------------------------------------------------------------

    def _before_parameter_build(
        self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        operation = model.name
        if operation in UNMETERED_OPERATIONS:
            raise MeterError(
                f"{operation} cannot be metered (the meter prices single-item writes, "
                "BatchWriteItem, GetItem, BatchGetItem, Query and Scan)"
            )
        if (
            operation in READ_OPERATIONS
            or operation in WRITE_OPERATIONS
            or operation in REFUSED_ONLY_OPERATIONS
        ):
            context[_PENDING] = _Pending(operation, params, int(self.clock()))

    def _before_call(self, context: dict[str, Any], **_: Any) -> None:
        pending = context.get(_PENDING)
        if pending is None or pending.operation not in WRITE_OPERATIONS:
            return
        keys = self._write_keys(pending)
        for key in sorted(keys):
            lock = self._key_lock(key)
            if not lock.acquire(timeout=_LOCK_TIMEOUT_SECONDS):
                self._release(pending)
                raise MeterError(f"a metered write to {key} did not finish in time")
            pending.locked.append(lock)
        try:
            for key, key_attributes in keys.items():
                pending.old_items[key] = self._get(key_attributes)
        except BaseException:
            self._release(pending)
            raise

    def _after_call(
        self,
        http_response: Any,
        parsed: Mapping[str, Any],
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        pending = context.pop(_PENDING, None)
        if pending is None:
            return
        try:
            status = getattr(http_response, "status_code", 200)
            charges = self._price(pending, parsed, status)
        finally:
            self._release(pending)
        if charges is None:
            return
        with self._counter_lock:
            self.requests += 1
        self.ledger.add(pending.second, charges)

    def _after_call_error(self, context: dict[str, Any], **_: Any) -> None:
        pending = context.pop(_PENDING, None)
        if pending is not None:
            self._release(pending)

    # ---- pricing of one request ----------------------------------------------------------

    def _price(
        self, pending: _Pending, parsed: Mapping[str, Any], status: int
    ) -> list[Charge] | None:
        params = pending.params
        operation = pending.operation
        error = (parsed.get("Error") or {}).get("Code") if status >= 300 else None
        if operation in REFUSED_ONLY_OPERATIONS:
            if error:
                return None  # refused (unknown here, cancelled, throttled): nothing written
            raise MeterError(
                f"{operation} was accepted by the server and cannot be metered (the meter "
                "prices single-item writes, BatchWriteItem, GetItem, BatchGetItem, Query and "
                "Scan)"
            )
        if operation == "BatchGetItem":
            return None if error else self._price_batch_get(params, parsed)
        if operation == "BatchWriteItem":
            return None if error else self._price_batch_write(pending, parsed)
        if operation == "TransactWriteItems":
            # A cancelled transaction wrote nothing.
            return None if error else self._price_transaction(pending)
        if params.get("TableName") != self.schema.name:
            return None
        if operation in WRITE_OPERATIONS:
            ((key, key_attributes),) = self._write_keys(pending).items()
            old = pending.old_items.get(key)
            if error == CONDITION_FAILED:
                return write_charges(
                    self.schema, old, None, condition_failed=True, key=key_attributes
                )
            if error:
                return None  # rejected or throttled: DynamoDB charges nothing
            new = self._new_item(operation, params, parsed)
            return write_charges(self.schema, old, new, key=key_attributes)
        if error:
            return None
        if operation == "GetItem":
            return self._price_get(params, parsed)
        if operation == "Query":
            return self._price_query(params, parsed)
        return self._price_scan(params, parsed)

    def _price_get(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[Charge]:
        item = parsed.get("Item")
        if item is not None and _trims_attributes(params):
            # The charge is for the whole item, whatever subset was asked for.
            item = self._get(params["Key"])
        consistent = bool(params.get("ConsistentRead", False))
        units = read_units(item_size(item), consistent=consistent)
        return [Charge(self.schema.name, key_text(params["Key"][self.schema.hash_key]), rcu=units)]

    def _price_batch_get(
        self, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> list[Charge] | None:
        request = (params.get("RequestItems") or {}).get(self.schema.name)
        if not request:
            return None
        unprocessed = {
            _key_tuple(self.schema, k)
            for k in ((parsed.get("UnprocessedKeys") or {}).get(self.schema.name) or {}).get(
                "Keys", []
            )
        }
        consistent = bool(request.get("ConsistentRead", False))
        charges = []
        for key in request.get("Keys", []):
            if _key_tuple(self.schema, key) in unprocessed:
                continue
            size = item_size(self._get(key))
            units = read_units(size, consistent=consistent)
            charges.append(Charge(self.schema.name, key_text(key[self.schema.hash_key]), rcu=units))
        return charges

    def _price_query(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[Charge]:
        index_name = params.get("IndexName")
        if index_name:
            target, hash_key = index_name, self.schema.index(index_name).hash_key
        else:
            target, hash_key = self.schema.name, self.schema.hash_key
        evaluated = self._evaluated(params, parsed, "query")
        partition = query_partition_key(params, hash_key)
        if partition is None:
            partition = key_text(evaluated[0].get(hash_key)) if evaluated else ""
        # GSI reads are always eventually consistent.
        consistent = bool(params.get("ConsistentRead", False)) and not index_name
        return [query_charge(target, partition, evaluated, consistent=consistent)]

    def _price_scan(self, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> list[Charge]:
        index_name = params.get("IndexName")
        if index_name:
            target, hash_key = index_name, self.schema.index(index_name).hash_key
        else:
            target, hash_key = self.schema.name, self.schema.hash_key
        evaluated = self._evaluated(params, parsed, "scan")
        consistent = bool(params.get("ConsistentRead", False)) and not index_name
        return scan_charges(target, hash_key, evaluated, consistent=consistent)

    def _price_batch_write(
        self, pending: _Pending, parsed: Mapping[str, Any]
    ) -> list[Charge] | None:
        requests = (pending.params.get("RequestItems") or {}).get(self.schema.name)
        if not requests:
            return None
        unprocessed = {
            _key_tuple(self.schema, _write_request_key(self.schema, r))
            for r in (parsed.get("UnprocessedItems") or {}).get(self.schema.name, [])
        }
        charges: list[Charge] = []
        for request in requests:
            key = _key_tuple(self.schema, _write_request_key(self.schema, request))
            if key in unprocessed:
                continue
            old = pending.old_items.get(key)
            new = request["PutRequest"]["Item"] if "PutRequest" in request else None
            charges.extend(
                write_charges(self.schema, old, new, key=_write_request_key(self.schema, request))
            )
        return charges

    def _price_transaction(self, pending: _Pending) -> list[Charge] | None:
        """Every action on this table: each item charged twice (prepare and commit), its GSI
        writes once (pricing.transactional); a ConditionCheck costs twice the write units of
        the item it checked."""
        charges: list[Charge] = []
        for kind, body in _transact_actions(pending.params):
            if body.get("TableName") != self.schema.name:
                continue
            key = self.schema.key_of(self._key_item(body))
            old = pending.old_items.get(_key_tuple(self.schema, key))
            if kind == "ConditionCheck":
                charges.extend(condition_check_charges(self.schema, old, key))
                continue
            new: dict[str, Any] | None
            if kind == "Put":
                new = dict(body["Item"])
            elif kind == "Delete":
                new = None
            else:
                new = self._get(key)
            charges.extend(write_charges(self.schema, old, new, key=key))
        return transactional(self.schema, charges) or None

    # ---- items -------------------------------------------------------------------------

    def _evaluated(
        self, params: Mapping[str, Any], parsed: Mapping[str, Any], operation: str
    ) -> list[dict[str, Any]]:
        """The items a Query/Scan page read: the response's, or a shadow read's."""
        items = list(parsed.get("Items") or [])
        filtered = bool(params.get("FilterExpression") or params.get("QueryFilter")) and (
            parsed.get("ScannedCount", len(items)) != parsed.get("Count", len(items))
        )
        if not filtered and not _trims_attributes(params) and "Items" in parsed:
            return items
        shadow = _shadow_request(params)
        with self._counter_lock:
            self.shadow_reads += 1
        response = getattr(self.reader, operation)(**shadow)
        evaluated: list[dict[str, Any]] = response.get("Items", [])
        scanned = parsed.get("ScannedCount")
        if scanned is not None and scanned != len(evaluated):
            # The data changed between the two reads; the shadow is still the best estimate.
            with self._counter_lock:
                self.shadow_mismatches += 1
            log.debug(
                "shadow %s read %d items, the request read %d", operation, len(evaluated), scanned
            )
        return evaluated

    def _get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        response = self.reader.get_item(TableName=self.schema.name, Key=key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _new_item(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        if operation == "PutItem":
            return dict(params["Item"])
        if operation == "DeleteItem":
            return None
        if params.get("ReturnValues") == "ALL_NEW" and "Attributes" in parsed:
            return dict(parsed["Attributes"])
        return self._get(params["Key"])

    def _key_item(self, params: Mapping[str, Any]) -> Mapping[str, Any]:
        return params["Item"] if "Item" in params else params["Key"]

    def _write_keys(self, pending: _Pending) -> dict[tuple[str, ...], dict[str, Any]]:
        params = pending.params
        if pending.operation == "BatchWriteItem":
            requests = (params.get("RequestItems") or {}).get(self.schema.name) or []
            keys = {}
            for request in requests:
                key = _write_request_key(self.schema, request)
                keys[_key_tuple(self.schema, key)] = key
            return keys
        if pending.operation == "TransactWriteItems":
            keys = {}
            for _, body in _transact_actions(params):
                if body.get("TableName") == self.schema.name:
                    key = self.schema.key_of(self._key_item(body))
                    keys[_key_tuple(self.schema, key)] = key
            return keys
        if params.get("TableName") != self.schema.name:
            return {}
        key = self.schema.key_of(self._key_item(params))
        return {_key_tuple(self.schema, key): key}

    def _key_lock(self, key: tuple[str, ...]) -> threading.Lock:
        with self._key_locks_guard:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    @staticmethod
    def _release(pending: _Pending) -> None:
        while pending.locked:
            pending.locked.pop().release()


def _trims_attributes(params: Mapping[str, Any]) -> bool:
    select = params.get("Select")
    return bool(
        params.get("ProjectionExpression")
        or params.get("AttributesToGet")
        or (select and select not in ("ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES"))
    )


_PLACEHOLDER = re.compile(r"[#:][\w-]+")


def _shadow_request(params: Mapping[str, Any]) -> dict[str, Any]:
    """The same page read without filter or projection: it returns every item evaluated."""
    keep = (
        "TableName",
        "IndexName",
        "KeyConditionExpression",
        "KeyConditions",
        "ExclusiveStartKey",
        "Limit",
        "ScanIndexForward",
        "ConsistentRead",
        "Segment",
        "TotalSegments",
    )
    shadow = {name: params[name] for name in keep if name in params}
    used = set(_PLACEHOLDER.findall(str(params.get("KeyConditionExpression", ""))))
    names = {k: v for k, v in (params.get("ExpressionAttributeNames") or {}).items() if k in used}
    values = {k: v for k, v in (params.get("ExpressionAttributeValues") or {}).items() if k in used}
    if names:
        shadow["ExpressionAttributeNames"] = names
    if values:
        shadow["ExpressionAttributeValues"] = values
    return shadow


def _transact_actions(params: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(kind, body) of each action of a TransactWriteItems, in order."""
    return [next(iter(entry.items())) for entry in params.get("TransactItems") or []]


def _key_tuple(schema: TableSchema, key: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(key_text(key.get(a)) for a in schema.key_attributes)


def _write_request_key(schema: TableSchema, request: Mapping[str, Any]) -> dict[str, Any]:
    if "PutRequest" in request:
        return schema.key_of(request["PutRequest"]["Item"])
    return dict(request["DeleteRequest"]["Key"])
