"""The shard keys the state's readers do not read but a lost record's rows of the next two
splits would sit on (N .. 4N-1): probed every run, an occupied key read in full."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from saga_index.index import MAX_SHARD_COUNT, keys
from saga_index.layout_change.checks import probe_keys
from saga_index.layout_change.checks.drift._cursor import KeyProgress, ReadTracker
from saga_index.layout_change.checks.drift._report import ReadTally
from saga_index.layout_change.checks.drift._scan_check import probed_up_to
from saga_index.store import read_partitions
from saga_index.store.dynamo import KeyReadPacer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class BeyondReader(Protocol):
    """What the probe needs of the checker (DriftChecker is one)."""

    client: DynamoDBClient
    table_name: str
    index_name: str
    max_workers: int

    def tally_partition(
        self,
        gsi4pk: str,
        pacer: KeyReadPacer,
        deadline: float | None,
        progress: KeyProgress | None = None,
    ) -> ReadTally: ...


log = logging.getLogger(__name__)


def read_beyond(
    checker: BeyondReader,
    shard_count: int,
    pacer: KeyReadPacer,
    deadline: float | None,
    track: ReadTracker,
) -> ReadTally:
    """The shard keys N .. 4N-1, which no reader of the state reads (#16..#63 while legacy:
    where a lost record's rows of sharded(32) or sharded(64) sit): one Query with Limit 1
    per key, and for a key that has rows its exact COUNT and one page to name them. Every
    run, so the alarm's 2-of-3 sees them; ~0.5 read unit per key (3N Queries). Rows only on
    keys at or above 4N (a layout at least 8 times the state's, with very few rows below 4N)
    are the scan's: it counts them as stray, whose alarm pages on one scan. The probes are
    one request per key and are not paced; an occupied key's reads are, and with the guard's
    cursor (`track`) they resume across runs like the state's keys: a key an earlier run of
    the read began is read to its end even when this run's probe finds it empty."""
    tally = ReadTally()
    if shard_count >= MAX_SHARD_COUNT:
        return tally
    seen = probe_keys(
        checker.client,
        checker.table_name,
        index_name=checker.index_name,
        include_legacy=False,
        from_shard=shard_count,
        to_shard=probed_up_to(shard_count),
        max_workers=checker.max_workers,
    )
    tally.requests += seen.requests
    beyond = range(shard_count, probed_up_to(shard_count))
    begun = set() if track.cursor is None else set(track.cursor.reads)
    occupied = [
        keys.sharded_gsi4pk(n)
        for n in beyond
        if n in seen.sharded or f"read:{keys.sharded_gsi4pk(n)}" in begun
    ]
    if occupied:
        progress = {gsi4pk: track.progress(f"read:{gsi4pk}") for gsi4pk in occupied}
        found = read_partitions(
            occupied,
            lambda gsi4pk: checker.tally_partition(gsi4pk, pacer, deadline, progress[gsi4pk]),
            max_workers=checker.max_workers,
            thread_name_prefix="drift-beyond",
            logger=log,
            failure_message="drift read failed on %s: %s",
        )
        for gsi4pk in occupied:
            tally.merge(found[gsi4pk])
    return tally
