"""The capacity meter: what DynamoDB would charge each partition key, computed from item sizes.

A local server has no partitions and its ConsumedCapacity is not realistic (moto returns fixed
values, dynalite has no per-index write breakdown), so nothing here reads what the engine
reports. The meter is a set of botocore event hooks on a client: for every data-plane request it
finds the items the request read or wrote and prices them by DynamoDB's documented rules
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html,
.../read-write-operations.html and .../GSI.html#GSI.ThroughputConsiderations):

- item size = sum over attributes of UTF-8 name length + value size (strings: UTF-8 bytes;
  numbers: 1 byte per two significant digits + 1; binary: raw bytes; null/bool: 1; list/map:
  3 bytes + 1 byte per element + the elements; sets: the sum of their elements, an assumption
  the documentation does not spell out);
- reads in 4 KB units: a Query or Scan sums the sizes of the items it READ (before any filter)
  and rounds the sum up once; GetItem and each BatchGetItem item round per item; a missing
  item still costs one unit; eventually consistent reads (the default, and every GSI read)
  cost half;
- writes in 1 KB units, per index touched: the base table is charged the larger of the item
  before and after; each GSI is charged for the index entries that change: a put when the item
  enters the index, a delete when it leaves, BOTH when an index key attribute changes (the
  delete under the old key, the put under the new one), one write when only projected
  attributes change, nothing when the item is in the index neither before nor after;
- a failed conditional write costs the base table the size of the existing item (one unit when
  there is none) and touches no index.

Charges are attributed to (table or index name, partition key value) and to the second of the
meter's clock at which the request started; a replay on a virtual clock sets that clock.

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

import base64
import logging
import math
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

log = logging.getLogger(__name__)

KB = 1024
READ_UNIT_BYTES = 4 * KB
WRITE_UNIT_BYTES = KB
# One partition serves at most this much per second, on-demand or provisioned, GSIs included.
PARTITION_RCU_CEILING = 3000.0
PARTITION_WCU_CEILING = 1000.0

READ_OPERATIONS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"})
# Data-plane operations the meter cannot price: refused loudly rather than silently uncounted.
UNMETERED_OPERATIONS = frozenset(
    {
        "TransactGetItems",
        "TransactWriteItems",
        "ExecuteStatement",
        "BatchExecuteStatement",
        "ExecuteTransaction",
    }
)
_PENDING = "devkit.capacity.pending"
_LOCK_TIMEOUT_SECONDS = 60.0


class MeterError(RuntimeError):
    """The meter cannot price a request (an unsupported operation, a lock that never freed)."""


# ---- item sizes ---------------------------------------------------------------------------


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: 1 byte per two significant digits, plus 1 byte."""
    try:
        value = Decimal(text)
    except InvalidOperation as err:
        raise ValueError(f"not a DynamoDB number: {text!r}") from err
    digits = value.normalize().as_tuple().digits if value != 0 else (0,)
    significant = len(digits)
    return (significant + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one AttributeValue in the low-level wire shape ({"S": ...}, {"M": {...}}, ...)."""
    if len(value) != 1:
        raise ValueError(f"an AttributeValue has exactly one type key, got {sorted(value)}")
    ((kind, payload),) = value.items()
    if kind == "S":
        return len(str(payload).encode("utf-8"))
    if kind == "N":
        return number_size(str(payload))
    if kind == "B":
        return len(_raw_bytes(payload))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(member).encode("utf-8")) for member in payload)
    if kind == "NS":
        return sum(number_size(str(member)) for member in payload)
    if kind == "BS":
        return sum(len(_raw_bytes(member)) for member in payload)
    if kind == "L":
        return 3 + sum(1 + value_size(member) for member in payload)
    if kind == "M":
        return 3 + sum(1 + attribute_size(name, member) for name, member in payload.items())
    raise ValueError(f"unknown AttributeValue type {kind!r}")


def attribute_size(name: str, value: Mapping[str, Any]) -> int:
    return len(name.encode("utf-8")) + value_size(value)


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes of an item in the wire shape: the sum of its attribute names and values."""
    if not item:
        return 0
    return sum(attribute_size(name, value) for name, value in item.items())


def _raw_bytes(payload: Any) -> bytes:
    # botocore hands blobs to callers as bytes; a base64 string is what the wire carries.
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return base64.b64decode(str(payload))


# ---- unit arithmetic ------------------------------------------------------------------------


def read_units(total_bytes: int, *, consistent: bool) -> float:
    """Read units of ONE read operation over `total_bytes` (rounded up once to 4 KB)."""
    blocks = max(1, math.ceil(total_bytes / READ_UNIT_BYTES))
    return float(blocks) if consistent else blocks / 2


def item_read_units(sizes: Iterable[int], *, consistent: bool) -> float:
    """GetItem / BatchGetItem: every item is rounded up to 4 KB on its own, then summed."""
    return sum(read_units(size, consistent=consistent) for size in sizes)


def write_units(size_bytes: int) -> int:
    """Write units of one write of an item (or index entry) of `size_bytes`."""
    return max(1, math.ceil(size_bytes / WRITE_UNIT_BYTES))


# ---- table schema ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexSchema:
    name: str
    hash_key: str
    range_key: str | None
    projection_type: str = "ALL"
    non_key_attributes: tuple[str, ...] = ()

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)


