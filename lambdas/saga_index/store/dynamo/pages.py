"""Reading a Query or Scan to its last page (DynamoDB returns at most 1 MB per page).

`query_pages` is botocore's paginator: each request starts at the previous page's
LastEvaluatedKey until a page has none. `paced_pages` is the same walk for readers that must act
between requests (wait for a rate limiter, stop at a deadline): it runs `before_each` before
every request, the first included, and never after the last page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryOutputTypeDef


def query_pages(client: DynamoDBClient, request: Mapping[str, Any]) -> Iterator[QueryOutputTypeDef]:
    """Every page of one Query, in order; a request's Limit is the size of each page."""
    yield from client.get_paginator("query").paginate(**request)


def paced_pages(
    send: Callable[..., Mapping[str, Any]],
    request: Mapping[str, Any],
    *,
    before_each: Callable[[], None],
) -> Iterator[Mapping[str, Any]]:
    """Every page of `send(**request)` (a client's scan or query), calling `before_each` before
    each request; an exception it raises ends the walk before that request is sent."""
    current = dict(request)
    while True:
        before_each()
        page = send(**current)
        yield page
        last_key = page.get("LastEvaluatedKey")
        if not last_key:
            return
        current["ExclusiveStartKey"] = last_key
