"""The open-saga index as the production table's owning stack adds it (infra/open_index.py),
synthesised in a tiny owning stack (Table and TableV2), and the one AWS CLI command that
docs/deploy.md documents instead: both build the same index as the owned table's, and as the
command the readiness check prints (saga_index.store), so none of them can drift."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk.assertions import Template

from infra.open_index import add_open_saga_index
from saga_index.index.names import INDEX_NAME, OPEN_INDEX_NAME
from saga_index.store import (
    add_open_index_command,
    open_index_attribute_definitions,
    open_index_create,
    open_index_status_command,
)
from tests.infra.template_tools import resources

pytestmark = pytest.mark.infra

DEPLOY_DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
INDEX_FIELDS = ("IndexName", "KeySchema", "Projection")


def owning_stack(table_kind: str) -> dict[str, Any]:
    """A stack that owns a saga-like table (PK/SK, on-demand, GSI4) and adds the open index."""
    app = cdk.App()
    stack = cdk.Stack(app, "OwningStack")
    pk = dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING)
    sk = dynamodb.Attribute(name="SK", type=dynamodb.AttributeType.STRING)
    gsi4 = {
        "index_name": INDEX_NAME,
        "partition_key": dynamodb.Attribute(name="GSI4PK", type=dynamodb.AttributeType.STRING),
        "sort_key": dynamodb.Attribute(name="GSI4SK", type=dynamodb.AttributeType.STRING),
    }
    table: dynamodb.Table | dynamodb.TableV2
    if table_kind == "Table":
        table = dynamodb.Table(
            stack,
            "Sagas",
            partition_key=pk,
            sort_key=sk,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        )
    else:
        table = dynamodb.TableV2(stack, "Sagas", partition_key=pk, sort_key=sk)
    table.add_global_secondary_index(**gsi4)

    assert add_open_saga_index(table) == OPEN_INDEX_NAME

    return dict(Template.from_stack(stack).to_json())


def only_table(template: dict[str, Any]) -> dict[str, Any]:
    (table,) = [
        *resources(template, "AWS::DynamoDB::Table").values(),
        *resources(template, "AWS::DynamoDB::GlobalTable").values(),
    ]
    return dict(table["Properties"])


def open_index_of(properties: dict[str, Any]) -> dict[str, Any]:
    (index,) = [
        i for i in properties["GlobalSecondaryIndexes"] if i["IndexName"] == OPEN_INDEX_NAME
    ]
    return {field: index[field] for field in INDEX_FIELDS}


def documented_command(pattern: str) -> list[str]:
    """The one ```bash block of docs/deploy.md whose command matches, as the shell splits it
    (line continuations joined first, as the shell does)."""
    blocks = re.findall(r"```bash\n(.*?)```", DEPLOY_DOC.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if re.search(pattern, b)]
    return shlex.split(block.replace("\\\n", " "))


def options(words: list[str]) -> dict[str, str]:
    pairs = dict(zip(words[3::2], words[4::2], strict=True))
    assert len(words[3:]) == 2 * len(pairs), f"an option without a value: {words}"
    return pairs


@pytest.mark.parametrize("table_kind", ["Table", "TableV2"])
def test_the_owning_stack_gets_the_same_open_index_as_the_owned_table(
    table_kind: str, owned_synth: Any
) -> None:
    owning = only_table(owning_stack(table_kind))
    owned = only_table(owned_synth.template_json)

    assert open_index_of(owning) == open_index_of(owned) == open_index_create()["Create"]
    assert open_index_of(owning)["Projection"] == {"ProjectionType": "ALL"}
    for definition in open_index_attribute_definitions():
        assert definition in owning["AttributeDefinitions"]
        assert definition in owned["AttributeDefinitions"]
    # GSI4 is left as it was.
    assert [i["IndexName"] for i in owning["GlobalSecondaryIndexes"]] == [
        INDEX_NAME,
        OPEN_INDEX_NAME,
    ]


def test_the_documented_cli_command_adds_the_construct_s_index() -> None:
    words = documented_command(r"aws dynamodb update-table")
    assert words[:3] == ["aws", "dynamodb", "update-table"]
    documented = options(words)

    owning = only_table(owning_stack("Table"))
    (create,) = json.loads(documented["--global-secondary-index-updates"])
    assert create == {"Create": open_index_of(owning)}
    # The key attributes the command defines are the ones (and the types) the construct does.
    definitions = json.loads(documented["--attribute-definitions"])
    key_attributes = {k["AttributeName"] for k in create["Create"]["KeySchema"]}
    assert {d["AttributeName"] for d in definitions} == key_attributes
    for definition in definitions:
        assert definition in owning["AttributeDefinitions"]
    # The documented command runs against the runbook's exported table and region.
    assert documented["--table-name"] == "$SAGA_TABLE_NAME"
    assert documented["--region"] == "$AWS_REGION"


def test_the_documented_command_is_the_one_the_readiness_check_prints() -> None:
    documented = options(documented_command(r"aws dynamodb update-table"))
    printed = options(shlex.split(add_open_index_command("$SAGA_TABLE_NAME", region="$AWS_REGION")))

    assert documented == printed


def test_the_documented_status_command_is_the_one_the_readiness_check_prints() -> None:
    documented = options(documented_command(r"aws dynamodb describe-table"))
    printed = options(
        shlex.split(open_index_status_command("$SAGA_TABLE_NAME", region="$AWS_REGION"))
    )

    assert documented == printed
    assert f"IndexName=='{OPEN_INDEX_NAME}'" in documented["--query"]