@dataclass(frozen=True)
class TableSchema:
    """What the meter needs to know of a table: its keys and its GSIs' keys and projections."""

    name: str
    hash_key: str
    range_key: str | None
    indexes: tuple[IndexSchema, ...] = ()

    @property
    def key_attributes(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)

    def index(self, name: str) -> IndexSchema:
        for index in self.indexes:
            if index.name == name:
                return index
        raise MeterError(f"table {self.name!r} has no index {name!r}")

    def key_of(self, item: Mapping[str, Any]) -> dict[str, Any]:
        missing = [a for a in self.key_attributes if a not in item]
        if missing:
            raise MeterError(f"item lacks the table key attribute(s) {missing} of {self.name!r}")
        return {a: item[a] for a in self.key_attributes}

    def index_entry(
        self, index: IndexSchema, item: Mapping[str, Any] | None
    ) -> dict[str, Any] | None:
        """The entry `item` has in `index` (its projected attributes), or None when it has none.

        A GSI holds only the items that carry every one of its key attributes (sparse index).
        """
        if not item or any(a not in item for a in index.key_attributes):
            return None
        if index.projection_type == "ALL":
            return dict(item)
        keep = set(self.key_attributes) | set(index.key_attributes)
        if index.projection_type == "INCLUDE":
            keep |= set(index.non_key_attributes)
        return {name: value for name, value in item.items() if name in keep}

    @classmethod
    def from_create_kwargs(cls, kwargs: Mapping[str, Any]) -> TableSchema:
        """From boto3 `create_table` kwargs (devkit.schema.table_create_kwargs)."""
        hash_key, range_key = _key_schema(kwargs["KeySchema"])
        indexes = []
        for index in kwargs.get("GlobalSecondaryIndexes", []):
            index_hash, index_range = _key_schema(index["KeySchema"])
            projection = index.get("Projection", {})
            indexes.append(
                IndexSchema(
                    name=index["IndexName"],
                    hash_key=index_hash,
                    range_key=index_range,
                    projection_type=projection.get("ProjectionType", "ALL"),
                    non_key_attributes=tuple(projection.get("NonKeyAttributes", ())),
                )
            )
        return cls(
            name=kwargs["TableName"],
            hash_key=hash_key,
            range_key=range_key,
            indexes=tuple(indexes),
        )

    @classmethod
    def from_template(cls, template: Mapping[str, Any], table_name: str) -> TableSchema:
        """From the CDK-synthesised template: the meter prices the table that deploys."""
        from devkit.schema import table_create_kwargs

        return cls.from_create_kwargs(table_create_kwargs(template, table_name))


