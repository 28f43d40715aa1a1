"""What the proxy holds per item and per table: each table's model (its keys, for pricing, and
its rules) and the item locks that keep a transaction's steps together."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass

from devkit.capacity.table_schema import TableSchema
from devkit.semantics.model import DynamoSemantics, ItemRef


@dataclass(frozen=True)
class TableModel:
    """One table as the proxy models it: its keys (for pricing) and its rules."""

    schema: TableSchema
    semantics: DynamoSemantics


class ItemLocks:
    """One lock per item, taken in a fixed order (no two holders wait on each other).

    A lock lives while someone holds or waits for it: the map never grows with the table."""

    def __init__(self) -> None:
        self._locks: dict[ItemRef, asyncio.Lock] = {}
        self._users: Counter[ItemRef] = Counter()

    @contextlib.asynccontextmanager
    async def hold(self, refs: Iterable[ItemRef]) -> AsyncIterator[None]:
        ordered = sorted(set(refs))
        for ref in ordered:
            self._users[ref] += 1
            self._locks.setdefault(ref, asyncio.Lock())
        acquired: list[ItemRef] = []
        try:
            for ref in ordered:
                await self._locks[ref].acquire()
                acquired.append(ref)
            yield
        finally:
            for ref in acquired:
                self._locks[ref].release()
            for ref in ordered:
                self._users[ref] -= 1
                if not self._users[ref]:
                    del self._users[ref]
                    del self._locks[ref]

    def __len__(self) -> int:
        return len(self._locks)
