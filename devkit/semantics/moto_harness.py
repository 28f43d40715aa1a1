"""In-process moto as the semantics layer's runs need it: threads, and transactions whose cost
does not grow with the table.

  one_request_at_a_time  moto answers on the calling thread and is not thread-safe: requests
                         are served one at a time, in the order they came. threading.RLock is
                         not fair: with 64 segment threads asking at once, the lease keeper's
                         heartbeat thread could wait for seconds, and a run lose its lease to
                         the harness rather than to DynamoDB's rules
  cheap_transactions     moto deep-copies every table a TransactWriteItems includes before
                         running it, to roll back a cancelled one: 40 ms a transaction at 200
                         rows and 190 ms at 1,000 on a 2-core machine, where an UpdateItem takes
                         8 ms. Here the copy holds only the items the transaction includes, so a
                         transaction costs about what an UpdateItem does, as on DynamoDB
"""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
from collections import defaultdict, deque
from collections.abc import Iterator
from typing import Any

from moto.core.botocore_stubber import BotocoreStubber
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType


class _FifoLock:
    """A re-entrant lock granted in arrival order."""

    def __init__(self) -> None:
        self._turns = threading.Condition()
        self._queue: deque[object] = deque()
        self._owner: int | None = None
        self._depth = 0

    def __enter__(self) -> None:
        me = threading.get_ident()
        with self._turns:
            if self._owner == me:
                self._depth += 1
                return
            ticket = object()
            self._queue.append(ticket)
            while self._owner is not None or self._queue[0] is not ticket:
                self._turns.wait()
            self._queue.popleft()
            self._owner, self._depth = me, 1

    def __exit__(self, *_: object) -> None:
        with self._turns:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._turns.notify_all()


@contextlib.contextmanager
def one_request_at_a_time() -> Iterator[None]:
    """Serve moto's requests one at a time, in the order they came (inside the test suite,
    around tests/conftest.py's own lock)."""
    original = BotocoreStubber.process_request
    lock = _FifoLock()

    def serialised(self: BotocoreStubber, request: Any) -> Any:
        with lock:
            return original(self, request)

    BotocoreStubber.process_request = serialised  # type: ignore[method-assign]
    try:
        yield
    finally:
        BotocoreStubber.process_request = original  # type: ignore[method-assign]


def _snapshot(table: Any, touched: list[tuple[Any, Any]], memo: Any) -> Any:
    """A rollback copy of `table` that deep-copies only the items a transaction includes."""
    del memo
    clone = copy.copy(table)
    clone.__dict__.pop("__deepcopy__", None)
    if table.range_key_attr is not None:
        clone.items = defaultdict(dict, {h: dict(r) for h, r in table.items.items()})
        for hash_value, range_value in touched:
            if hash_value in table.items and range_value in table.items[hash_value]:
                original = table.items[hash_value][range_value]
                clone.items[hash_value][range_value] = copy.deepcopy(original)
    else:
        clone.items = defaultdict(dict, table.items)
        for hash_value, _ in touched:
            if hash_value in table.items:
                clone.items[hash_value] = copy.deepcopy(table.items[hash_value])
    return clone


@contextlib.contextmanager
def cheap_transactions() -> Iterator[None]:
    """moto's TransactWriteItems with a rollback copy of the included items only."""
    original = DynamoDBBackend.transact_write_items

    def transact(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        touched: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
        for entry in transact_items:
            ((kind, action),) = entry.items()
            table = self.tables.get(action.get("TableName"))
            if table is None:
                continue
            key = action["Item"] if kind == "Put" else action["Key"]
            hash_value = DynamoType(key[table.hash_key_attr])
            range_attr = table.range_key_attr
            range_value = DynamoType(key[range_attr]) if range_attr in key else None
            touched[action["TableName"]].append((hash_value, range_value))
        for name, items in touched.items():
            table = self.tables[name]
            table.__dict__["__deepcopy__"] = functools.partial(_snapshot, table, items)
        try:
            original(self, transact_items)
        finally:
            for table in self.tables.values():
                table.__dict__.pop("__deepcopy__", None)

    DynamoDBBackend.transact_write_items = transact  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]