def _key_schema(elements: Sequence[Mapping[str, str]]) -> tuple[str, str | None]:
    hash_key = next(e["AttributeName"] for e in elements if e["KeyType"] == "HASH")
    range_key = next((e["AttributeName"] for e in elements if e["KeyType"] == "RANGE"), None)
    return hash_key, range_key


def key_text(value: Mapping[str, Any] | None) -> str:
    """A partition key value as text: the string, the number, or base64 of the bytes."""
    if not value:
        return ""
    ((kind, payload),) = value.items()
    if kind == "B":
        return base64.b64encode(_raw_bytes(payload)).decode("ascii")
    return str(payload)


# ---- pricing (pure) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    """Capacity one request consumed on one partition key of the table or of an index."""

    target: str
    partition_key: str
    rcu: float = 0.0
    wcu: float = 0.0


def write_charges(
    schema: TableSchema,
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    *,
    condition_failed: bool = False,
    key: Mapping[str, Any] | None = None,
) -> list[Charge]:
    """The write units of one PutItem/UpdateItem/DeleteItem that turned `old` into `new`.

    old None: the item did not exist; new None: it was deleted. A failed conditional write
    changes nothing: it costs the base table the existing item's size, or one unit when there
    is no item. `key` (the request's table key) locates a write that found no item at all.
    """
    if condition_failed or (not old and not new):
        located = old or new or key
        if not located:
            raise MeterError("a write that changed nothing needs the request's key")
        units = write_units(item_size(old)) if old else 1
        return [Charge(schema.name, key_text(located[schema.hash_key]), wcu=units)]
    reference = new or old
    assert reference is not None
    base = write_units(max(item_size(old), item_size(new)))
    charges = [Charge(schema.name, key_text(reference[schema.hash_key]), wcu=base)]
    for index in schema.indexes:
        before = schema.index_entry(index, old)
        after = schema.index_entry(index, new)
        if before is None and after is None:
            continue
        if before is None and after is not None:
            charges.append(_index_write(index, after))
        elif after is None and before is not None:
            charges.append(_index_write(index, before))
        elif before is not None and after is not None:
            keys_moved = any(before[a] != after[a] for a in index.key_attributes)
            if keys_moved:
                # Two writes: delete under the old key, put under the new one.
                charges.append(_index_write(index, before))
                charges.append(_index_write(index, after))
            elif before != after:
                size = max(item_size(before), item_size(after))
                charges.append(
                    Charge(index.name, key_text(after[index.hash_key]), wcu=write_units(size))
                )
    return charges


def _index_write(index: IndexSchema, entry: Mapping[str, Any]) -> Charge:
    return Charge(index.name, key_text(entry[index.hash_key]), wcu=write_units(item_size(entry)))


def query_charge(
    target: str, partition_key: str, evaluated: Iterable[Mapping[str, Any]], *, consistent: bool
) -> Charge:
    """One Query page: the sizes of every item it read, summed, rounded up to 4 KB once."""
    total = sum(item_size(item) for item in evaluated)
    return Charge(target, partition_key, rcu=read_units(total, consistent=consistent))


def scan_charges(
    target: str, hash_key: str, evaluated: Sequence[Mapping[str, Any]], *, consistent: bool
) -> list[Charge]:
    """One Scan page, priced as one read and shared among the partition keys it read by bytes.

    DynamoDB rounds a Scan page once; which partition served which bytes is only known by key,
    so each key is attributed its share of the page's units in proportion to its bytes.
    """
    by_key: dict[str, int] = defaultdict(int)
    for item in evaluated:
        by_key[key_text(item.get(hash_key))] += item_size(item)
    total = sum(by_key.values())
    units = read_units(total, consistent=consistent)
    if not by_key:
        return [Charge(target, "", rcu=units)]
    return [Charge(target, key, rcu=units * size / total) for key, size in by_key.items()]


_EQUALITY = re.compile(r"([#:\w.-]+)\s*=\s*([#:\w.-]+)")


