"""Reading GSI4 partitions: a set of them, all or an error naming each one that failed
(`read_partitions`); one partition's rows (`partition_rows`, the one index-partition probe:
its first rows, or all of them, projected to what the caller names); one partition's count.

Shared by the repository's enumerations, the checks that count rows per key, the layout probe,
the lost-record probe, restore from rows and the backfill's estimate, so each has one
implementation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import EnumerationError, names
from saga_index.store.dynamo import (
    KeyReadPacer,
    attribute_list,
    deserialize,
    on_index_partition,
    query_pages,
    request_expressions,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_Read = TypeVar("_Read")


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


def partition_rows(
    client: DynamoDBClient,
    table_name: str,
    gsi4pk: str,
    *,
    attributes: Sequence[str],
    index_name: str = names.INDEX_NAME,
    limit: int | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows under one GSI4 partition, projected to `attributes` and deserialised: the first
    `limit` (ONE Query with that Limit: a probe of whether the key carries rows costs 0.5 read
    unit), or every row (paged to the last page) when no limit is given. Eventually
    consistent, as every index read. Client errors propagate."""
    projection = attribute_list({f"#a{n}": attribute for n, attribute in enumerate(attributes)})
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": index_name,
        **request_expressions(key_condition=on_index_partition(gsi4pk), projection=projection),
    }
    if limit is not None:
        pages: Any = [client.query(**request, Limit=limit)]
    else:
        pages = query_pages(client, request)
    for page in pages:
        for raw in page.get("Items", []):
            yield deserialize(raw)


def count_partition(
    client: DynamoDBClient,
    table_name: str,
    gsi4pk: str,
    *,
    index_name: str = names.INDEX_NAME,
    page_size: int | None = None,
    pacer: KeyReadPacer | None = None,
    deadline: float | None = None,
    start_key: Mapping[str, Any] | None = None,
    on_page: Callable[[int, Any], None] | None = None,
) -> tuple[int, int]:
    """(rows under one GSI4 partition, requests): a COUNT Query read to its last page, because
    Count covers one 1 MB page only (and costs what reading the rows costs). With a `pacer`,
    each page waits for the key's turn, and a read that cannot finish before `deadline` raises
    KeyReadIncompleteError. `start_key` resumes a read where an earlier one stopped (its
    LastEvaluatedKey); `on_page` hears (rows counted so far, the page's LastEvaluatedKey) after
    each page. Client errors propagate to the caller."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": index_name,
        **request_expressions(key_condition=on_index_partition(gsi4pk)),
        "Select": "COUNT",
    }
    if page_size is not None:
        request["Limit"] = page_size
    if start_key:
        request["ExclusiveStartKey"] = dict(start_key)
    pages = (
        query_pages(client, request)
        if pacer is None
        else pacer.pages(client.query, request, gsi4pk, deadline=deadline)
    )
    count = requests = 0
    for page in pages:
        requests += 1
        count += int(page.get("Count", 0))
        if on_page is not None:
            on_page(count, page.get("LastEvaluatedKey"))
    return count, requests
