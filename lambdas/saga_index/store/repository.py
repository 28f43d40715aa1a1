"""The saga repository: reads of the renewal-saga index that follow a routing (ADR-0085,
docs/control-contract.md "Routing").

The routing comes from the control record (`routing_for(provider.state())`, once per
invocation), or from a phase and N (`layouts_for_phase`: the CLI's read-only overrides, tests).

Reads
  by person    `routing.read_keys(person)`, one Query each, sequentially, source first: one
               request when both layouts give the person the same key, two while rows move.
  enumerations `routing.enumeration_stages()`, stage by stage; the keys of one stage in
               parallel on a bounded pool, each to its last page. Merged, de-duplicated on the
               table key (the later read wins), in a deterministic order. Complete or
               EnumerationError naming every failed partition of the stage that failed.

Why the source first: a row being re-stamped leaves its source key and arrives under its target
key. Reading the source key to its end before the target key is read means a row that left the
source during the first read is normally found by the second. This NARROWS the window in which a
moving row is missed; it does not close it: DynamoDB propagates a GSI key change as two index
writes (a delete under the old key, a put under the new one), asynchronously, and does not promise
they become visible together, so a read can still miss a row that is between its two keys. The
damage is bounded to that read: the row is in the base table all along and the next read sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import keys, names
from saga_index.index.errors import EnumerationError, InvalidInputError, InvalidKeyError
from saga_index.index.layout import StatePhase, layouts_for_phase, phase_of
from saga_index.index.model import OPEN_STATES, Phase
from saga_index.index.shard import validate_shard_count
from saga_index.layout_change.record.routing import Routing
from saga_index.store.dynamo.codec import deserialize
from saga_index.store.dynamo.pages import query_pages
from saga_index.store.dynamo.target import IndexTarget

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 16

_Read = TypeVar("_Read")


def resolve_routing(
    routing: Routing | None, phase: Phase | StatePhase | str | None, shard_count: int
) -> Routing:
    """The routing a reader or writer follows: `routing` as given, or the one a process in
    `phase` with N = `shard_count` follows. Exactly one of the two must be given."""
    if (routing is None) == (phase is None):
        raise InvalidInputError("give exactly one of routing or phase (with shard_count)")
    if routing is not None:
        return routing
    validate_shard_count(shard_count)
    return Routing.between(*layouts_for_phase(str(Phase.parse(phase)), shard_count))


def routing_phase(routing: Routing) -> StatePhase:
    """The name of the state a routing follows (`resharding` included)."""
    return phase_of(routing.source, routing.target if routing.moving else None)


@dataclass(frozen=True)
class ReadResult:
    """Rows as stored (deserialised), and what reading them cost."""

    items: list[dict[str, Any]]
    requests: int
    partitions: tuple[str, ...]
    anomalies: int = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class _PartitionRead:
    items: list[dict[str, Any]]
    requests: int


class SagaRepository:
    """Reads sagas through GSI4 along one routing. The client is injected (thread-safe).

    Give `routing` (from the control record), or `phase` (+ `shard_count`) for the routing a
    reader in that phase follows; exactly one of the two.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        routing: Routing | None = None,
        phase: Phase | StatePhase | str | None = None,
        shard_count: int = names.DEFAULT_SHARD_COUNT,
        index_name: str = names.INDEX_NAME,
        max_workers: int = DEFAULT_MAX_WORKERS,
        page_size: int | None = None,
    ) -> None:
        if not table_name:
            raise ValueError("table_name is required")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if page_size is not None and page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self.routing = resolve_routing(routing, phase, shard_count)
        # The N of a phase as given; a routing's own: the largest shard count it names.
        counts = [x.shard_count for x in (self.routing.source, self.routing.target)]
        named = max((n for n in counts if n is not None), default=shard_count)
        self.target = IndexTarget(
            client, table_name, index_name, shard_count if phase is not None else named
        )
        self.max_workers = max_workers
        self.page_size = page_size

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        routing: Routing | None = None,
        phase: Phase | StatePhase | str | None = None,
        max_workers: int = DEFAULT_MAX_WORKERS,
        page_size: int | None = None,
    ) -> SagaRepository:
        """The target's table and index; with `phase`, the target's N (a `routing` brings
        its own layouts)."""
        return cls(
            target.client,
            target.table_name,
            routing=routing,
            phase=phase,
            shard_count=target.shard_count,
            index_name=target.index_name,
            max_workers=max_workers,
            page_size=page_size,
        )

    @property
    def phase(self) -> StatePhase:
        return routing_phase(self.routing)

    @property
    def client(self) -> DynamoDBClient:
        return self.target.client

    @property
    def table_name(self) -> str:
        return self.target.table_name

    @property
    def index_name(self) -> str:
        return self.target.index_name

    # ---- public reads -------------------------------------------------------------------

    def get_sagas_by_person(self, person_id: str) -> ReadResult:
        """Only this person's sagas: begins_with(personId + "#") also matches person "p-1#x"
        when asked for "p-1", so rows are kept only when their GSI4SK parses back to person_id."""
        prefix = keys.person_prefix(person_id)
        partitions = self.routing.read_keys(person_id)
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        for partition in partitions:  # sequential on purpose: the source strictly first
            read = self._query_partition(partition, prefix=prefix)
            requests += read.requests
            for item in read.items:
                if _sort_key_person(item) == person_id:
                    # A row seen under both keys moved between the reads: the later read wins.
                    merged[keys.table_key_of(item)] = item
        return self._result(merged, requests, partitions)

    def get_all_sagas(self) -> ReadResult:
        return self._enumerate(open_only=False)

    def get_all_open_sagas(self) -> ReadResult:
        return self._enumerate(open_only=True)

    # ---- internals ----------------------------------------------------------------------

    def _enumerate(self, *, open_only: bool) -> ReadResult:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        # Each stage is read to its end before the next starts: see the module docstring.
        for stage in self.routing.enumeration_stages():
            requests += self._read_stage_into(merged, stage, open_only=open_only)
        return self._result(merged, requests, self.routing.enumeration_keys())

    def _read_stage_into(
        self,
        merged: dict[tuple[str, str], dict[str, Any]],
        partitions: Sequence[str],
        *,
        open_only: bool,
    ) -> int:
        reads = read_partitions(
            partitions,
            lambda partition: self._query_partition(partition, open_only=open_only),
            max_workers=self.max_workers,
            thread_name_prefix="saga-shard",
            logger=log,
            failure_message="saga enumeration failed on %s: %s",
        )
        requests = 0
        for partition in partitions:
            read = reads[partition]
            requests += read.requests
            # A row seen under two keys moved between the reads: the later read wins.
            merged.update((keys.table_key_of(i), i) for i in read.items)
        return requests

    def _query_partition(
        self, gsi4pk: str, *, prefix: str | None = None, open_only: bool = False
    ) -> _PartitionRead:
        """One partition read to its last page (a Query returns at most 1 MB per page)."""
        attribute_names = {"#pk": names.INDEX_PARTITION_KEY}
        values: dict[str, Any] = {":pk": {"S": gsi4pk}}
        condition = "#pk = :pk"
        if prefix is not None:
            attribute_names["#sk"] = names.INDEX_SORT_KEY
            values[":prefix"] = {"S": prefix}
            condition += " AND begins_with(#sk, :prefix)"
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": self.index_name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": attribute_names,
            "ExpressionAttributeValues": values,
        }
        if open_only:
            placeholders = []
            for n, state in enumerate(OPEN_STATES):
                values[f":s{n}"] = {"S": state}
                placeholders.append(f":s{n}")
            attribute_names["#state"] = "state"
            request["FilterExpression"] = f"#state IN ({', '.join(placeholders)})"
        if self.page_size is not None:
            request["Limit"] = self.page_size
        items: list[dict[str, Any]] = []
        requests = 0
        for page in query_pages(self.client, request):
            requests += 1
            items.extend(deserialize(raw) for raw in page.get("Items", []))
        return _PartitionRead(items=items, requests=requests)

    def _result(
        self,
        merged: Mapping[tuple[str, str], dict[str, Any]],
        requests: int,
        partitions: tuple[str, ...],
    ) -> ReadResult:
        items = sorted(merged.values(), key=_order_key)
        anomalies = 0
        for item in items:
            reason = keys.person_anomaly(item)
            if reason is not None:
                anomalies += 1
                log.warning(
                    "saga row anomaly, returned as stored: PK=%r SK=%r: %s",
                    item.get("PK"),
                    item.get("SK"),
                    reason,
                    extra={"PK": item.get("PK"), "SK": item.get("SK"), "reason": reason},
                )
        return ReadResult(
            items=items, requests=requests, partitions=partitions, anomalies=anomalies
        )