def query_partition_key(params: Mapping[str, Any], hash_key: str) -> str | None:
    """The partition key value a Query addresses, read from its key condition."""
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    expression = params.get("KeyConditionExpression")
    if expression:
        for left, right in _EQUALITY.findall(expression):
            for name, placeholder in ((left, right), (right, left)):
                if names.get(name, name) == hash_key and placeholder in values:
                    return key_text(values[placeholder])
    conditions = params.get("KeyConditions") or {}
    condition = conditions.get(hash_key)
    if condition and condition.get("ComparisonOperator") == "EQ":
        return key_text(condition["AttributeValueList"][0])
    return None


# ---- accounting -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLoad:
    """One partition key's load over a metered run."""

    target: str
    partition_key: str
    total_rcu: float
    total_wcu: float
    peak_rcu: float
    peak_wcu: float
    peak_rcu_second: int | None
    peak_wcu_second: int | None
    requests: int

    @property
    def total_units(self) -> float:
        return self.total_rcu + self.total_wcu

    def to_json(self) -> dict[str, Any]:
        return {
            "partitionKey": self.partition_key,
            "totalRcu": round(self.total_rcu, 3),
            "totalWcu": round(self.total_wcu, 3),
            "peakRcu": round(self.peak_rcu, 3),
            "peakWcu": round(self.peak_wcu, 3),
            "peakRcuSecond": self.peak_rcu_second,
            "peakWcuSecond": self.peak_wcu_second,
            "requests": self.requests,
        }


@dataclass(frozen=True)
class LoadSummary:
    """The load of one table or index over a metered run, and how close it came to the ceiling.

    hottest_key_share: the hottest key's share of all capacity units (RCU + WCU) the target
    consumed, a fraction of 1. peak_rcu_per_key / peak_wcu_per_key: the highest per-second
    load any single partition key took. headroom: how many times the traffic could grow before
    that key reaches 3,000 RCU/s or 1,000 WCU/s, whichever comes first.
    """

    target: str
    partitions: tuple[PartitionLoad, ...]
    seconds: int

    @property
    def total_rcu(self) -> float:
        return sum(p.total_rcu for p in self.partitions)

    @property
    def total_wcu(self) -> float:
        return sum(p.total_wcu for p in self.partitions)

    @property
    def hottest(self) -> PartitionLoad | None:
        return max(self.partitions, key=lambda p: (p.total_units, p.partition_key), default=None)

    @property
    def hottest_key_share(self) -> float:
        total = self.total_rcu + self.total_wcu
        hottest = self.hottest
        return hottest.total_units / total if hottest and total else 0.0

    @property
    def hottest_read_share(self) -> float:
        total = self.total_rcu
        return max((p.total_rcu for p in self.partitions), default=0.0) / total if total else 0.0

    @property
    def hottest_write_share(self) -> float:
        total = self.total_wcu
        return max((p.total_wcu for p in self.partitions), default=0.0) / total if total else 0.0

    @property
    def peak_rcu_per_key(self) -> float:
        return max((p.peak_rcu for p in self.partitions), default=0.0)

    @property
    def peak_wcu_per_key(self) -> float:
        return max((p.peak_wcu for p in self.partitions), default=0.0)

    @property
    def read_headroom(self) -> float | None:
        peak = self.peak_rcu_per_key
        return PARTITION_RCU_CEILING / peak if peak else None

    @property
    def write_headroom(self) -> float | None:
        peak = self.peak_wcu_per_key
        return PARTITION_WCU_CEILING / peak if peak else None

    @property
    def headroom(self) -> float | None:
        candidates = [h for h in (self.read_headroom, self.write_headroom) if h is not None]
        return min(candidates) if candidates else None

    def to_json(self) -> dict[str, Any]:
        hottest = self.hottest
        return {
            "target": self.target,
            "hottestKey": hottest.partition_key if hottest else None,
            "hottestKeyShare": round(self.hottest_key_share, 6),
            "hottestKeyReadShare": round(self.hottest_read_share, 6),
            "hottestKeyWriteShare": round(self.hottest_write_share, 6),
            "peakRcuPerKey": round(self.peak_rcu_per_key, 3),
            "peakWcuPerKey": round(self.peak_wcu_per_key, 3),
            "readHeadroom": _round_or_none(self.read_headroom),
            "writeHeadroom": _round_or_none(self.write_headroom),
            "headroom": _round_or_none(self.headroom),
            "totalRcu": round(self.total_rcu, 3),
            "totalWcu": round(self.total_wcu, 3),
            "partitionKeys": len(self.partitions),
            "seconds": self.seconds,
            "partitions": [p.to_json() for p in self.partitions],
        }


