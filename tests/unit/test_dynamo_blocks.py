"""The DynamoDB building blocks: condition failures, pages, item sizes, the index target."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from saga_index.index import names
from saga_index.index.errors import InvalidInputError, InvalidShardCountError
from saga_index.index.shard import DEFAULT_SHARD_COUNT
from saga_index.layout_change.record.routing import Routing
from saga_index.store.dynamo.client import make_client
from saga_index.store.dynamo.conditions import is_condition_failed
from saga_index.store.dynamo.expressions import Expression, all_of
from saga_index.store.dynamo.pages import paced_pages, query_pages
from saga_index.store.dynamo.scan import _read_units
from saga_index.store.dynamo.sizing import item_size
from saga_index.store.dynamo.target import IndexTarget
from saga_index.store.repository import SagaRepository


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "no"}}, "UpdateItem")


# ---- conditions -------------------------------------------------------------------------------


def test_given_a_false_condition_then_it_is_a_condition_failure_and_nothing_else_is() -> None:
    assert is_condition_failed(client_error("ConditionalCheckFailedException"))
    assert not is_condition_failed(client_error("ThrottlingException"))
    assert not is_condition_failed(ValueError("ConditionalCheckFailedException"))


def test_given_fragments_then_all_of_requires_every_one() -> None:
    both = all_of(
        Expression("a = :a", slots=frozenset({":a"})),
        Expression("attribute_exists(#pk)", names={"#pk": "PK"}),
    )
    assert both.text == "a = :a AND attribute_exists(#pk)"


# ---- pages ------------------------------------------------------------------------------------


class Pages:
    """Three pages; records each request and each call of the hook, in order."""

    def __init__(self) -> None:
        self.log: list[Any] = []

    def send(self, **request: Any) -> dict[str, Any]:
        self.log.append(("request", request.get("ExclusiveStartKey")))
        n = sum(1 for entry in self.log if entry[0] == "request")
        page: dict[str, Any] = {"Items": [n]}
        if n < 3:
            page["LastEvaluatedKey"] = {"k": n}
        return page

    def before(self) -> None:
        self.log.append(("before", None))


def test_given_three_pages_then_the_hook_runs_before_each_request_and_not_after_the_last() -> None:
    pages = Pages()
    items = [page["Items"][0] for page in paced_pages(pages.send, {}, before_each=pages.before)]
    assert items == [1, 2, 3]
    assert pages.log == [
        ("before", None),
        ("request", None),
        ("before", None),
        ("request", {"k": 1}),
        ("before", None),
        ("request", {"k": 2}),
    ]


def test_given_a_hook_that_raises_then_no_further_request_is_sent() -> None:
    pages = Pages()

    def stop_after_first() -> None:
        if pages.log:
            raise TimeoutError

    with pytest.raises(TimeoutError):
        list(paced_pages(pages.send, {}, before_each=stop_after_first))
    assert pages.log == [("request", None)]


def test_given_a_query_of_two_pages_then_the_paginator_resumes_from_the_last_key() -> None:
    client = make_client(region="us-east-1")
    request = {"TableName": "t", "KeyConditionExpression": "#pk = :pk", "Limit": 1}
    last_key = {"PK": {"S": "a"}, "SK": {"S": "b"}}
    with Stubber(client) as stub:
        stub.add_response("query", {"Items": [], "Count": 1, "LastEvaluatedKey": last_key}, request)
        stub.add_response(
            "query", {"Items": [], "Count": 2}, {**request, "ExclusiveStartKey": last_key}
        )
        counts = [page["Count"] for page in query_pages(client, request)]
        stub.assert_no_pending_responses()
    assert counts == [1, 2]


# ---- item sizes -------------------------------------------------------------------------------


def test_given_an_item_then_its_size_is_names_plus_values_by_dynamodbs_rule() -> None:
    # "PK" 2 + "RSAGA#1" 7; "n" 1 + 123 (3 significant digits: 2 bytes + 1); "ok" 2 + 1
    assert item_size({"PK": {"S": "RSAGA#1"}, "n": {"N": "123"}, "ok": {"BOOL": True}}) == 16


def test_given_no_reported_capacity_then_a_scan_page_is_priced_by_the_item_size_rule() -> None:
    # One 5,000-byte item ("s" + 4,999 characters): two 4 KB units, halved when eventual.
    page = {"Items": [{"s": {"S": "x" * 4999}}], "ScannedCount": 1}
    assert _read_units(page, consistent=True) == 2.0
    assert _read_units(page, consistent=False) == 1.0


# ---- the index target -------------------------------------------------------------------------


def test_given_defaults_then_the_target_is_the_production_index_at_the_default_shard_count() -> (
    None
):
    target = IndexTarget(client=None, table_name="sagas")  # type: ignore[arg-type]
    assert (target.index_name, target.shard_count) == (names.INDEX_NAME, 16)


@pytest.mark.parametrize(
    ("table", "shards", "error"),
    [("", 16, InvalidInputError), ("sagas", 12, InvalidShardCountError)],
)
def test_given_no_table_or_a_bad_shard_count_then_no_target_is_made(
    table: str, shards: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        IndexTarget(client=None, table_name=table, shard_count=shards)  # type: ignore[arg-type]


def test_given_a_target_then_a_repository_built_from_it_reads_that_target() -> None:
    target = IndexTarget(None, "sagas", "other-index", 8)  # type: ignore[arg-type]
    plan = Routing.for_phase("sharded", DEFAULT_SHARD_COUNT)
    repository = SagaRepository.from_target(target, plan=plan)
    assert (repository.table_name, repository.index_name, repository.plan) == (
        "sagas",
        "other-index",
        plan,
    )
