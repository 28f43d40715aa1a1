"""The saga repository: reads of the renewal-saga index along a key plan (saga_index.store.plan;
docs/control-contract.md "Routing").

Reads
  by person    `plan.read_keys(person)`, one Query each, sequentially, source first: one
               request when both layouts give the person the same key, two while rows move.
  enumerations `plan.enumeration_stages()`, stage by stage; the keys of one stage in
               parallel on a bounded pool, each to its last page. Merged, de-duplicated on the
               table key (the later read wins), in a deterministic order. Complete or
               EnumerationError naming every failed partition of the stage that failed.
  pages        `page_of_all_sagas` / `page_of_open_sagas`: at most `limit` rows and an opaque
               cursor of the next page, at rest only (store/paging.py, store/cursor.py).
  open sagas   when the plan names the open-saga index's keys (`open_enumeration_keys`: the
               record says `open`), `get_all_open_sagas` and `page_of_open_sagas` read those
               keys of the open index instead, one stage, filtered to open states (a saga closed
               just before the read may not have left the index yet); by-person reads never do.

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import OPEN_STATES, EnumerationError, InvalidKeyError, Person, keys, names
from saga_index.store.cursor import Enumeration
from saga_index.store.dynamo import (
    Expression,
    IndexTarget,
    all_of,
    deserialize,
    on_index_partition,
    on_open_index_key,
    query_pages,
    request_expressions,
)
from saga_index.store.paging import SagaPage, read_page
from saga_index.store.partitions import read_partitions
from saga_index.store.plan import KeyPlan, enumeration_keys, open_enumeration_keys

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

log = logging.getLogger(__name__)

DEFAULT_MAX_WORKERS = 16
# One person's rows of a partition: GSI4SK starts with the person's prefix.
SORT_KEY_BEGINS = Expression(
    "begins_with(#gsi4sk, :prefix)",
    names={"#gsi4sk": names.INDEX_SORT_KEY},
    slots=frozenset({":prefix"}),
)
# Only open sagas cross the wire (see _enumerate for when a reader may filter on the server).
STILL_OPEN = Expression(
    f"#state IN ({', '.join(f':s{n}' for n in range(len(OPEN_STATES)))})",
    names={"#state": "state"},
    slots=frozenset(f":s{n}" for n in range(len(OPEN_STATES))),
).given({f":s{n}": {"S": state} for n, state in enumerate(OPEN_STATES)})


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
    """Reads sagas through GSI4 along one key plan. The client is injected (thread-safe)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        plan: KeyPlan,
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
        self.plan = plan
        self.client = client
        self.table_name = table_name
        self.index_name = index_name
        self.max_workers = max_workers
        self.page_size = page_size

    @classmethod
    def from_target(
        cls,
        target: IndexTarget,
        *,
        plan: KeyPlan,
        max_workers: int = DEFAULT_MAX_WORKERS,
        page_size: int | None = None,
    ) -> SagaRepository:
        """The target's client, table and index, along `plan`."""
        return cls(
            target.client,
            target.table_name,
            plan=plan,
            index_name=target.index_name,
            max_workers=max_workers,
            page_size=page_size,
        )

    # ---- public reads -------------------------------------------------------------------

    def get_sagas_by_person(self, person_id: str | Person) -> ReadResult:
        """Only this person's sagas: begins_with(personId + "#") also matches person "p-1#x"
        when asked for "p-1", so rows are kept only when their GSI4SK parses back to person_id.
        The personId is checked here, once, and hashed once for every layout's key."""
        person = Person.of(person_id)
        prefix = person.prefix
        partitions = self.plan.read_keys(person)
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        for partition in partitions:  # sequential on purpose: the source strictly first
            read = self._query_partition(partition, prefix=prefix)
            requests += read.requests
            for item in read.items:
                if _sort_key_person(item) == person.id:
                    # A row seen under both keys moved between the reads: the later read wins.
                    merged[keys.table_key_of(item)] = item
        return self._result(merged, requests, partitions)

    def get_all_sagas(self) -> ReadResult:
        return self._enumerate(open_only=False)

    def get_all_open_sagas(self) -> ReadResult:
        return self._enumerate(open_only=True)

    def page_of_all_sagas(self, *, limit: int, cursor: str | None = None) -> SagaPage:
        """At most `limit` sagas and the cursor of the next page (None after the last one); at
        rest only (store/paging.py: PagingDuringMoveError while rows move)."""
        return self._page("all", limit=limit, cursor=cursor)

    def page_of_open_sagas(self, *, limit: int, cursor: str | None = None) -> SagaPage:
        """page_of_all_sagas for the open sagas (filtered on the server: one stage)."""
        return self._page("open", limit=limit, cursor=cursor)

    # ---- internals ----------------------------------------------------------------------

    def _enumerate(self, *, open_only: bool) -> ReadResult:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        requests = 0
        open_keys = open_enumeration_keys(self.plan) if open_only else None
        if open_keys is not None:
            requests = self._read_stage_into(merged, open_keys, open_only=True, open_index=True)
            return self._result(merged, requests, open_keys)
        stages = self.plan.enumeration_stages()
        # The open filter applies to the MERGED rows: a saga that closes while its row moves is
        # open under the key read first and closed under the key read later, and the later read
        # wins only if it returns the row. A server-side filter would drop the closed image and
        # keep the stale open one, so it is used only when there is one stage (no row is read
        # twice). It saves transfer, not capacity: DynamoDB charges for the rows it filters.
        server_filter = open_only and len(stages) == 1
        # Each stage is read to its end before the next starts: see the module docstring.
        for stage in stages:
            requests += self._read_stage_into(merged, stage, open_only=server_filter)
        if open_only and not server_filter:
            merged = {k: v for k, v in merged.items() if v.get("state") in OPEN_STATES}
        return self._result(merged, requests, enumeration_keys(self.plan))

    def _page(self, of: Enumeration, *, limit: int, cursor: str | None) -> SagaPage:
        open_keys = open_enumeration_keys(self.plan) if of == "open" else None

        def fetch(
            partition: str, start: Mapping[str, Any] | None, wanted: int
        ) -> tuple[list[dict[str, Any]], Mapping[str, Any] | None]:
            request = self._query_request(
                partition, open_only=of == "open", open_index=open_keys is not None
            )
            request["Limit"] = min(wanted, self.page_size or wanted)
            if start is not None:
                request["ExclusiveStartKey"] = _renamed(start, to_open=open_keys is not None)
            try:
                page = self.client.query(**request)
            except (ClientError, BotoCoreError) as err:
                raise EnumerationError({partition: err}) from err
            rows = [deserialize(raw) for raw in page.get("Items", [])]
            last = page.get("LastEvaluatedKey") or None
            return rows, None if last is None else _renamed(last, to_open=False)

        # A cursor names the plan it was taken under: one of GSI4's keys is refused once reads
        # switched to the open index (CursorLayoutChangedError), and the reverse.
        stages = (open_keys,) if open_keys is not None else self.plan.enumeration_stages()
        return read_page(stages, of, limit=limit, cursor=cursor, fetch=fetch)

    def _read_stage_into(
        self,
        merged: dict[tuple[str, str], dict[str, Any]],
        partitions: Sequence[str],
        *,
        open_only: bool,
        open_index: bool = False,
    ) -> int:
        reads = read_partitions(
            partitions,
            lambda partition: self._query_partition(
                partition, open_only=open_only, open_index=open_index
            ),
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
        self,
        gsi4pk: str,
        *,
        prefix: str | None = None,
        open_only: bool = False,
        open_index: bool = False,
    ) -> _PartitionRead:
        """One partition read to its last page (a Query returns at most 1 MB per page)."""
        request = self._query_request(
            gsi4pk, prefix=prefix, open_only=open_only, open_index=open_index
        )
        if self.page_size is not None:
            request["Limit"] = self.page_size
        items: list[dict[str, Any]] = []
        requests = 0
        for page in query_pages(self.client, request):
            requests += 1
            items.extend(deserialize(raw) for raw in page.get("Items", []))
        return _PartitionRead(items=items, requests=requests)

    def _query_request(
        self,
        partition: str,
        *,
        prefix: str | None = None,
        open_only: bool = False,
        open_index: bool = False,
    ) -> dict[str, Any]:
        """A Query of one GSI4 partition, or (`open_index`) of one key of the open index."""
        condition = on_open_index_key(partition) if open_index else on_index_partition(partition)
        if prefix is not None:
            condition = all_of(condition, SORT_KEY_BEGINS.given({":prefix": {"S": prefix}}))
        return {
            "TableName": self.table_name,
            "IndexName": names.OPEN_INDEX_NAME if open_index else self.index_name,
            **request_expressions(
                key_condition=condition, filter=STILL_OPEN if open_only else None
            ),
        }

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


def _renamed(key: Mapping[str, Any], *, to_open: bool) -> dict[str, Any]:
    """A page's key with its partition key under the cursor's name for it, "GSI4PK" (one cursor
    format for both indexes: the plan's keys tell them apart), or (`to_open`) under the open
    index's OpenSagaPK, as a Query of that index takes its ExclusiveStartKey."""
    source, target = (
        (names.INDEX_PARTITION_KEY, names.OPEN_INDEX_PARTITION_KEY)
        if to_open
        else (names.OPEN_INDEX_PARTITION_KEY, names.INDEX_PARTITION_KEY)
    )
    return {(target if name == source else name): value for name, value in key.items()}


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
