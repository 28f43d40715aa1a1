"""Restore from rows, checked against every row that could hide: the one-row-per-key probe
(checks/layout_probe.py) names a layout, and this reads the rest of the keys where rows of
another layout could sit unseen (docs/control-contract.md, "Missing or unreadable record").

The probe reads one row per key. When it names sharded(N), rows of sharded(N/2) can still sit
on the keys below N/2: a split N/2 -> N not yet finished leaves rows there whose key under N is
the upper one, and a merge N -> N/2 moves rows onto them. Those keys are read to their end
(projected to the row's keys and personId); what they hold decides:

  every row on its sharded(N) key     sharded(N) (or migrating(N)), as the probe said
  rows on their sharded(N/2) key too  resharding(N/2 -> N): reads both, hides neither; the
                                      rows cannot tell a split from a merge, the forward
                                      backfill finishes it toward N, and the abort
                                      (`phase set resharding --shards N/2`) turns it around
  rows of a third layout, or rows on  refused, naming the rows: no single move shows them all
  neither key of their person
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from saga_index.index import InvalidInputError, Layout, Person, keys, names
from saga_index.layout_change.checks import PROBE_WORKERS, InferredLayout
from saga_index.layout_change.checks.drift import RowRef
from saga_index.store import partition_rows, read_partitions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

KeyRows = Callable[[Sequence[str]], Mapping[str, Sequence[RowRef]]]
_NAMED = ("PK", "SK", "sagaId", "personId", "GSI4PK")


def rows_on_keys(
    client: DynamoDBClient, table_name: str, index_name: str = names.INDEX_NAME
) -> KeyRows:
    """Every row of each key given (one paged index Query per key, projected to the row's keys
    and personId), read in parallel on a bounded pool; a failed key fails the whole read."""

    def read(gsi4pk: str) -> list[RowRef]:
        rows = partition_rows(client, table_name, gsi4pk, attributes=_NAMED, index_name=index_name)
        return [RowRef.of(row) for row in rows]

    def read_all(gsi4pks: Sequence[str]) -> Mapping[str, Sequence[RowRef]]:
        return read_partitions(
            list(gsi4pks),
            read,
            max_workers=PROBE_WORKERS,
            thread_name_prefix="restore-rows",
            logger=log,
            failure_message="reading the rows of %s failed: %s",
        )

    return read_all


def check_rows_layout(inferred: InferredLayout, key_rows: KeyRows) -> InferredLayout:
    """`inferred` (the probe's answer) when every row below N/2 sits on its sharded(N) key; the
    re-shard between sharded(N/2) and sharded(N) when some sit on their sharded(N/2) key; a
    problem naming the rows when no single move reads them all. See the module docstring."""
    if inferred.problem is not None:
        return inferred
    sharded = inferred.moving_to or inferred.layout
    n = None if sharded is None else sharded.shard_count
    if n is None or n < 2:
        return inferred
    half = Layout.sharded(n // 2)
    read = key_rows([keys.sharded_gsi4pk(k) for k in range(n // 2)])
    rows = [row for found in read.values() for row in found]
    elsewhere = [row for row in rows if _person_key(row, n) not in (None, row.gsi4pk)]
    checked = f"; every row of the {n // 2} key(s) below {n // 2} read ({len(rows)} row(s))"
    if not elsewhere:
        return replace(inferred, detail=inferred.detail + checked)
    on_half = [row for row in elsewhere if _person_key(row, n // 2) == row.gsi4pk]
    stray = [row for row in elsewhere if row not in on_half]
    if stray or inferred.moving_to is not None:
        named = stray or on_half
        why = (
            f"{len(stray)} row(s) on a key that is neither their sharded({n}) nor their "
            f"sharded({n // 2}) key"
            if stray
            else f"the legacy key carries rows too, and {len(on_half)} row(s) sit on their "
            f"sharded({n // 2}) key, not their sharded({n}) key: three layouts"
        )
        return InferredLayout(
            problem=f"{inferred.detail}{checked}: {why} (e.g. {_examples(named)}); no single "
            "move reads them all: restore by hand after `saga-index drift` for each layout",
            detail=inferred.detail,
        )
    return InferredLayout(
        layout=half,
        moving_to=sharded,
        detail=f"{inferred.detail}{checked}: {len(on_half)} of them sit on their {half} key "
        f"(e.g. {_examples(on_half)}), not their {sharded} key: the rows are between "
        f"{half} and {sharded}, so resharding {half} -> {sharded} (it reads both; a split "
        f"and a merge leave the same rows: the forward backfill finishes it toward {sharded}, "
        f"`phase set resharding --shards {n // 2}` turns it around)",
    )


def _person_key(row: RowRef, shard_count: int) -> str | None:
    """The row's person's key under sharded(shard_count); None when its personId cannot be
    routed (such a row does not vote, as in the probe)."""
    if not isinstance(row.person_id, str):
        return None
    try:
        return Person.of(row.person_id).shard_gsi4pk(shard_count)
    except InvalidInputError:
        return None


def _examples(rows: Sequence[RowRef], limit: int = 3) -> str:
    return ", ".join(f"{row.pk} on {row.gsi4pk}" for row in rows[:limit])
