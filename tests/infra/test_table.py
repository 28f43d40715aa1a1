"""The saga table as synthesised: what deploys, what import mode leaves, what local tables copy."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Capture, Match, Template
from moto import mock_aws

from devkit import schema
from infra.config import ConfigError, StackConfig, load_cdk_json_context
from infra.stack import STACK_NAME, RenewalSagaIndexStack, build_app
from saga_index.index.names import INDEX_NAME, OPEN_INDEX_NAME
from tests.infra.conftest import Synthesised
from tests.infra.template_tools import resources

pytestmark = pytest.mark.infra

TABLE = "AWS::DynamoDB::Table"
PROD_TABLE_NAME = "propflow-prod"


def _string_attributes(*names: str) -> list[dict[str, str]]:
    return [{"AttributeName": name, "AttributeType": "S"} for name in names]


def _key_schema(partition: str, sort: str) -> list[dict[str, str]]:
    return [
        {"AttributeName": partition, "KeyType": "HASH"},
        {"AttributeName": sort, "KeyType": "RANGE"},
    ]


# --- the owned table -------------------------------------------------------------------------


def test_given_default_context_when_synthesised_then_table_is_keyed_on_string_pk_and_sk(
    owned_template: Template,
) -> None:
    attributes = Capture()
    owned_template.has_resource_properties(
        TABLE,
        {
            "TableName": PROD_TABLE_NAME,
            "KeySchema": _key_schema("PK", "SK"),
            "AttributeDefinitions": attributes,
        },
    )
    assert sorted(attributes.as_array(), key=lambda a: a["AttributeName"]) == sorted(
        _string_attributes("PK", "SK", "GSI4PK", "GSI4SK", "OpenSagaPK"),
        key=lambda a: a["AttributeName"],
    )


def test_given_default_context_when_synthesised_then_gsi4_and_the_open_index_project_all(
    owned_template: Template,
) -> None:
    owned_template.has_resource_properties(
        TABLE,
        {
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": "renewal-saga-person-index",
                    "KeySchema": _key_schema("GSI4PK", "GSI4SK"),
                    "Projection": {"ProjectionType": "ALL"},
                },
                {
                    "IndexName": "renewal-saga-open-index",
                    "KeySchema": _key_schema("OpenSagaPK", "GSI4SK"),
                    "Projection": {"ProjectionType": "ALL"},
                },
            ]
        },
    )
    assert INDEX_NAME == "renewal-saga-person-index"
    assert OPEN_INDEX_NAME == "renewal-saga-open-index"


def test_given_default_context_when_synthesised_then_table_is_on_demand_with_pitr(
    owned_template: Template,
) -> None:
    owned_template.has_resource_properties(
        TABLE,
        {
            "BillingMode": "PAY_PER_REQUEST",
            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
            "ProvisionedThroughput": Match.absent(),
        },
    )


def test_given_stack_deleted_or_table_replaced_then_table_is_retained(
    owned_template: Template,
) -> None:
    owned_template.has_resource(
        TABLE, {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    )


def test_given_owned_table_then_table_name_output_references_it(
    owned_template: Template,
) -> None:
    table_id = next(iter(owned_template.find_resources(TABLE)))
    owned_template.has_output("TableName", {"Value": {"Ref": table_id}})


def test_given_construct_when_owning_then_it_exposes_table_and_index_name(
    owned_synth: Synthesised,
) -> None:
    saga_table = owned_synth.stack.saga_table
    assert saga_table.index_name == INDEX_NAME
    assert saga_table.open_index_name == OPEN_INDEX_NAME
    assert isinstance(saga_table.table, cdk.aws_dynamodb.Table)


# --- import mode ---------------------------------------------------------------------------


def test_given_import_existing_table_when_synthesised_then_stack_owns_no_table(
    import_mode_template: Template,
) -> None:
    assert import_mode_template.find_resources(TABLE) == {}
    import_mode_template.has_output("TableName", {"Value": PROD_TABLE_NAME})


def test_given_import_existing_table_when_granting_reads_then_policy_covers_index_arns() -> None:
    # A plain App (no cdk-nag): the probe role and its index wildcard are test scaffolding.
    app = cdk.App(context=load_cdk_json_context())
    config = StackConfig.from_context({**load_cdk_json_context(), "importExistingTable": True})
    stack = RenewalSagaIndexStack(app, STACK_NAME, config=config)
    role = iam.Role(stack, "Probe", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))

    stack.saga_table.table.grant_read_data(role)

    resources = Capture()
    Template.from_stack(stack).has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {"Statement": [Match.object_like({"Resource": resources})]},
            # The probe's own policy: other roles of the stack may have one statement too.
            "Roles": [{"Ref": stack.get_logical_id(role.node.default_child)}],
        },
    )
    rendered = str(resources.as_array())
    assert f"table/{PROD_TABLE_NAME}" in rendered
    assert f"table/{PROD_TABLE_NAME}/index/*" in rendered


# --- context parsing -----------------------------------------------------------------------


def _context(**overrides: Any) -> dict[str, Any]:
    return {**load_cdk_json_context(), **overrides}


def test_given_committed_cdk_json_then_the_stack_attaches_to_propflow_prod() -> None:
    # The production-safe choice is the default: a plain deploy attaches to the existing table
    # and can never create, replace or delete it. Dev/test stacks pass importExistingTable=false.
    assert StackConfig.from_context(_context()) == StackConfig(
        table_name=PROD_TABLE_NAME, import_existing_table=True
    )


def test_given_cli_string_values_then_they_parse_like_json_values() -> None:
    assert StackConfig.from_context(_context(importExistingTable="true")).import_existing_table
    assert (
        StackConfig.from_context(_context(importExistingTable="false")).import_existing_table
        is False
    )


def test_given_powertools_layer_override_then_it_is_kept_and_absent_means_resolve_by_ssm() -> None:
    arn = (
        "arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:7"
    )
    assert StackConfig.from_context(_context(powertoolsLayerArn=arn)).powertools_layer_arn == arn
    assert StackConfig.from_context(_context()).powertools_layer_arn is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("importExistingTable", "maybe"),
        ("importExistingTable", "yes"),
        ("importExistingTable", 1),
        ("tableName", ""),
        ("tableName", "has space"),
        ("tableName", 42),
        ("powertoolsLayerArn", "AWSLambdaPowertoolsPythonV3"),
        ("alarmTopicArn", "pager"),
        ("alarmTopicArn", "arn:aws:sns:us-east-1:123456789012:pager.fifo"),
        ("alarmTopicArn", "arn:aws:sqs:us-east-1:123456789012:pager"),
    ],
)
def test_given_invalid_context_value_then_error_names_key_and_value(key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as raised:
        StackConfig.from_context(_context(**{key: value}))
    assert repr(key) in str(raised.value)
    assert repr(value) in str(raised.value)


@pytest.mark.parametrize("key", ["tableName", "importExistingTable"])
def test_given_missing_context_key_then_error_names_it(key: str) -> None:
    context = _context()
    del context[key]
    with pytest.raises(ConfigError, match=f"'{key}' is missing"):
        StackConfig.from_context(context)


def test_given_bad_cli_override_when_building_app_then_it_fails_before_synth() -> None:
    with pytest.raises(ConfigError, match=r"'importExistingTable'.*'maybe'"):
        build_app(context_overrides={"importExistingTable": "maybe"})


# --- local tables from the template (devkit.schema) ----------------------------------------


def test_given_owned_template_then_create_kwargs_mirror_the_table_definition(
    owned_synth: Synthesised,
) -> None:
    properties = next(iter(owned_synth.template.find_resources(TABLE).values()))["Properties"]

    kwargs = schema.table_create_kwargs(owned_synth.template_json, "local-sagas")

    assert kwargs == {
        "TableName": "local-sagas",
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
        "GlobalSecondaryIndexes": [
            {key: index[key] for key in ("IndexName", "KeySchema", "Projection")}
            for index in properties["GlobalSecondaryIndexes"]
        ],
    }


@pytest.fixture
def moto_dynamodb(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def test_given_owned_template_when_creating_local_table_then_it_describes_as_the_template(
    owned_synth: Synthesised, moto_dynamodb: Any
) -> None:
    template = owned_synth.template_json

    schema.create_table(moto_dynamodb, "local-sagas", template)

    described = moto_dynamodb.describe_table(TableName="local-sagas")["Table"]
    expected = schema.table_create_kwargs(template, "local-sagas")
    assert described["TableStatus"] == "ACTIVE"
    assert described["KeySchema"] == expected["KeySchema"]
    assert sorted(described["AttributeDefinitions"], key=str) == sorted(
        expected["AttributeDefinitions"], key=str
    )
    assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert [
        {key: index[key] for key in ("IndexName", "KeySchema", "Projection")}
        for index in described["GlobalSecondaryIndexes"]
    ] == expected["GlobalSecondaryIndexes"]


def test_given_import_mode_template_then_create_kwargs_refuse_with_a_reason(
    import_mode_synth: Synthesised,
) -> None:
    with pytest.raises(schema.SchemaError, match="importExistingTable"):
        schema.table_create_kwargs(import_mode_synth.template_json, "local-sagas")


def test_given_two_tables_then_create_kwargs_refuse_to_guess(
    owned_synth: Synthesised,
) -> None:
    template = owned_synth.template_json
    (logical_id, table), *_ = template["Resources"].items()
    doubled = {"Resources": {logical_id: table, logical_id + "Copy": table}}
    with pytest.raises(schema.SchemaError, match="expected one"):
        schema.table_create_kwargs(doubled, "local-sagas")


def test_given_template_older_than_a_source_then_it_is_stale(tmp_path: Path) -> None:
    template = tmp_path / f"{STACK_NAME}.template.json"
    template.write_text("{}")
    newest_source = max(path.stat().st_mtime for path in schema.template_sources())

    os.utime(template, (newest_source - 60, newest_source - 60))
    assert schema.is_stale(template)

    os.utime(template, (newest_source + 60, newest_source + 60))
    assert not schema.is_stale(template)
    assert schema.is_stale(tmp_path / "missing.template.json")


def test_the_assembly_is_stale_when_the_functions_asset_or_the_pager_changes() -> None:
    # The deploy rehearsal starts the functions from the owned-table synthesis's assets: every
    # file the asset packs (infra/functions.py) makes it stale, and the pager's subscriptions do.
    sources = schema.assembly_sources()
    lambdas = schema.REPO_ROOT / "lambdas"
    assert set(schema.template_sources()) <= set(sources)
    assert schema.REPO_ROOT / "pager.json" in sources
    assert lambdas / "handlers" / "drift_guard.py" in sources
    assert lambdas / "saga_index" / "store" / "dynamo" / "codec.py" in sources
    asset = [path.relative_to(lambdas) for path in sources if lambdas in path.parents]
    assert not [path for path in asset if path.parts[0] not in ("handlers", "saga_index")]
    assert not [path for path in asset if path.suffix == ".pyc" or "__pycache__" in path.parts]


def test_given_no_template_when_loading_then_it_is_synthesised_there_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owned_synth: Synthesised
) -> None:
    # What `python app.py` writes is the next test's; here, where it writes and what is read.
    synthesised: list[Path] = []

    def synthesise(outdir: Path) -> None:
        synthesised.append(outdir)
        (outdir / f"{STACK_NAME}.template.json").write_text(
            owned_synth.template_path.read_text(encoding="utf-8"), encoding="utf-8"
        )

    monkeypatch.setattr(schema, "_synthesise", synthesise)
    path = tmp_path / "out" / f"{STACK_NAME}.template.json"
    path.parent.mkdir()

    assert schema.load_template(path) == owned_synth.template_json
    assert synthesised == [path.parent]
    # Fresh now: read again without synthesising.
    assert schema.load_template(path) == owned_synth.template_json
    assert synthesised == [path.parent]


def test_the_local_tables_template_is_app_py_synthesised_with_an_owned_table(
    owned_synth: Synthesised,
) -> None:
    # `python app.py` in a subprocess (~18 s of CPU, once a session: the demo, the component
    # and conformance tests and the deploy rehearsal share it in build/owned-table-synth).
    # cdk.json commits import mode; devkit passes the owned-table context itself.
    loaded = schema.load_template()

    expected = owned_synth.template_json
    assert resources(loaded, TABLE) == resources(expected, TABLE)
    assert owned_synth.stack.config.import_existing_table is False
    # The same stack apart from the pager's subscriptions (pager.json is the test's own here).
    kinds = {r["Type"] for r in loaded["Resources"].values()} - {"AWS::SNS::Subscription"}
    assert kinds == {r["Type"] for r in expected["Resources"].values()}
