"""The open index's readiness decided on DescribeTable-shaped answers: every state DynamoDB
reports while it builds an index (moto creates one ACTIVE at once and never says Backfilling),
and the commands each problem names, parsed as a shell would."""

from __future__ import annotations

import json
import shlex
from typing import Any

import jmespath
import pytest

from saga_index.index import names
from saga_index.store import (
    add_open_index_command,
    open_index_create,
    open_index_status_command,
    readiness_from_description,
)

TABLE = "propflow-prod"
GSI4 = {
    "IndexName": names.INDEX_NAME,
    "KeySchema": [
        {"AttributeName": names.INDEX_PARTITION_KEY, "KeyType": "HASH"},
        {"AttributeName": names.INDEX_SORT_KEY, "KeyType": "RANGE"},
    ],
    "Projection": {"ProjectionType": "ALL"},
    "IndexStatus": "ACTIVE",
}


def open_index(**overrides: Any) -> dict[str, Any]:
    index: dict[str, Any] = {
        "IndexName": names.OPEN_INDEX_NAME,
        "KeySchema": [
            {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": names.OPEN_INDEX_SORT_KEY, "KeyType": "RANGE"},
        ],
        "Projection": {"ProjectionType": "ALL"},
        "IndexStatus": "ACTIVE",
    }
    index.update(overrides)
    return index


def described(*indexes: dict[str, Any], **table: Any) -> dict[str, Any]:
    return {
        "TableName": TABLE,
        "TableStatus": "ACTIVE",
        "BillingModeSummary": {"BillingMode": "PAY_PER_REQUEST"},
        "AttributeDefinitions": [
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "S"},
            {"AttributeName": names.INDEX_PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": names.INDEX_SORT_KEY, "AttributeType": "S"},
            {"AttributeName": names.OPEN_INDEX_PARTITION_KEY, "AttributeType": "S"},
        ],
        "GlobalSecondaryIndexes": [GSI4, *indexes],
        **table,
    }


def backticked(text: str) -> list[str]:
    """The commands a problem names (between backticks)."""
    return text.split("`")[1::2]


def test_an_active_index_built_as_expected_is_ready() -> None:
    readiness = readiness_from_description(described(open_index()))

    assert readiness.ready
    assert readiness.problem is None
    assert (readiness.exists, readiness.index_status, readiness.backfilling) == (
        True,
        "ACTIVE",
        False,
    )
    assert readiness.keys_as_expected
    assert readiness.projection_as_expected
    assert readiness.to_json()["ready"] is True


def test_a_missing_index_names_the_construct_and_the_command_to_add_it() -> None:
    readiness = readiness_from_description(described(), region="eu-west-1")

    assert not readiness.ready
    assert not readiness.exists
    assert readiness.index_status is None
    problem = readiness.problem or ""
    assert f"{names.OPEN_INDEX_NAME} does not exist on table {TABLE}" in problem
    assert "infra.open_index.add_open_saga_index(table)" in problem
    assert "docs/deploy.md" in problem
    add, status = backticked(problem)
    assert add == add_open_index_command(TABLE, region="eu-west-1")
    assert status == open_index_status_command(TABLE, region="eu-west-1")


@pytest.mark.parametrize(
    ("status", "backfilling", "doing"),
    [
        ("CREATING", True, "still reading the table into it"),
        ("CREATING", False, "still building it"),
        ("UPDATING", False, "until it is ACTIVE"),
        # Not a state DynamoDB documents, but "ACTIVE" alone must not pass while it backfills.
        ("ACTIVE", True, "until it is ACTIVE"),
    ],
)
def test_an_index_not_yet_active_or_still_backfilling_says_wait(
    status: str, backfilling: bool, doing: str
) -> None:
    readiness = readiness_from_description(
        described(open_index(IndexStatus=status, Backfilling=backfilling))
    )

    assert not readiness.ready
    assert (readiness.index_status, readiness.backfilling) == (status, backfilling)
    problem = readiness.problem or ""
    assert f"is {status} (Backfilling: {'true' if backfilling else 'false'})" in problem
    assert doing in problem
    assert "wait until IndexStatus is ACTIVE and Backfilling is not true" in problem
    assert backticked(problem) == [open_index_status_command(TABLE)]


def test_an_index_being_deleted_says_wait_until_gone_then_add_it_again() -> None:
    readiness = readiness_from_description(described(open_index(IndexStatus="DELETING")))

    assert not readiness.ready
    assert "being deleted" in (readiness.problem or "")
    assert "prints an empty list, then add it again" in (readiness.problem or "")


@pytest.mark.parametrize(
    ("index", "extra_definitions", "wrong"),
    [
        (open_index(Projection={"ProjectionType": "KEYS_ONLY"}), [], "projects KEYS_ONLY"),
        (
            open_index(KeySchema=[{"AttributeName": "OpenSagaPK", "KeyType": "HASH"}]),
            [],
            "its keys are OpenSagaPK (HASH), not",
        ),
        (
            open_index(
                KeySchema=[
                    {"AttributeName": names.INDEX_PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": names.INDEX_SORT_KEY, "KeyType": "RANGE"},
                ]
            ),
            [],
            "its keys are GSI4PK (HASH), GSI4SK (RANGE)",
        ),
        # Right names, wrong type: the key is a derived string.
        (open_index(), [{"AttributeName": "OpenSagaPK", "AttributeType": "N"}], "not OpenSagaPK"),
    ],
)
def test_an_index_built_otherwise_must_be_removed_and_added_again(
    index: dict[str, Any], extra_definitions: list[dict[str, str]], wrong: str
) -> None:
    table = described(index)
    table["AttributeDefinitions"] = [
        d
        for d in table["AttributeDefinitions"]
        if d["AttributeName"] not in {e["AttributeName"] for e in extra_definitions}
    ] + extra_definitions

    readiness = readiness_from_description(table)

    assert not readiness.ready
    assert readiness.exists
    problem = readiness.problem or ""
    assert wrong in problem
    assert "DynamoDB cannot change an index's keys or projection" in problem
    delete, status = backticked(problem)
    updates = json.loads(shlex.split(delete)[-1])
    assert updates == [{"Delete": {"IndexName": names.OPEN_INDEX_NAME}}]
    assert status == open_index_status_command(TABLE)


def test_the_shape_is_judged_before_the_status() -> None:
    """A wrongly keyed index that is still building will never become right: say so now."""
    readiness = readiness_from_description(
        described(
            open_index(
                IndexStatus="CREATING",
                Backfilling=True,
                Projection={"ProjectionType": "KEYS_ONLY"},
            )
        )
    )

    assert "cannot change an index's keys or projection" in (readiness.problem or "")


def test_a_provisioned_table_gets_a_command_with_gsi4s_throughput() -> None:
    gsi4 = {**GSI4, "ProvisionedThroughput": {"ReadCapacityUnits": 40, "WriteCapacityUnits": 25}}
    table = described(
        BillingModeSummary={"BillingMode": "PROVISIONED"},
        ProvisionedThroughput={"ReadCapacityUnits": 100, "WriteCapacityUnits": 50},
    )
    table["GlobalSecondaryIndexes"] = [gsi4]

    add = backticked(readiness_from_description(table).problem or "")[0]

    updates = json.loads(
        shlex.split(add)[shlex.split(add).index("--global-secondary-index-updates") + 1]
    )
    assert updates == [open_index_create({"ReadCapacityUnits": 40, "WriteCapacityUnits": 25})]
    assert "ProvisionedThroughput" not in json.dumps(open_index_create())


def test_the_commands_reach_a_local_server_but_not_an_aws_endpoint_by_flag() -> None:
    local = open_index_status_command(
        TABLE, region="us-east-1", endpoint_url="http://127.0.0.1:8000"
    )
    aws = open_index_status_command(
        TABLE, region="us-east-1", endpoint_url="https://dynamodb.us-east-1.amazonaws.com"
    )

    assert "--endpoint-url http://127.0.0.1:8000" in local
    assert "--endpoint-url" not in aws
    assert "--region us-east-1" in aws


def test_the_status_query_selects_the_open_index_status_and_backfilling() -> None:
    """The --query of the status command, as the AWS CLI evaluates it (JMESPath) on a
    DescribeTable answer: the open index's IndexStatus and Backfilling, nothing of GSI4."""
    words = shlex.split(open_index_status_command(TABLE))
    query = words[words.index("--query") + 1]
    answer = {"Table": described(open_index(IndexStatus="CREATING", Backfilling=True))}

    assert jmespath.search(query, answer) == [{"IndexStatus": "CREATING", "Backfilling": True}]
    assert jmespath.search(query, {"Table": described()}) == []
