"""Which index keys carry saga rows, when the control record cannot say: the guard of the first
`phase set migrating` and `phase restore` with no history left (docs/control-contract.md,
"Missing or unreadable record").

One Query per key (the legacy key and all 1,024 shard keys a layout can name), `Limit = 1`,
projected to the few attributes that name the row: each costs what a COUNT with `Limit = 1`
costs (0.5 read unit, eventually consistent) and returns the row to name. The keys are read in
parallel on a bounded pool and every read must answer: a failed one raises EnumerationError
naming it (never a partial "no rows"). The index is eventually consistent: a row stamped in the
last moments (a GSI propagates in well under a second, seconds at worst) can be missed; the
drift guard, which reads every key of the state each run, catches it after.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from saga_index.index import (
    LEGACY,
    MAX_SHARD_COUNT,
    InvalidInputError,
    Layout,
    Person,
    keys,
    names,
    shard,
)
from saga_index.layout_change.checks.expectations import RowRef
from saga_index.store import partition_rows, read_partitions

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

PROBE_WORKERS = 16
_NAMED = ("PK", "SK", "sagaId", "personId", "GSI4PK", "GSI4SK")
# Shard counts are powers of two from 1 to 1024 (docs/shard-contract.md).
_SHARD_COUNTS = tuple(1 << n for n in range(11))


@dataclass(frozen=True)
class RowsSeen:
    """One row (or none) per key read: `legacy` on the legacy key, `sharded` by shard number."""

    legacy: RowRef | None
    sharded: Mapping[int, RowRef] = field(default_factory=dict)
    requests: int = 0

    @property
    def any_sharded(self) -> bool:
        return bool(self.sharded)

    def describe_sharded(self, limit: int = 5) -> str:
        """The shard keys that carry rows, with one row each (at most `limit` named)."""
        numbers = sorted(self.sharded)
        named = ", ".join(
            f"{keys.sharded_gsi4pk(n)} ({self.sharded[n].pk})" for n in numbers[:limit]
        )
        more = f" and {len(numbers) - limit} more key(s)" if len(numbers) > limit else ""
        return f"{len(numbers)} shard key(s) carry rows: {named}{more}"


@dataclass(frozen=True)
class InferredLayout:
    """What the rows say: `layout` + `moving_to` to restore, or `problem` (ambiguous)."""

    layout: Layout | None = None
    moving_to: Layout | None = None
    problem: str | None = None
    detail: str = ""


def probe_keys(
    client: DynamoDBClient,
    table_name: str,
    *,
    index_name: str = names.INDEX_NAME,
    include_legacy: bool = True,
    from_shard: int = 0,
    to_shard: int = MAX_SHARD_COUNT,
    max_workers: int = PROBE_WORKERS,
) -> RowsSeen:
    """One row of each key that has any: the shard keys from `from_shard` up to, not including,
    `to_shard` (all 1,024 by default), and the legacy key when asked."""
    shard_keys = keys.all_shard_gsi4pks(MAX_SHARD_COUNT)[from_shard:to_shard]
    partitions = ([keys.LEGACY_GSI4PK] if include_legacy else []) + shard_keys

    def one_row(gsi4pk: str) -> RowRef | None:
        rows = partition_rows(
            client, table_name, gsi4pk, attributes=_NAMED, index_name=index_name, limit=1
        )
        return next((RowRef.of(row) for row in rows), None)

    found = read_partitions(
        partitions,
        one_row,
        max_workers=max_workers,
        thread_name_prefix="layout-probe",
        logger=log,
        failure_message="key probe failed on %s: %s",
    )
    sharded = {
        number: row
        for number, gsi4pk in enumerate(shard_keys, start=from_shard)
        if (row := found[gsi4pk]) is not None
    }
    return RowsSeen(legacy=found.get(keys.LEGACY_GSI4PK), sharded=sharded, requests=len(partitions))


def infer_layout(seen: RowsSeen) -> InferredLayout:
    """The state the rows name. No row on a shard key: never migrated (legacy, nothing to
    write). Rows on shard keys: N is the one power of two under which every row seen sits on
    its person's key (`shard(personId, N)`), which also puts every key seen below N; none or
    several such N is ambiguous. Rows on the legacy key as well (a writer that followed the
    lost record stamped it): migrating(N), which reads both and hides neither."""
    if not seen.any_sharded:
        return InferredLayout(layout=LEGACY, detail="no row on any shard key")
    highest = max(seen.sharded)
    routable = {
        number: row
        for number, row in seen.sharded.items()
        if isinstance(row.person_id, str) and _routable(row.person_id)
    }
    fits = [
        n
        for n in _SHARD_COUNTS
        if n > highest
        and all(shard(str(row.person_id), n) == number for number, row in routable.items())
    ]
    what = seen.describe_sharded()
    if not fits:
        return InferredLayout(
            problem=f"{what}; no shard count N puts every one of them on its person's key "
            "(misrouted rows?): run `saga-index drift --phase sharded --shards N` for the N "
            "you expect, and restore by hand",
            detail=what,
        )
    if len(fits) > 1:
        return InferredLayout(
            problem=f"{what}; they fit N = {', '.join(map(str, fits))} alike (too few rows to "
            "tell): restore by hand with the N the deployment used",
            detail=what,
        )
    sharded = Layout.sharded(fits[0])
    if seen.legacy is not None:
        return InferredLayout(
            layout=LEGACY,
            moving_to=sharded,
            detail=f"{what} (all on their keys under N = {fits[0]}) and the legacy key carries "
            f"rows too ({seen.legacy.pk}): migrating to {sharded}",
        )
    return InferredLayout(
        layout=sharded, detail=f"{what}, all on their keys under N = {fits[0]}: {sharded}"
    )


def _routable(person_id: str) -> bool:
    try:
        Person.of(person_id)
    except InvalidInputError:  # an unusable personId cannot vote on N
        return False
    return True


def shard_rows_refusal(seen: RowsSeen) -> str:
    """The detail of the first `phase set migrating`'s refusal: which keys carry rows."""
    return (
        f"{seen.describe_sharded()}, while the record says never migrated: the control "
        "partition was probably deleted. Restore it (saga-index phase restore) instead of "
        f"starting over ({seen.requests} queries read)"
    )


def probe_shard_keys(client: DynamoDBClient, table_name: str) -> RowsSeen:
    """One row of each of the 1,024 shard keys that has any, the legacy key left out: what the
    first `phase set` checks (a row on a shard key while the record says never migrated)."""
    return probe_keys(client, table_name, include_legacy=False)