def read_partitions(
    partitions: Sequence[str],
    read: Callable[[str], _Read],
    *,
    max_workers: int,
    thread_name_prefix: str,
    logger: logging.Logger,
    failure_message: str,
) -> dict[str, _Read]:
    """`read(partition)` for every partition: one on the calling thread, more in parallel on a
    pool of at most max_workers. Every read that raised a ClientError or BotoCoreError is logged
    (`failure_message` with the partition and the error), then EnumerationError names them all:
    no partial result. Any other exception propagates."""
    results: dict[str, _Read] = {}
    failures: dict[str, BaseException] = {}
    if len(partitions) == 1:
        try:
            results[partitions[0]] = read(partitions[0])
        except (ClientError, BotoCoreError) as err:
            failures[partitions[0]] = err
    else:
        workers = max(1, min(max_workers, len(partitions)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_name_prefix) as pool:
            futures = {p: pool.submit(read, p) for p in partitions}
            for partition, future in futures.items():
                try:
                    results[partition] = future.result()
                except (ClientError, BotoCoreError) as err:
                    failures[partition] = err
    if failures:
        for partition, failure in failures.items():
            detail = f"{type(failure).__name__}: {failure}"
            logger.error(
                failure_message,
                partition,
                detail,
                extra={"partition": partition, "error": detail},
            )
        raise EnumerationError(failures)
    return results


def count_partition(
    client: DynamoDBClient,
    table_name: str,
    gsi4pk: str,
    *,
    index_name: str = names.INDEX_NAME,
    page_size: int | None = None,
) -> tuple[int, int]:
    """(rows under one GSI4 partition, requests): a COUNT Query read to its last page, because
    Count covers one 1 MB page only. Client errors propagate to the caller."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": index_name,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": "GSI4PK"},
        "ExpressionAttributeValues": {":pk": {"S": gsi4pk}},
        "Select": "COUNT",
    }
    if page_size is not None:
        request["Limit"] = page_size
    count = requests = 0
    for page in query_pages(client, request):
        requests += 1
        count += int(page.get("Count", 0))
    return count, requests


def _sort_key_person(item: Mapping[str, Any]) -> str | None:
    value = item.get("GSI4SK")
    if not isinstance(value, str):
        return None
    try:
        return keys.parse_gsi4sk(value).person_id
    except InvalidKeyError:
        return None


def _order_key(item: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(item.get("GSI4SK", "")), str(item.get("PK", "")), str(item.get("SK", "")))
