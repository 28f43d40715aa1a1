"""The saga repository: phase-aware reads of the renewal-saga index (ADR-0085).

Reads
  by person    one Query on the person's partition (two while migrating: legacy first).
  enumerations one Query per partition, N shards in parallel on a bounded pool, merged,
               de-duplicated on the table key, in a deterministic order. Complete or error.

Why legacy first while migrating: GSI reads are eventually consistent and a row being re-stamped
is visible under exactly one of its two keys at any instant. Reading the legacy partition to the
end BEFORE the shards means a row that leaves legacy during the read has already landed in its
shard by the time that shard is read, so it cannot fall between the two reads. The rolling-back
phase moves rows the other way, so it reads the shards first and legacy last.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index import keys, names
from saga_index.dynamo.codec import deserialize
from saga_index.dynamo.pages import query_pages
from saga_index.dynamo.target import IndexTarget
from saga_index.errors import EnumerationError, InvalidKeyError
from saga_index.model import OPEN_STATES, Phase

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 16


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
    """Reads sagas through GSI4 in the configured phase. The client is injected (thread-safe)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        phase: Phase | str,
        shard_count: int = 16,
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
        self.phase = Phase.parse(phase)
        self.target = IndexTarget(client, table_name, index_name, shard_count)
        self.max_workers = max_workers
        self.page_size = page_size

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        phase: Phase | str,
        max_workers: int = DEFAULT_MAX_WORKERS,
        page_size: int | None = None,
    ) -> SagaRepository:
        return cls(
            target.client,
            target.table_name,
            phase=phase,
            shard_count=target.shard_count,
            index_name=target.index_name,
            max_workers=max_workers,
            page_size=page_size,
        )

    # ---- public reads -------------------------------------------------------------------

    def get_sagas_by_person(self, person_id: str) -> ReadResult:
        """Only this person's sagas: begins_with(personId + "#") also matches person "p-1#x"
        when asked for "p-1", so rows are kept only when their GSI4SK parses back to person_id."""
        prefix = keys.person_prefix(person_id)
        partitions = self._partitions_for(
            keys.shard_gsi4pk_for_person(person_id, self.target.shard_count)
        )
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        for partition in partitions:  # sequential on purpose: legacy strictly before the shard
            read = self._query_partition(partition, prefix=prefix)
            requests += read.requests
            for item in read.items:
                if _sort_key_person(item) == person_id:
                    merged[keys.table_key_of(item)] = item
        return self._result(merged, requests, partitions)

    def get_all_sagas(self) -> ReadResult:
        return self._enumerate(open_only=False)

    def get_all_open_sagas(self) -> ReadResult:
        return self._enumerate(open_only=True)

    # ---- internals ----------------------------------------------------------------------

    def _partitions_for(self, sharded: str | Iterable[str]) -> tuple[str, ...]:
        """The partitions to read, in the order they must be read (source of moves first)."""
        shards = (sharded,) if isinstance(sharded, str) else tuple(sharded)
        legacy = (keys.LEGACY_GSI4PK,) if self.phase.reads_legacy else ()
        shards = shards if self.phase.reads_shards else ()
        return legacy + shards if self.phase.reads_legacy_first else shards + legacy

    def _enumerate(self, *, open_only: bool) -> ReadResult:
        partitions = self._partitions_for(keys.all_shard_gsi4pks(self.target.shard_count))
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        reads_legacy = keys.LEGACY_GSI4PK in partitions
        if reads_legacy and self.phase.reads_legacy_first:
            # Completed before any shard is read: see the module docstring.
            requests += self._read_legacy_into(merged, open_only=open_only)
        requests += self._read_shards_into(
            merged, [p for p in partitions if p != keys.LEGACY_GSI4PK], open_only=open_only
        )
        if reads_legacy and not self.phase.reads_legacy_first:
            requests += self._read_legacy_into(merged, open_only=open_only)
        return self._result(merged, requests, partitions)

    def _read_legacy_into(
        self, merged: dict[tuple[str, str], dict[str, Any]], *, open_only: bool
    ) -> int:
        try:
            read = self._query_partition(keys.LEGACY_GSI4PK, open_only=open_only)
        except (ClientError, BotoCoreError) as err:
            raise EnumerationError({keys.LEGACY_GSI4PK: err}) from err
        # A row seen under both keys moved between the two reads: the later read wins.
        merged.update((keys.table_key_of(i), i) for i in read.items)
        return read.requests

    def _read_shards_into(
        self,
        merged: dict[tuple[str, str], dict[str, Any]],
        shard_partitions: list[str],
        *,
        open_only: bool,
    ) -> int:
        requests = 0
        failures: dict[str, BaseException] = {}
        if shard_partitions:
            workers = min(self.max_workers, len(shard_partitions))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="saga-shard") as pool:
                futures = {
                    p: pool.submit(self._query_partition, p, open_only=open_only)
                    for p in shard_partitions
                }
                for partition, future in futures.items():
                    try:
                        read = future.result()
                    except (ClientError, BotoCoreError) as err:
                        failures[partition] = err
                        continue
                    requests += read.requests
                    # A row seen under both keys moved between the two reads: later read wins.
                    merged.update((keys.table_key_of(i), i) for i in read.items)
        if failures:
            for partition, failure in failures.items():
                detail = f"{type(failure).__name__}: {failure}"
                log.error(
                    "saga enumeration failed on %s: %s",
                    partition,
                    detail,
                    extra={"partition": partition, "error": detail},
                )
            raise EnumerationError(failures)
        return requests

    def _query_partition(
        self, gsi4pk: str, *, prefix: str | None = None, open_only: bool = False
    ) -> _PartitionRead:
        """One partition read to its last page (a Query returns at most 1 MB per page)."""
        attribute_names = {"#pk": "GSI4PK"}
        values: dict[str, Any] = {":pk": {"S": gsi4pk}}
        condition = "#pk = :pk"
        if prefix is not None:
            attribute_names["#sk"] = "GSI4SK"
            values[":prefix"] = {"S": prefix}
            condition += " AND begins_with(#sk, :prefix)"
        request: dict[str, Any] = {
            "TableName": self.target.table_name,
            "IndexName": self.target.index_name,
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
        for page in query_pages(self.target.client, request):
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
