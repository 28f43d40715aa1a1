"""moto's TransactWriteItems, its rollback kept to the items the transaction names.

moto backs a transaction up by deep-copying every table it names before it runs (twice for a
re-stamp: its Update and its fence slot's ConditionCheck name the same table), so one
transaction costs as much as the table is large: on a table of 500 rows of 1.3 KB that copy
was about two thirds of a simulated run's CPU. Only the named items can change (moto runs each
action as its own put, update or delete of one key, and a transaction names a key once), so
here only they are backed up, and put back when moto rolls back. moto's own code runs the
transaction; the backup of whole tables is skipped (its copy of a table is the table itself,
which moto's rollback then assigns to itself), and the rollback is this one's, then moto's
error propagates as it was. tests/sim/test_moto_direct.py checks that a cancelled
transaction leaves the table as it was.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from moto.dynamodb import models
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

_Backup = tuple[Table, DynamoType, DynamoType | None, Any]


def _deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """copy.deepcopy, but a table is its own copy (its items are backed up one by one)."""
    if isinstance(value, Table):
        return value
    return copy.deepcopy(value, memo)


def _backup(backend: Any, transact_items: list[dict[str, Any]]) -> list[_Backup]:
    """Each named item as it is now (None: absent), where its key can be read; a key moto
    refuses is refused before anything is written."""
    saved: list[_Backup] = []
    for entry in transact_items:
        try:
            _, action = next(iter(entry.items()))
            table = backend.tables[action["TableName"]]
            key = action["Item"] if "Item" in action else action["Key"]
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            current = table.get_item(hash_key, range_key)
        except Exception:  # noqa: BLE001, S112 - moto's own run refuses it, as it would
            continue
        saved.append((table, hash_key, range_key, copy.deepcopy(current)))
    return saved


def _restore(saved: list[_Backup]) -> None:
    for table, hash_key, range_key, item in reversed(saved):
        if range_key is None:
            if item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
        elif item is None:
            table.items.get(hash_key, {}).pop(range_key, None)
        else:
            table.items[hash_key][range_key] = item


@contextmanager
def keyed_rollback() -> Iterator[None]:
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = _backup(self, transact_items)
        try:
            original(self, transact_items)
        except Exception:
            _restore(saved)
            raise

    shim = types.SimpleNamespace(deepcopy=_deepcopy)
    with (
        mock.patch.object(models, "copy", shim),
        mock.patch.object(models.DynamoDBBackend, "transact_write_items", transact_write_items),
    ):
        yield
