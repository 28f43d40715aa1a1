"""The open index's readiness on moto: a table built from the synthesised template has it and
is ready; one without it (the attached production table before its owning stack adds it) is
not, and the command the problem names, run as the AWS CLI would send it, makes it ready."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devkit.schema import create_table, table_create_kwargs
from saga_index.index import names
from saga_index.store import open_index_readiness

TABLE = "saga-open-index-readiness"


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def create_without_open_index(client: Any, template: dict[str, Any]) -> None:
    kwargs = table_create_kwargs(template, TABLE)
    kwargs["GlobalSecondaryIndexes"] = [
        gsi for gsi in kwargs["GlobalSecondaryIndexes"] if gsi["IndexName"] != names.OPEN_INDEX_NAME
    ]
    kwargs["AttributeDefinitions"] = [
        d
        for d in kwargs["AttributeDefinitions"]
        if d["AttributeName"] != names.OPEN_INDEX_PARTITION_KEY
    ]
    client.create_table(**kwargs)


def run_as_the_cli_would(client: Any, command: str) -> None:
    """`aws dynamodb update-table --table-name T --attribute-definitions JSON
    --global-secondary-index-updates JSON`: the same UpdateTable request, through boto3."""
    words = shlex.split(command)
    assert words[:3] == ["aws", "dynamodb", "update-table"]
    options = dict(zip(words[3::2], words[4::2], strict=True))
    assert options["--region"] == client.meta.region_name
    client.update_table(
        TableName=options["--table-name"],
        AttributeDefinitions=json.loads(options["--attribute-definitions"]),
        GlobalSecondaryIndexUpdates=json.loads(options["--global-secondary-index-updates"]),
    )


def test_a_table_from_the_template_has_the_open_index_ready(
    client: Any, synthesized_template: dict[str, Any]
) -> None:
    create_table(client, TABLE, synthesized_template)

    readiness = open_index_readiness(client, TABLE)

    assert readiness.ready, readiness.problem
    assert readiness.to_json() == {
        "table": TABLE,
        "index": names.OPEN_INDEX_NAME,
        "tableExists": True,
        "exists": True,
        "indexStatus": "ACTIVE",
        "backfilling": False,
        "keysAsExpected": True,
        "projectionAsExpected": True,
        "ready": True,
        "problem": None,
    }


def test_a_table_without_it_is_not_ready_until_the_named_command_adds_it(
    client: Any, synthesized_template: dict[str, Any]
) -> None:
    create_without_open_index(client, synthesized_template)

    missing = open_index_readiness(client, TABLE)

    assert not missing.ready
    assert not missing.exists
    assert missing.table_exists
    add_command = (missing.problem or "").split("`")[1]
    run_as_the_cli_would(client, add_command)
    after = open_index_readiness(client, TABLE)
    assert after.ready, after.problem
    # GSI4 is untouched by the addition.
    indexes = client.describe_table(TableName=TABLE)["Table"]["GlobalSecondaryIndexes"]
    assert sorted(i["IndexName"] for i in indexes) == [names.OPEN_INDEX_NAME, names.INDEX_NAME]


def test_a_missing_table_is_an_answer_not_an_error(client: Any) -> None:
    readiness = open_index_readiness(client, "no-such-table")

    assert not readiness.ready
    assert not readiness.table_exists
    assert "table no-such-table does not exist in region us-east-1" in (readiness.problem or "")
