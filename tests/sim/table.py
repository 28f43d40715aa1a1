"""The simulated table: moto's in-process DynamoDB for the base table, and indexes of our own
that are eventually consistent (GSI4, and the sparse open-saga index: a row is in it only while
it carries OpenSagaPK; each index's changes are queued and made visible on their own).

Why moto for the base table: it evaluates condition and update expressions, TransactWriteItems
with ConditionCheck, parallel Scan segments and pagination as DynamoDB does (platform notes), so
the real code's writes are judged by a faithful engine. Why not moto's GSI: it reflects a key
change at once. Here every index change a base write causes is queued as a DELETE under the old
index key and a PUT under the new one, each visible after its own seeded delay, and a Query or
Scan naming an index is answered from what is visible. What is visible is kept in a moto table
per index (its "shadow") whose items are that index's visible entries, with the same index on
it: moto
then evaluates the real code's key conditions, filters, projections, COUNT and pagination on the
visible entries, including a row visible under two keys at once (its PUT landed before its
DELETE) or under none (the other way round).

Every request of a simulated process goes through `before-call` on that process's own client:
the thread parks (the scheduler decides when it runs), then a seeded fault may answer instead
(a throttle before the call; a lost answer after it reached the table), else the request runs
against the base table (or the visible index) and its answer is returned as DynamoDB's.

DynamoDB's conflict rules and per-key ceilings (devkit.semantics, the model the component tests
and bench/fence.py share; its adapter here is tests/sim/semantics.py) judge every request of
every process before it runs, on the virtual clock: a refused request is answered as DynamoDB
answers it and never reaches moto. An admitted TransactWriteItems takes two scheduler steps: it
marks its items ongoing and parks for the model's in-flight time (other processes run meanwhile
and meet its items), then it runs against moto and its items are free. What each request
consumed is charged to its partition keys from the rows as the table holds them (`mirror`), no
extra request.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError

from devkit.semantics.model import DEFAULT_IN_FLIGHT_SECONDS, Refusal
from devkit.semantics.wire import answer as refused
from saga_index.index import names
from tests.sim import moto_direct
from tests.sim.clock import VirtualTime
from tests.sim.requests import TABLE
from tests.sim.requests import describe as _describe
from tests.sim.requests import error as _error
from tests.sim.requests import snake as _snake
from tests.sim.requests import table_keys as _table_keys
from tests.sim.scheduler import Task
from tests.sim.semantics import SimSemantics

SHADOW_KEY = "SIMVISIBLEKEY"
# The table's two indexes, each eventually consistent on its own: GSI4 and the sparse open-saga
# index (only rows carrying OpenSagaPK are in it). name -> (partition key, sort key, shadow table)
INDEXES: dict[str, tuple[str, str, str]] = {
    names.INDEX_NAME: (names.INDEX_PARTITION_KEY, names.INDEX_SORT_KEY, "sim-visible-index"),
    names.OPEN_INDEX_NAME: (
        names.OPEN_INDEX_PARTITION_KEY,
        names.OPEN_INDEX_SORT_KEY,
        "sim-visible-open-index",
    ),
}
SHADOW = INDEXES[names.INDEX_NAME][2]
_SEP = "\x1f"
_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})

TableKey = tuple[str, str]
EntryKey = tuple[str, str, str, str]  # the index's partition key, sort key, PK, SK


@dataclass
class _IndexOp:
    visible_at: float
    seq: int
    entry: EntryKey
    item: dict[str, Any] | None  # None: a delete
    index: str = names.INDEX_NAME


@dataclass
class Faults:
    """What may go wrong with a request, by seed; off while quiescing.

    Throttles come in storms (a hot key for a few seconds), not as independent coin flips: a
    throttle here is what the caller sees after botocore's retries gave up, and a drift run or
    a completion check of a thousand requests must be able to pass between storms.
    """

    storm_throttle: float = 0.5  # per request of a process inside its storm
    lost_answer: float = 0.0  # per write: it landed, the caller sees an error
    # Per write of the control record's STATE item: it landed, its answer was lost (a timeout,
    # a dropped connection), botocore resent it and the resend was throttled. The caller sees
    # the ThrottlingException of a request botocore sent more than once (RetryAttempts 2), and
    # every identical resend for `resend_window` seconds is throttled before it is run.
    dropped_answer: float = 0.0
    resend_window: float = 30.0
    enabled: bool = True
    storms: dict[str, float] = field(default_factory=dict)  # process -> storm ends at
    # A dropped request's fingerprint -> until when its resends are throttled.
    resends: dict[str, float] = field(default_factory=dict)


@dataclass
class WriteRecord:
    """One base-table write that landed: when, by whom, and the row after it."""

    at: float
    process: str
    operation: str
    key: TableKey
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass
class SimTable:
    time: VirtualTime
    rng: random.Random
    max_index_delay: float = 3.0
    faults: Faults = field(default_factory=Faults)
    on_write: list[Callable[[WriteRecord], None]] = field(default_factory=list)
    in_flight: float = DEFAULT_IN_FLIGHT_SECONDS

    def __post_init__(self) -> None:
        self.judge = SimSemantics(self.time, in_flight=self.in_flight)
        self.semantics = self.judge.model
        # The table's own client: moto's handler answers it directly (tests/sim/moto_direct.py).
        # Its requests are the simulator's own or a simulated process's (which that process's
        # client validated already): botocore does not validate them again.
        self.raw = moto_direct.attach(
            boto3.client(
                "dynamodb",
                region_name="us-east-1",
                config=Config(
                    retries={"max_attempts": 1, "mode": "standard"}, parameter_validation=False
                ),
            )
        )
        # The base table has both indexes (DescribeTable shows the open one ACTIVE, as the open
        # index's readiness check wants); each shadow table has the one whose entries it holds.
        self._create(TABLE, ("PK", "SK"), tuple(INDEXES))
        for index, (_, _, shadow) in INDEXES.items():
            self._create(shadow, (SHADOW_KEY, None), (index,))
        self._pending: list[_IndexOp] = []
        self._seq = 0
        self._applied: dict[tuple[str, EntryKey], int] = {}
        # The entry each base row has in each index per the base table (what it converges to).
        self._entry_of: dict[str, dict[TableKey, EntryKey | None]] = {i: {} for i in INDEXES}
        # When each row's latest index change becomes fully visible.
        self.settles_at: dict[TableKey, float] = {}
        self.requests = 0
        self.control_writes = 0
        self.writes = 0
        self._visible: dict[str, set[EntryKey]] = {i: set() for i in INDEXES}
        # Every base row as the base table holds it (each write's answer keeps it current).
        self.mirror: dict[TableKey, dict[str, Any]] = {}

    def _create(self, name: str, key: tuple[str, str | None], indexes: tuple[str, ...]) -> None:
        hash_key, range_key = key
        attributes = {hash_key, *(a for i in indexes for a in INDEXES[i][:2])}
        schema = [{"AttributeName": hash_key, "KeyType": "HASH"}]
        if range_key is not None:
            attributes.add(range_key)
            schema.append({"AttributeName": range_key, "KeyType": "RANGE"})
        self.raw.create_table(
            TableName=name,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": "S"} for a in sorted(attributes)
            ],
            KeySchema=schema,
            GlobalSecondaryIndexes=[
                {
                    "IndexName": index,
                    "KeySchema": [
                        {"AttributeName": INDEXES[index][0], "KeyType": "HASH"},
                        {"AttributeName": INDEXES[index][1], "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
                for index in indexes
            ],
        )

    # ---- the clients of simulated processes -------------------------------------------------

    def client_for(self, process: str, *, faulty: bool = True) -> Any:
        """A botocore client whose every request goes through this table, parking the calling
        task first (a process's tasks share it, as a worker and its heartbeat thread share
        one). `faulty`: seeded faults may hit its requests."""
        client = boto3.client(
            "dynamodb",
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 1, "mode": "standard"}),
        )

        def keep_params(params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["sim_params"] = copy.deepcopy(dict(params))

        def answer(model: Any, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, Any]:
            operation = model.name
            params = context["sim_params"]
            task = Task.current()
            label = f"{operation} {_describe(params)}"
            if task is not None:
                task.park(label)
            return self.dispatch(process, operation, params, faulty=faulty, task=task)

        client.meta.events.register("before-parameter-build.dynamodb", keep_params)
        client.meta.events.register("before-call.dynamodb", answer)
        return client

    def dispatch(
        self,
        process: str,
        operation: str,
        params: dict[str, Any],
        *,
        faulty: bool,
        task: Task | None = None,
    ) -> tuple[AWSResponse, Any]:
        self.requests += 1
        self.propagate()
        faults = self.faults if faulty and self.faults.enabled else None
        storm = faults is not None and faults.storms.get(process, -1.0) > self.time.now
        if storm and faults is not None and self.rng.random() < faults.storm_throttle:
            return _error(400, "ThrottlingException", "simulated throttle (before the call)")
        resent = None if faults is None or not faults.resends else _fingerprint(operation, params)
        if (
            faults is not None
            and resent is not None
            and faults.resends.get(resent, -1.0) > self.time.now
        ):
            return _resent_throttle("simulated throttle of a resend (its first request landed)")
        request = self.judge.arrived(operation, params, self.mirror)
        verdict = self.judge.verdict(request, task)
        if isinstance(verdict, Refusal):
            return refused(verdict, operation)
        try:
            parsed = self._run(process, operation, params)
        except ClientError as err:
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
            return AWSResponse("https://sim", status, {}, None), err.response
        finally:
            if verdict is not None:
                self.semantics.finish(verdict)
        self.judge.charge(request, parsed, self.mirror)
        if faults is not None and operation in _WRITES and self.rng.random() < faults.lost_answer:
            return _error(500, "InternalServerError", "simulated lost answer (the write landed)")
        if (
            faults is not None
            and faults.dropped_answer
            and operation in _WRITES
            and _on_control_state(params)
            and self.rng.random() < faults.dropped_answer
        ):
            # Drawn only when the fault is on: every other seed's run stays what it was.
            faults.resends[_fingerprint(operation, params)] = self.time.now + faults.resend_window
            return _resent_throttle("simulated dropped answer (the write landed), resend throttled")
        parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = 200
        return AWSResponse("https://sim", 200, {}, None), parsed

    def _run(self, process: str, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        method = getattr(self.raw, _snake(operation))
        if "IndexName" in params and operation in ("Query", "Scan"):
            if operation == "Query" and self._visible_under(params) == 0:
                # Nothing visible under that key: the answer moto would give, without moto.
                return {"Items": [], "Count": 0, "ScannedCount": 0}
            shadow = dict(params, TableName=INDEXES[params["IndexName"]][2])
            response: dict[str, Any] = method(**shadow)
            for item in response.get("Items", []):
                item.pop(SHADOW_KEY, None)
            return response
        touched = _table_keys(operation, params) if params.get("TableName") == TABLE else []
        if operation == "TransactWriteItems":
            touched = _table_keys(operation, params)
        if not touched:
            return dict(method(**params))
        call = dict(params)
        # The row after an UpdateItem comes with its answer (asked for here, and removed from
        # the answer unless the caller asked for it itself), saving a read per write.
        wants_new = operation == "UpdateItem" and "ReturnValues" not in params
        if wants_new:
            call["ReturnValues"] = "ALL_NEW"
        response = dict(method(**call))
        for key in touched:
            if operation == "PutItem":
                after: dict[str, Any] | None = copy.deepcopy(params["Item"])
            elif operation == "UpdateItem" and params.get("ReturnValues", "ALL_NEW") == "ALL_NEW":
                after = copy.deepcopy(response.get("Attributes"))
            elif operation == "DeleteItem":
                after = None
            else:
                after = self._get(key)
            self._observe(process, operation, key, self.mirror.get(key), after)
        if wants_new:
            response.pop("Attributes", None)
        return response

    # ---- the base table -----------------------------------------------------------------------

    def _get(self, key: TableKey) -> dict[str, Any] | None:
        item = self.raw.get_item(
            TableName=TABLE, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}}, ConsistentRead=True
        ).get("Item")
        return item

    def scan_base(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {"TableName": TABLE, "ConsistentRead": True}
        while True:
            page = self.raw.scan(**request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def seed(self, item: dict[str, Any]) -> None:
        """A row written long before the simulation starts: its index entry is visible."""
        self.raw.put_item(TableName=TABLE, Item=item)
        key = (item["PK"]["S"], item["SK"]["S"])
        self.mirror[key] = copy.deepcopy(item)
        self.settles_at[key] = 0.0
        for index in INDEXES:
            entry = _entry(item, index)
            self._entry_of[index][key] = entry
            if entry is not None:
                self._apply(_IndexOp(0.0, self._next_seq(), entry, item, index))

    # ---- the index ------------------------------------------------------------------------------

    def _observe(
        self,
        process: str,
        operation: str,
        key: TableKey,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
    ) -> None:
        self.writes += 1
        if key[0] == names.CONTROL_PK:
            self.control_writes += 1
        if after is None:
            self.mirror.pop(key, None)
        else:
            self.mirror[key] = after
        if before == after:
            return
        now = self.time.now
        # GSI4 first, then the open index: a row that never carries OpenSagaPK draws no delay
        # for it, so a run that never stamps one is the run it was before the open index.
        self.settles_at[key] = max(self._queue(index, key, after, now) for index in INDEXES)
        record = WriteRecord(now, process, operation, key, before, after)
        for listener in self.on_write:
            listener(record)

    def _queue(self, index: str, key: TableKey, after: dict[str, Any] | None, now: float) -> float:
        """Queue `index`'s changes for one base write (a delete under the row's old entry, a put
        under its new one, each with its own delay); when both are visible."""
        old = self._entry_of[index].get(key)
        new = _entry(after, index) if after is not None else None
        settle = now
        if old is not None and old != new:
            at = now + self.rng.uniform(0.0, self.max_index_delay)
            self._pending.append(_IndexOp(at, self._next_seq(), old, None, index))
            settle = max(settle, at)
        if new is not None and after is not None:
            at = now + self.rng.uniform(0.0, self.max_index_delay)
            self._pending.append(_IndexOp(at, self._next_seq(), new, after, index))
            settle = max(settle, at)
        self._entry_of[index][key] = new
        return settle

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def propagate(self) -> None:
        """Make visible every index write whose delay has passed (in the order they became
        due; per index entry, a later write always wins over an earlier one)."""
        due = sorted(
            (op for op in self._pending if op.visible_at <= self.time.now),
            key=lambda op: (op.visible_at, op.seq),
        )
        if not due:
            return
        self._pending = [op for op in self._pending if op.visible_at > self.time.now]
        for op in due:
            self._apply(op)

    def _apply(self, op: _IndexOp) -> None:
        if self._applied.get((op.index, op.entry), 0) > op.seq:
            return
        self._applied[(op.index, op.entry)] = op.seq
        shadow = INDEXES[op.index][2]
        shadow_key = {SHADOW_KEY: {"S": _SEP.join(op.entry)}}
        if op.item is None:
            self.raw.delete_item(TableName=shadow, Key=shadow_key)
            self._visible[op.index].discard(op.entry)
        else:
            self.raw.put_item(TableName=shadow, Item={**op.item, **shadow_key})
            self._visible[op.index].add(op.entry)

    def visible(self, index: str) -> set[EntryKey]:
        """The entries of `index` a Query can see now."""
        return set(self._visible[index])

    def _visible_under(self, params: Mapping[str, Any]) -> int | None:
        """How many visible entries the Query's partition key has (None: not a plain `= :v`
        on the index's partition key, so moto decides)."""
        index = params.get("IndexName", names.INDEX_NAME)
        condition = params.get("KeyConditionExpression", "")
        names_ = params.get("ExpressionAttributeNames", {})
        head = condition.split(" AND ")[0].split("=")
        if len(head) != 2 or index not in INDEXES:
            return None
        name, value = head[0].strip(), head[1].strip()
        if names_.get(name, name) != INDEXES[index][0]:
            return None
        partition = params.get("ExpressionAttributeValues", {}).get(value, {}).get("S")
        if partition is None:
            return None
        return sum(1 for entry in self._visible[index] if entry[0] == partition)

    def settle(self) -> None:
        """Make every queued index write visible now (the end of a scenario)."""
        for op in sorted(self._pending, key=lambda op: (op.visible_at, op.seq)):
            self._apply(op)
        self._pending = []
        for key in self.settles_at:
            self.settles_at[key] = min(self.settles_at[key], self.time.now)

    @property
    def index_caught_up(self) -> bool:
        return not self._pending


def _entry(item: Mapping[str, Any], index: str) -> EntryKey | None:
    partition_key, sort_key, _ = INDEXES[index]
    pk, sk = item.get(partition_key), item.get(sort_key)
    if not (pk and sk and "S" in pk and "S" in sk):
        return None
    return (pk["S"], sk["S"], item["PK"]["S"], item["SK"]["S"])


def _fingerprint(operation: str, params: Mapping[str, Any]) -> str:
    """A request as its resends repeat it, byte for byte."""
    return operation + _SEP + json.dumps(params, sort_keys=True, default=str)


def _on_control_state(params: Mapping[str, Any]) -> bool:
    key = params.get("Key") or params.get("Item") or {}
    return key.get("PK") == {"S": names.CONTROL_PK} and key.get("SK") == {"S": "STATE"}


def _resent_throttle(message: str) -> tuple[AWSResponse, dict[str, Any]]:
    """The ThrottlingException botocore ends with after resending a request (RetryAttempts:
    the first attempt got no answer, the resend was throttled)."""
    response, parsed = _error(400, "ThrottlingException", message)
    parsed["ResponseMetadata"]["RetryAttempts"] = 2
    return response, parsed