def _round_or_none(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


class LoadLedger:
    """Capacity units per (target, partition key, second). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._units: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(dict)
        self._requests: dict[tuple[str, str], int] = defaultdict(int)
        self._seconds: set[int] = set()

    def add(self, second: int, charges: Iterable[Charge]) -> None:
        with self._lock:
            self._seconds.add(second)
            for charge in charges:
                key = (charge.target, charge.partition_key)
                cell = self._units[key].setdefault(second, [0.0, 0.0])
                cell[0] += charge.rcu
                cell[1] += charge.wcu
                self._requests[key] += 1

    def targets(self) -> list[str]:
        with self._lock:
            return sorted({target for target, _ in self._units})

    def series(self, target: str) -> dict[str, dict[int, tuple[float, float]]]:
        """partition key -> second -> (RCU, WCU) for one target."""
        with self._lock:
            return {
                key: {second: (cell[0], cell[1]) for second, cell in seconds.items()}
                for (t, key), seconds in self._units.items()
                if t == target
            }

    def summary(self, target: str) -> LoadSummary:
        with self._lock:
            partitions = []
            for (t, key), seconds in self._units.items():
                if t != target:
                    continue
                peak_rcu_second = max(seconds, key=lambda s: (seconds[s][0], -s))
                peak_wcu_second = max(seconds, key=lambda s: (seconds[s][1], -s))
                peak_rcu = seconds[peak_rcu_second][0]
                peak_wcu = seconds[peak_wcu_second][1]
                partitions.append(
                    PartitionLoad(
                        target=target,
                        partition_key=key,
                        total_rcu=sum(cell[0] for cell in seconds.values()),
                        total_wcu=sum(cell[1] for cell in seconds.values()),
                        peak_rcu=peak_rcu,
                        peak_wcu=peak_wcu,
                        peak_rcu_second=peak_rcu_second if peak_rcu else None,
                        peak_wcu_second=peak_wcu_second if peak_wcu else None,
                        requests=self._requests[(t, key)],
                    )
                )
            partitions.sort(key=lambda p: (-p.total_units, p.partition_key))
            return LoadSummary(
                target=target, partitions=tuple(partitions), seconds=len(self._seconds)
            )


# ---- the botocore hooks ---------------------------------------------------------------------


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
        if operation in READ_OPERATIONS or operation in WRITE_OPERATIONS:
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
        if operation == "BatchGetItem":
            return None if error else self._price_batch_get(params, parsed)
        if operation == "BatchWriteItem":
            return None if error else self._price_batch_write(pending, parsed)
        if params.get("TableName") != self.schema.name:
            return None
        if operation in WRITE_OPERATIONS:
            ((key, key_attributes),) = self._write_keys(pending).items()
            old = pending.old_items.get(key)
            if error == "ConditionalCheckFailedException":
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


def _key_tuple(schema: TableSchema, key: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(key_text(key.get(a)) for a in schema.key_attributes)


def _write_request_key(schema: TableSchema, request: Mapping[str, Any]) -> dict[str, Any]:
    if "PutRequest" in request:
        return schema.key_of(request["PutRequest"]["Item"])
    return dict(request["DeleteRequest"]["Key"])


# ---- a virtual clock --------------------------------------------------------------------------


class VirtualClock:
    """The replay's clock: a second counter the driver advances; the meter reads it."""

    def __init__(self, start: int = 0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return float(self._now)

    def set(self, second: int) -> None:
        with self._lock:
            self._now = second
