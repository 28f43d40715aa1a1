"""`saga-index preflight` against moto: the table, its index, point-in-time recovery and
Contributor Insights, and the deployed stack's functions and state machine.

moto cannot create the real stack (docs/platform notes), so each test deploys a stand-in through
moto's CloudFormation: the synthesised template's own functions and state machine, under their
own logical IDs and service names, with trivial code. moto does not implement
DescribeContributorInsights; its answers (and every injected AccessDenied) come from a
`before-call` hook on boto3's default session, so they still pass through the CLI's real clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from devkit.schema import table_create_kwargs
from saga_index.index.names import (
    ENV_POWERTOOLS_SERVICE,
    INDEX_NAME,
    OPEN_INDEX_NAME,
    OPEN_INDEX_PARTITION_KEY,
    STACK_NAME,
)
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from saga_index_cli.preflight.check import (
    PERMISSION_CONTRIBUTOR_INSIGHTS,
    PERMISSION_GET_FUNCTION,
    PERMISSIONS,
)
from saga_index_cli.preflight.stack import (
    EXPECTED_SERVICES,
    STATE_MACHINE_CONSTRUCT,
    TABLE_NAME_OUTPUT,
    construct_name,
)
from saga_index_cli.stack import STATE_MACHINE_OUTPUT_PREFIX

CHECKS = [
    "table",
    "index",
    "open-index",
    "point-in-time-recovery",
    "contributor-insights-table",
    "contributor-insights-index",
    "stack",
    "functions",
    "state-machine",
]
_HASH_LENGTH = 8


def _resources_of(template: dict[str, Any], resource_type: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def _denied(operation: str) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse(None, 400, {}, None), {
        "Error": {"Code": "AccessDeniedException", "Message": f"not authorized to {operation}"},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }


def _unknown_operation() -> tuple[AWSResponse, dict[str, Any]]:
    # What dynalite answers for an operation it does not implement (no message at all).
    return AWSResponse(None, 400, {}, None), {
        "Error": {"Code": "UnknownOperationException", "Message": ""},
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }


@dataclass
class Aws:
    """One test's moto account: the table, the stand-in stack, and the injected answers."""

    template: dict[str, Any]
    table_name: str = "propflow-preflight"
    # DescribeContributorInsights answers by IndexName (None: the table's).
    insights: dict[str | None, dict[str, Any]] = field(default_factory=dict)
    denied: set[str] = field(default_factory=set)
    # Operations the server does not implement (a local DynamoDB-compatible server's).
    unsupported: set[str] = field(default_factory=set)
    # DescribeTable's answer, when a test needs one moto never gives (an index still CREATING).
    table_answer: dict[str, Any] | None = None

    def session_hook(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        if model.name == "DescribeTable" and self.table_answer is not None:
            return AWSResponse(None, 200, {}, None), self.table_answer
        if model.name in self.denied:
            return _denied(model.name)
        if model.name in self.unsupported:
            return _unknown_operation()
        if model.name == "DescribeContributorInsights":
            request = json.loads(params["body"])  # the serialised request, as sent
            answer = self.insights[request.get("IndexName")]
            return AWSResponse(None, 200, {}, None), {**request, **answer}
        return None

    def create_table(
        self,
        *,
        projection: str = "ALL",
        pitr: bool = True,
        open_index: bool = True,
        open_projection: str = "ALL",
    ) -> None:
        """The template's table; `projection` GSI4's, `open_projection` the open index's;
        without `open_index`, as the attached table is before its owning stack adds it."""
        kwargs = table_create_kwargs(self.template, self.table_name)
        for index in kwargs["GlobalSecondaryIndexes"]:
            mine = projection if index["IndexName"] == INDEX_NAME else open_projection
            index["Projection"] = {"ProjectionType": mine}
        if not open_index:
            kwargs["GlobalSecondaryIndexes"] = [
                i for i in kwargs["GlobalSecondaryIndexes"] if i["IndexName"] != OPEN_INDEX_NAME
            ]
            kwargs["AttributeDefinitions"] = [
                d
                for d in kwargs["AttributeDefinitions"]
                if d["AttributeName"] != OPEN_INDEX_PARTITION_KEY
            ]
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(**kwargs)
        if pitr:
            dynamodb.update_continuous_backups(
                TableName=self.table_name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )

    def deploy_stack(
        self, *, omit: tuple[str, ...] = (), table_output: str | None = None
    ) -> dict[str, str]:
        """The synthesised stack's functions and state machine, under their logical IDs, in
        moto's CloudFormation; returns logical ID -> physical ID."""
        resources: dict[str, Any] = {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": []}
                },
            }
        }
        role = {"Fn::GetAtt": ["Role", "Arn"]}
        for logical_id, fn in _resources_of(self.template, "AWS::Lambda::Function").items():
            if logical_id[:-_HASH_LENGTH] in omit:
                continue
            variables = fn["Properties"]["Environment"]["Variables"]
            resources[logical_id] = {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Runtime": "python3.13",
                    "Handler": "index.handler",
                    "Role": role,
                    "Code": {"ZipFile": "def handler(event, context):\n    return None\n"},
                    "Environment": {
                        "Variables": {ENV_POWERTOOLS_SERVICE: variables[ENV_POWERTOOLS_SERVICE]}
                    },
                },
            }
        (machine_id,) = _resources_of(self.template, "AWS::StepFunctions::StateMachine")
        resources[machine_id] = {
            "Type": "AWS::StepFunctions::StateMachine",
            "Properties": {
                "RoleArn": role,
                "DefinitionString": json.dumps(
                    {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
                ),
            },
        }
        (output_key,) = [
            k for k in self.template["Outputs"] if k.startswith("BackfillStateMachineArn")
        ]
        outputs = {
            output_key: {"Value": {"Ref": machine_id}},
            "TableName": {"Value": table_output or self.table_name},
        }
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(
            StackName=STACK_NAME,
            TemplateBody=json.dumps({"Resources": resources, "Outputs": outputs}),
        )
        summaries = cloudformation.list_stack_resources(StackName=STACK_NAME)
        return {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in summaries["StackResourceSummaries"]
        }

    def ready(self) -> dict[str, str]:
        """Everything the runbook assumes, in place."""
        self.create_table()
        self.insights[None] = {
            "ContributorInsightsStatus": "ENABLED",
            "ContributorInsightsMode": "THROTTLED_KEYS",
        }
        self.insights[INDEX_NAME] = {
            "ContributorInsightsStatus": "ENABLED",
            "ContributorInsightsMode": "THROTTLED_KEYS",
        }
        return self.deploy_stack()


@pytest.fixture
def aws(synthesized_template: dict[str, Any]) -> Iterator[Aws]:
    with mock_aws():
        boto3.setup_default_session()
        state = Aws(template=synthesized_template)
        boto3.DEFAULT_SESSION.events.register("before-call.*.*", state.session_hook)
        try:
            yield state
        finally:
            boto3.DEFAULT_SESSION = None


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, table: str | None = "propflow-preflight"
) -> tuple[int, str, str]:
    global_options = ["--table", table] if table else []
    with pytest.raises(SystemExit) as exited:
        main([*global_options, "preflight", *argv], hooks=CliHooks(identity=lambda _: "t@h"))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "--json", *argv)
    (line,) = out.splitlines()
    return code, json.loads(line)


def checks_of(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in doc["checks"]}


def failed(doc: dict[str, Any]) -> list[str]:
    return [c["name"] for c in doc["checks"] if not c["ok"]]


# ---- all in place ------------------------------------------------------------------------------


def test_everything_in_place_passes_and_says_which_function_is_which(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    physical = aws.ready()

    code, out, err = run(capsys, "--json")

    assert code == 0
    (line,) = out.splitlines()  # stdout is one JSON object, nothing else
    doc = json.loads(line)
    assert doc["ok"] is True
    assert [c["name"] for c in doc["checks"]] == CHECKS
    assert all(c["ok"] and c["fix"] is None for c in doc["checks"])
    assert "THROTTLED_KEYS" in checks_of(doc)["contributor-insights-index"]["detail"]
    by_construct = {f["construct"]: f for f in doc["stack"]["functions"]}
    assert set(by_construct) == {construct_name(s) for s in EXPECTED_SERVICES}
    for logical_id, name in physical.items():
        construct = logical_id[:-_HASH_LENGTH]
        if construct in by_construct:
            assert by_construct[construct]["name"] == name
            assert by_construct[construct]["logicalId"] == logical_id
            assert by_construct[construct]["exists"] is True
    machine = doc["stack"]["stateMachine"]
    assert machine["arn"] == physical[machine["logicalId"]]
    assert (machine["construct"], machine["status"]) == ("BackfillStateMachine", "ACTIVE")
    assert doc["stack"]["outputs"]["TableName"] == aws.table_name
    assert "{" not in err


def test_human_output_is_one_line_per_check_then_which_is_which(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    physical = aws.ready()

    code, out, _ = run(capsys)

    assert code == 0
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[: len(CHECKS)]] == [
        f"PASS  {name}" for name in CHECKS
    ]
    drift_guard = next(v for k, v in physical.items() if k.startswith("FunctionsDriftGuard"))
    assert any(
        line.split() == ["FunctionsDriftGuard", drift_guard] for line in lines[len(CHECKS) :]
    )
    assert lines[-1] == f"all {len(CHECKS)} checks passed"


# ---- the table ---------------------------------------------------------------------------------


def test_keys_only_index_and_pitr_off_fail_with_their_fixes_and_the_rest_still_runs(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)
    aws.create_table(projection="KEYS_ONLY", pitr=False)

    code, doc = run_json(capsys)

    assert code == 1
    assert doc["ok"] is False
    assert failed(doc) == ["index", "point-in-time-recovery"]
    checks = checks_of(doc)
    assert "projects KEYS_ONLY, not ALL" in checks["index"]["detail"]
    assert "cannot change" in checks["index"]["fix"]
    assert "DISABLED" in checks["point-in-time-recovery"]["detail"]
    assert checks["point-in-time-recovery"]["fix"].endswith(
        "aws dynamodb update-continuous-backups --region us-east-1 --table-name "
        "propflow-preflight --point-in-time-recovery-specification "
        "PointInTimeRecoveryEnabled=true"
    )


def test_a_missing_open_index_warns_names_the_move_that_needs_it_and_exits_0(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)
    aws.create_table(open_index=False)

    code, doc = run_json(capsys)

    assert code == 0
    assert doc["ok"] is True
    assert (doc["failed"], doc["warnings"]) == ([], ["open-index"])
    check = checks_of(doc)["open-index"]
    assert (check["ok"], check["verdict"]) == (True, "warn")
    assert check["detail"] == (
        f"index {OPEN_INDEX_NAME!r} does not exist: not needed for the layout's runbook, "
        "required before `saga-index open-index set adding`"
    )
    fix = check["fix"]
    assert fix.startswith("before `saga-index open-index set adding`: ")
    assert f"{OPEN_INDEX_NAME} does not exist on table propflow-preflight" in fix
    assert (
        "`aws dynamodb update-table --region us-east-1 --table-name propflow-preflight "
        "--attribute-definitions " in fix
    )
    assert all(c["verdict"] == "pass" for c in doc["checks"] if c["name"] != "open-index")


def test_a_missing_open_index_is_a_warn_line_and_a_warnings_section_in_text(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)
    aws.create_table(open_index=False, pitr=False)

    code, out, _ = run(capsys)

    assert code == 1  # point-in-time recovery FAILED; the warning changes nothing
    lines = out.splitlines()
    assert lines[CHECKS.index("open-index")].startswith("WARN  open-index: ")
    warnings = lines.index("Warnings (step 1 does not need these; a later step does):")
    assert lines[warnings + 1].startswith("  open-index: before `saga-index open-index set adding`")
    assert lines[-1] == f"1 of {len(CHECKS)} checks failed; 1 warned: open-index"


def test_an_open_index_still_backfilling_warns_with_the_command_that_shows_its_progress(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    """moto builds an index ACTIVE at once: DescribeTable's answer is moto's own, with the
    open index as DynamoDB reports it while it reads the table into it."""
    aws.ready()
    answer = boto3.client("dynamodb").describe_table(TableName=aws.table_name)
    for index in answer["Table"]["GlobalSecondaryIndexes"]:
        if index["IndexName"] == OPEN_INDEX_NAME:
            index.update(IndexStatus="CREATING", Backfilling=True)
    aws.table_answer = answer

    code, doc = run_json(capsys)

    assert code == 0
    check = checks_of(doc)["open-index"]
    assert check["verdict"] == "warn"
    assert f"index {OPEN_INDEX_NAME!r} is CREATING (Backfilling: true)" in check["detail"]
    assert "DynamoDB is still reading the table into it" in check["fix"]
    assert (
        "`aws dynamodb describe-table --region us-east-1 --table-name propflow-preflight "
        "--query " in check["fix"]
    )


def test_before_the_open_index_move_a_missing_or_building_open_index_fails_with_exit_1(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--open-index` (runbook O0): what is a WARN for the layout's runbook refuses the open
    index's own move, as `open-index set adding` does, with the same fix; once ready, it passes."""
    aws.ready()
    answer = boto3.client("dynamodb").describe_table(TableName=aws.table_name)
    code, doc = run_json(capsys, "--open-index")
    assert (code, doc["failed"], doc["warnings"]) == (0, [], [])
    assert checks_of(doc)["open-index"]["verdict"] == "pass"

    for index in answer["Table"]["GlobalSecondaryIndexes"]:
        if index["IndexName"] == OPEN_INDEX_NAME:
            index.update(IndexStatus="ACTIVE", Backfilling=True)
    aws.table_answer = answer
    code, doc = run_json(capsys, "--open-index")
    assert (code, doc["ok"], doc["failed"], doc["warnings"]) == (1, False, ["open-index"], [])
    check = checks_of(doc)["open-index"]
    assert check["verdict"] == "fail"
    assert check["detail"] == (
        f"index {OPEN_INDEX_NAME!r} is ACTIVE (Backfilling: true): `saga-index open-index set "
        "adding` refuses until it is ACTIVE and not backfilling"
    )
    assert "wait until IndexStatus is ACTIVE and Backfilling is not true" in check["fix"]

    aws.table_answer = None
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)
    aws.create_table(open_index=False)
    code, out, _ = run(capsys, "--open-index")
    assert code == 1
    lines = out.splitlines()
    assert lines[CHECKS.index("open-index")].startswith(
        f"FAIL  open-index: index {OPEN_INDEX_NAME!r} does not exist: "
    )
    assert lines[-1] == f"1 of {len(CHECKS)} checks failed"
    assert any(
        line.startswith("  open-index: before `saga-index open-index set adding`: ")
        and "aws dynamodb update-table" in line
        for line in lines
    )


def test_an_open_index_built_otherwise_fails_with_how_to_replace_it(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)
    aws.create_table(open_projection="KEYS_ONLY")

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["open-index"]
    check = checks_of(doc)["open-index"]
    assert check["verdict"] == "fail"
    assert "it projects KEYS_ONLY, not ALL" in check["fix"]
    assert "DynamoDB cannot change an index's keys or projection" in check["fix"]


def test_a_missing_table_fails_every_table_check_naming_it(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    boto3.client("dynamodb").delete_table(TableName=aws.table_name)

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["table", "index", "open-index", "point-in-time-recovery"]
    checks = checks_of(doc)
    assert "'propflow-preflight' does not exist in region us-east-1" in checks["table"]["detail"]
    assert "not checked" in checks["index"]["detail"]
    assert "not checked" in checks["open-index"]["detail"]
    assert "does not exist" in checks["point-in-time-recovery"]["fix"]


def test_contributor_insights_off_on_the_index_fails_with_the_command_to_enable_it(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.insights[INDEX_NAME] = {"ContributorInsightsStatus": "DISABLED"}

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["contributor-insights-index"]
    check = checks_of(doc)["contributor-insights-index"]
    assert check["detail"] == (
        f"Contributor Insights for the index {INDEX_NAME!r} of table 'propflow-preflight' "
        "is DISABLED"
    )
    assert check["fix"].endswith(
        "aws dynamodb update-contributor-insights --region us-east-1 --table-name "
        f"propflow-preflight --index-name {INDEX_NAME} --contributor-insights-action ENABLE "
        "--contributor-insights-mode THROTTLED_KEYS"
    )


def test_a_check_that_is_denied_fails_naming_the_permission(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.denied.add("DescribeContributorInsights")

    code, doc = run_json(capsys)

    # Nothing was found wrong, but two checks could not be made: exit 4, not 1
    assert code == 4
    assert failed(doc) == ["contributor-insights-table", "contributor-insights-index"]
    assert doc["failed"] == []
    assert doc["notChecked"] == {
        "contributor-insights-table": "denied",
        "contributor-insights-index": "denied",
    }
    for name in failed(doc):
        check = checks_of(doc)[name]
        assert check["verdict"] == "denied"
        assert check["detail"].startswith("denied: DynamoDB at ")
        assert "refused DescribeContributorInsights (AccessDeniedException" in check["detail"]
        assert PERMISSION_CONTRIBUTOR_INSIGHTS in check["fix"]


def test_a_call_the_server_does_not_support_is_unsupported_not_a_credentials_problem(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.unsupported.update({"DescribeContinuousBackups", "DescribeContributorInsights"})

    code, doc = run_json(capsys)

    assert code == 4  # nothing FAILED; three checks could not be made
    assert doc["notChecked"] == dict.fromkeys(
        ("point-in-time-recovery", "contributor-insights-table", "contributor-insights-index"),
        "unsupported",
    )
    pitr = checks_of(doc)["point-in-time-recovery"]
    assert pitr["detail"].startswith("not supported by this server: DynamoDB at ")
    assert pitr["detail"].endswith("does not implement DescribeContinuousBackups")
    assert pitr["fix"].startswith("nothing to fix here: this server")
    assert "credentials" not in pitr["fix"]
    code, out, _ = run(capsys)
    assert "UNSUPPORTED  point-in-time-recovery: not supported by this server" in out


def test_a_failed_check_wins_over_one_that_could_not_be_made(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.unsupported.add("DescribeContinuousBackups")
    aws.insights[None] = {"ContributorInsightsStatus": "DISABLED"}

    code, doc = run_json(capsys)

    assert code == 1
    assert doc["failed"] == ["contributor-insights-table"]
    assert checks_of(doc)["contributor-insights-table"]["verdict"] == "fail"


# ---- the stack ---------------------------------------------------------------------------------


def test_a_function_missing_from_the_stack_fails_naming_its_construct(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.create_table()
    aws.insights[None] = aws.insights[INDEX_NAME] = {"ContributorInsightsStatus": "ENABLED"}
    aws.deploy_stack(omit=("FunctionsBackfillWorker",))

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["functions"]
    detail = checks_of(doc)["functions"]["detail"]
    assert detail.startswith(f"1 of {len(EXPECTED_SERVICES)} functions")
    assert "FunctionsBackfillWorker (backfill-worker): the stack has no function" in detail
    worker = next(f for f in doc["stack"]["functions"] if f["service"] == "backfill-worker")
    assert (worker["name"], worker["exists"]) == (None, False)
    assert "mode not reported" in checks_of(doc)["contributor-insights-table"]["detail"]


def test_a_function_deleted_outside_cloudformation_fails(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    physical = aws.ready()
    drift_guard = next(v for k, v in physical.items() if k.startswith("FunctionsDriftGuard"))
    boto3.client("lambda").delete_function(FunctionName=drift_guard)

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["functions"]
    assert (
        "FunctionsDriftGuard (drift-guard): Lambda has no such function"
        in (checks_of(doc)["functions"]["detail"])
    )
    assert "npx cdk deploy RenewalSagaIndex" in checks_of(doc)["functions"]["fix"]


def test_lambda_denied_fails_the_functions_check_naming_the_permission(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.denied.add("GetFunctionConfiguration")

    code, doc = run_json(capsys)

    assert code == 4
    assert failed(doc) == ["functions"]
    assert checks_of(doc)["functions"]["verdict"] == "denied"
    check = checks_of(doc)["functions"]
    assert check["detail"].startswith(f"{len(EXPECTED_SERVICES)} of {len(EXPECTED_SERVICES)}")
    assert PERMISSION_GET_FUNCTION in check["fix"]
    assert all(f["exists"] is None for f in doc["stack"]["functions"])


def test_no_stack_fails_the_stack_checks_and_still_checks_the_table(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()

    code, doc = run_json(capsys, "--stack-name", "SomeOtherStack")

    assert code == 1
    assert failed(doc) == ["stack", "functions", "state-machine"]
    checks = checks_of(doc)
    assert checks["stack"]["detail"] == "stack 'SomeOtherStack' does not exist in this region"
    assert "--stack-name" in checks["stack"]["fix"]
    assert checks["functions"]["detail"].startswith("not checked: ")
    assert doc["stack"]["stateMachine"] is None


def test_an_unreachable_service_fails_its_checks_naming_the_permission(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    # Nothing listens on the discard port: the connection is refused at once.
    with pytest.raises(SystemExit) as exited:
        main(
            [
                "--table",
                aws.table_name,
                "--max-attempts",
                "1",
                "preflight",
                "--json",
                "--cloudformation-endpoint-url",
                "http://127.0.0.1:9",
            ]
        )
    doc = json.loads(capsys.readouterr().out)

    # Nothing found wrong, three checks not made: exit 4 ("could not complete"), not 1
    assert exited.value.code == 4
    assert failed(doc) == ["stack", "functions", "state-machine"]
    assert doc["notChecked"] == dict.fromkeys(
        ("stack", "functions", "state-machine"), "unreachable"
    )
    checks = checks_of(doc)
    assert checks["stack"]["detail"].startswith(
        "could not reach CloudFormation at http://127.0.0.1:9 (DescribeStacks: "
        "EndpointConnectionError"
    )
    assert "cloudformation:DescribeStacks" in checks["stack"]["fix"]
    assert "cloudformation:ListStackResources" in checks["functions"]["fix"]


def test_a_stack_serving_another_table_fails(aws: Aws, capsys: pytest.CaptureFixture[str]) -> None:
    aws.create_table()
    aws.insights[None] = aws.insights[INDEX_NAME] = {"ContributorInsightsStatus": "ENABLED"}
    aws.deploy_stack(table_output="propflow-staging")

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["stack"]
    assert (
        "its functions use table 'propflow-staging', not 'propflow-preflight'"
        in (checks_of(doc)["stack"]["detail"])
    )


def test_a_state_machine_deleted_outside_cloudformation_fails(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    physical = aws.ready()
    arn = next(v for k, v in physical.items() if k.startswith("BackfillStateMachine"))
    boto3.client("stepfunctions").delete_state_machine(stateMachineArn=arn)

    code, doc = run_json(capsys)

    assert code == 1
    assert failed(doc) == ["state-machine"]
    assert "Step Functions has no such state machine" in checks_of(doc)["state-machine"]["detail"]
    assert doc["stack"]["stateMachine"]["exists"] is False


def test_human_output_ends_with_the_fixes_of_the_failed_checks(
    aws: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    aws.ready()
    aws.insights[None] = {"ContributorInsightsStatus": "ENABLING"}

    code, out, _ = run(capsys)

    assert code == 1
    lines = out.splitlines()
    assert lines[CHECKS.index("contributor-insights-table")].startswith(
        "FAIL  contributor-insights-table: "
    )
    fixes = lines[lines.index("To fix:") + 1 :]
    assert fixes[0].startswith("  contributor-insights-table: it is being turned on")
    assert lines[-1] == f"1 of {len(CHECKS)} checks failed"


# ---- bad usage ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--stack-name", "1-not a stack"], "'1-not a stack' is not a CloudFormation stack name"),
        (["--lambda-endpoint-url", "ftp://host"], "'ftp://host' is not an endpoint URL"),
        (["--cloudformation-endpoint-url", "localhost"], "'localhost' is not an endpoint URL"),
        (["--no-such-option"], "No such option"),
    ],
)
def test_bad_usage_exits_2_naming_the_problem(
    aws: Aws, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    code, out, err = run(capsys, "--json", *argv)

    assert (code, out) == (2, "")
    assert named in err


def test_a_bad_endpoint_in_the_environment_exits_2(
    aws: Aws, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SFN", "not-a-url")

    code, out, err = run(capsys, "--json")

    assert (code, out) == (2, "")
    assert "'not-a-url' is not an endpoint URL" in err


def test_no_table_exits_2(
    aws: Aws, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAGA_TABLE_NAME", raising=False)

    code, out, err = run(capsys, "--json", table=None)

    assert (code, out) == (2, "")
    assert "no table given" in err


# ---- the expectations track the stack ----------------------------------------------------------


def test_every_function_of_the_synthesised_stack_is_one_preflight_expects(
    synthesized_template: dict[str, Any],
) -> None:
    functions = _resources_of(synthesized_template, "AWS::Lambda::Function")
    by_construct = {logical_id[:-_HASH_LENGTH]: fn for logical_id, fn in functions.items()}
    expected = {construct_name(s): s for s in EXPECTED_SERVICES}

    assert set(by_construct) == set(expected)
    for construct, service in expected.items():
        variables = by_construct[construct]["Properties"]["Environment"]["Variables"]
        assert variables[ENV_POWERTOOLS_SERVICE] == service
    (machine,) = _resources_of(synthesized_template, "AWS::StepFunctions::StateMachine")
    assert machine[:-_HASH_LENGTH] == STATE_MACHINE_CONSTRUCT
    # The outputs the stack check reads.
    assert TABLE_NAME_OUTPUT in synthesized_template["Outputs"]
    assert [k for k in synthesized_template["Outputs"] if k.startswith(STATE_MACHINE_OUTPUT_PREFIX)]


def test_the_help_names_every_permission_preflight_needs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--help", table=None)

    assert code == 0
    flat = " ".join(out.split())
    for permission in PERMISSIONS:
        assert permission in flat
