"""`saga-index preflight`: what the runbook assumes before its step 1, checked, read-only.

Checks, each reported PASS or FAIL with what to do when it fails:

- `table`: the table exists and is ACTIVE (or UPDATING) (DescribeTable);
- `index`: the index renewal-saga-person-index exists, is ACTIVE, is keyed GSI4PK/GSI4SK and
  projects ALL (the same DescribeTable);
- `point-in-time-recovery`: ON (DescribeContinuousBackups);
- `contributor-insights-table`, `contributor-insights-index`: ENABLED for the table and for the
  index (DescribeContributorInsights, with IndexName for the index). In import mode
  (`importExistingTable=true`) the stack can set neither this nor point-in-time recovery, so
  the operator must: the fix is the AWS CLI command;
- `stack`: the stack exists, its last operation completed, and its `TableName` output names the
  table checked here (DescribeStacks);
- `functions`: every function the code expects (the sweeps, the drift guard, the backfill's
  plan, worker and verify: saga_index.names) is a resource of the stack (ListStackResources,
  which says which generated name is which construct) and exists in Lambda
  (GetFunctionConfiguration: a function deleted outside CloudFormation still shows
  CREATE_COMPLETE in the stack), is not Failed, and runs the service it is named for;
- `state-machine`: the stack's state machine exists in Step Functions (DescribeStateMachine)
  and is the one the stack output `BackfillStateMachineArn...` names.

A check that cannot be made (access denied, no credentials, no network) fails and names the
permission it needs; it never passes silently. Every check runs, whatever the others found.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index import names
from saga_index_cli.context import CliContext, emit, pass_cli, service_endpoint_option
from saga_index_cli.stack import (
    FUNCTION_TYPE,
    STATE_MACHINE_OUTPUT_PREFIX,
    STATE_MACHINE_TYPE,
    DeployedStack,
    StackDescription,
    StackLookupError,
    StackResource,
    describe_stack,
    read_stack,
    stack_name_option,
    state_machine_arn_from_outputs,
)

EXIT_PASSED, EXIT_FAILED = 0, 1

# Each function's logical ID is names.FUNCTIONS_CONSTRUCT, its construct ID and CDK's hash.
FUNCTIONS_SCOPE = names.FUNCTIONS_CONSTRUCT
STATE_MACHINE_CONSTRUCT = "BackfillStateMachine"
# The stack output naming the table the stack's functions use (infra/stack.py).
TABLE_NAME_OUTPUT = names.OUTPUT_TABLE_NAME

# Every function the code expects, by the service name it runs as (POWERTOOLS_SERVICE_NAME).
EXPECTED_SERVICES: tuple[str, ...] = (
    *names.SWEEP_JOBS,
    names.SERVICE_DRIFT_GUARD,
    names.SERVICE_BACKFILL_PLAN,
    names.SERVICE_BACKFILL_WORKER,
    names.SERVICE_BACKFILL_VERIFY,
)

# The stack statuses in which its resources are the last deploy's, complete.
_SETTLED_STACK = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})
# DescribeTable statuses in which the table serves reads and writes.
_SERVING_TABLE = frozenset({"ACTIVE", "UPDATING"})
# Error codes that mean "the caller may not", as opposed to "it is not there".
_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedException"}
)

# IAM actions each check needs.
PERMISSION_DESCRIBE_TABLE = "dynamodb:DescribeTable"
PERMISSION_CONTINUOUS_BACKUPS = "dynamodb:DescribeContinuousBackups"
PERMISSION_CONTRIBUTOR_INSIGHTS = "dynamodb:DescribeContributorInsights"
PERMISSION_DESCRIBE_STACKS = "cloudformation:DescribeStacks"
PERMISSION_LIST_STACK_RESOURCES = "cloudformation:ListStackResources"
PERMISSION_GET_FUNCTION = "lambda:GetFunctionConfiguration"
PERMISSION_DESCRIBE_STATE_MACHINE = "states:DescribeStateMachine"
PERMISSIONS: tuple[str, ...] = (
    PERMISSION_DESCRIBE_TABLE,
    PERMISSION_CONTINUOUS_BACKUPS,
    PERMISSION_CONTRIBUTOR_INSIGHTS,
    PERMISSION_DESCRIBE_STACKS,
    PERMISSION_LIST_STACK_RESOURCES,
    PERMISSION_GET_FUNCTION,
    PERMISSION_DESCRIBE_STATE_MACHINE,
)


def construct_name(service: str) -> str:
    """`drift-guard` -> `FunctionsDriftGuard`: infra names each function's construct after the
    service it runs (DriftGuard, BackfillWorker, WorkflowHealthSweep, ...)."""
    return FUNCTIONS_SCOPE + "".join(part.capitalize() for part in service.split("-"))


@dataclass(frozen=True)
class Check:
    """One check's verdict: `fix` says what to do when it failed (None when it passed)."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


class _Unavailable(Exception):
    """A check could not be made: the call failed (denied, no credentials, no network)."""

    def __init__(self, err: BaseException, permission: str, resource: str) -> None:
        super().__init__(str(err))
        self.err = err
        self.permission = permission
        self.resource = resource


def _error_code(err: BaseException) -> str | None:
    current: BaseException | None = err
    while current is not None:
        if isinstance(current, ClientError):
            return str(current.response.get("Error", {}).get("Code", "")) or None
        current = current.__cause__
    return None


def _error_text(err: BaseException) -> str:
    current: BaseException | None = err
    while current is not None:
        if isinstance(current, ClientError):
            error = current.response.get("Error", {})
            code = error.get("Code") or type(current).__name__
            return f"{code} on {current.operation_name}: {error.get('Message') or current}"
        if isinstance(current, BotoCoreError):
            return f"{type(current).__name__}: {current}"
        current = current.__cause__
    return f"{type(err).__name__}: {err}"


def _unavailable(name: str, failure: _Unavailable) -> Check:
    """The failure of a check that could not be made, naming the permission it needs."""
    code = _error_code(failure.err)
    if _is_not_found(failure.err):
        fix = f"{failure.resource} does not exist: check --table, --region and --endpoint-url"
    elif code in _DENIED_CODES:
        fix = (
            f"the caller may not call {failure.permission} on {failure.resource}: grant it "
            "(preflight needs only read permissions), then run preflight again"
        )
    else:
        fix = (
            f"check the credentials (AWS_PROFILE), --region and the network path to the "
            f"service (its endpoint option); this check needs {failure.permission} on "
            f"{failure.resource}"
        )
    return Check(name, False, f"could not check: {_error_text(failure.err)}", fix)


def _call(permission: str, resource: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (ClientError, BotoCoreError) as err:
        raise _Unavailable(err, permission, resource) from err


def _is_not_found(err: BaseException) -> bool:
    return _error_code(err) in {"ResourceNotFoundException", "TableNotFoundException"}


def _aws_command(region: str | None, *words: str) -> str:
    region_words = ("--region", region) if region else ()
    return shlex.join(("aws", *words[:2], *region_words, *words[2:]))


# ---- DynamoDB ----------------------------------------------------------------------------------


@dataclass
class _Table:
    """DescribeTable's answer, or why there is none."""

    description: dict[str, Any] | None
    failure: Check | None


def describe_table(dynamodb: Any, table: str) -> _Table:
    try:
        response = _call(
            PERMISSION_DESCRIBE_TABLE,
            f"table {table}",
            lambda: dynamodb.describe_table(TableName=table),
        )
    except _Unavailable as failure:
        if _is_not_found(failure.err):
            return _Table(
                None,
                Check(
                    "table",
                    False,
                    f"table {table!r} does not exist in region "
                    f"{dynamodb.meta.region_name} at {dynamodb.meta.endpoint_url}",
                    "check --table (or SAGA_TABLE_NAME), --region and --endpoint-url: the "
                    "table is the one cdk.json's tableName names",
                ),
            )
        return _Table(None, _unavailable("table", failure))
    return _Table(response["Table"], None)


def check_table(described: _Table, table: str) -> Check:
    if described.description is None:
        assert described.failure is not None
        return described.failure
    status = str(described.description.get("TableStatus", "UNKNOWN"))
    if status not in _SERVING_TABLE:
        return Check(
            "table",
            False,
            f"table {table!r} is {status}",
            "the runbook needs a table that serves reads and writes (ACTIVE or UPDATING): "
            "wait for CREATING to end; ARCHIVED or INACCESSIBLE_ENCRYPTION_CREDENTIALS need the "
            "table restored or its KMS key made usable first",
        )
    return Check("table", True, f"table {table!r} exists ({status})")


def check_index(described: _Table, table: str) -> Check:
    index = names.INDEX_NAME
    if described.description is None:
        return Check(
            "index",
            False,
            f"index {index!r} not checked: the table could not be described (see check table)",
            "fix check table first",
        )
    found = [
        gsi
        for gsi in described.description.get("GlobalSecondaryIndexes", [])
        if gsi.get("IndexName") == index
    ]
    if not found:
        present = ", ".join(
            sorted(g["IndexName"] for g in described.description.get("GlobalSecondaryIndexes", []))
        )
        return Check(
            "index",
            False,
            f"table {table!r} has no index {index!r} (its indexes: {present or 'none'})",
            f"the runbook re-keys an existing index: check --table; the table this stack "
            f"serves carries {index} (keys {names.INDEX_PARTITION_KEY}/"
            f"{names.INDEX_SORT_KEY}, projection ALL)",
        )
    gsi = found[0]
    status = str(gsi.get("IndexStatus", "UNKNOWN"))
    projection = str(gsi.get("Projection", {}).get("ProjectionType", "UNKNOWN"))
    key_schema = {k["KeyType"]: k["AttributeName"] for k in gsi.get("KeySchema", [])}
    expected_keys = {"HASH": names.INDEX_PARTITION_KEY, "RANGE": names.INDEX_SORT_KEY}
    problems: list[str] = []
    fixes: list[str] = []
    if status != "ACTIVE":
        backfilling = " (backfilling)" if gsi.get("Backfilling") else ""
        problems.append(f"it is {status}{backfilling}, not ACTIVE")
        fixes.append("wait until the index is ACTIVE (describe-table shows IndexStatus)")
    if key_schema != expected_keys:
        problems.append(
            f"its keys are {key_schema.get('HASH')}/{key_schema.get('RANGE')}, not "
            f"{names.INDEX_PARTITION_KEY}/{names.INDEX_SORT_KEY}"
        )
    if projection != "ALL":
        problems.append(f"it projects {projection}, not ALL")
    if key_schema != expected_keys or projection != "ALL":
        fixes.append(
            "every reader takes whole saga rows from this index, and DynamoDB cannot change an "
            "existing index's keys or projection: stop here; this table is not the one the "
            "runbook is written for"
        )
    if problems:
        return Check("index", False, f"index {index!r}: " + "; ".join(problems), "; ".join(fixes))
    return Check(
        "index",
        True,
        f"index {index!r} is ACTIVE, keyed {names.INDEX_PARTITION_KEY}/{names.INDEX_SORT_KEY}, "
        "projects ALL",
    )


def check_point_in_time_recovery(dynamodb: Any, table: str, region: str | None) -> Check:
    name = "point-in-time-recovery"
    try:
        response = _call(
            PERMISSION_CONTINUOUS_BACKUPS,
            f"table {table}",
            lambda: dynamodb.describe_continuous_backups(TableName=table),
        )
    except _Unavailable as failure:
        return _unavailable(name, failure)
    pitr = response.get("ContinuousBackupsDescription", {}).get(
        "PointInTimeRecoveryDescription", {}
    )
    status = str(pitr.get("PointInTimeRecoveryStatus", "UNKNOWN"))
    if status == "ENABLED":
        days = pitr.get("RecoveryPeriodInDays")
        earliest = pitr.get("EarliestRestorableDateTime")
        extras: list[str] = []
        if days:
            extras.append(f"recovery period {days} days")
        if earliest:
            extras.append(f"restorable from {earliest:%Y-%m-%dT%H:%M:%S%z}")
        return Check(name, True, "ENABLED" + (f" ({', '.join(extras)})" if extras else ""))
    return Check(
        name,
        False,
        f"point-in-time recovery of table {table!r} is {status}",
        "import mode (importExistingTable) cannot set it; turn it on: "
        + _aws_command(
            region,
            "dynamodb",
            "update-continuous-backups",
            "--table-name",
            table,
            "--point-in-time-recovery-specification",
            "PointInTimeRecoveryEnabled=true",
        ),
    )


def check_contributor_insights(
    dynamodb: Any, table: str, region: str | None, *, index: str | None
) -> Check:
    name = "contributor-insights-index" if index else "contributor-insights-table"
    what = f"index {index!r} of table {table!r}" if index else f"table {table!r}"
    request: dict[str, str] = {"TableName": table, **({"IndexName": index} if index else {})}
    resource = f"table {table}" + (f" (index {index})" if index else "")
    try:
        response = _call(
            PERMISSION_CONTRIBUTOR_INSIGHTS,
            resource,
            lambda: dynamodb.describe_contributor_insights(**request),
        )
    except _Unavailable as failure:
        return _unavailable(name, failure)
    status = str(response.get("ContributorInsightsStatus", "UNKNOWN"))
    mode = response.get("ContributorInsightsMode")
    shown_mode = f"mode {mode}" if mode else "mode not reported"
    if status == "ENABLED":
        return Check(name, True, f"ENABLED for the {what} ({shown_mode})")
    exception = response.get("FailureException") or {}
    because = (
        f": {exception.get('ExceptionName')}: {exception.get('ExceptionDescription')}"
        if exception
        else ""
    )
    enable = _aws_command(
        region,
        "dynamodb",
        "update-contributor-insights",
        "--table-name",
        table,
        *(("--index-name", index) if index else ()),
        "--contributor-insights-action",
        "ENABLE",
        "--contributor-insights-mode",
        "THROTTLED_KEYS",
    )
    if status == "ENABLING":
        fix = f"it is being turned on: run preflight again in a few minutes (or: {enable})"
    else:
        fix = f"import mode (importExistingTable) cannot set it; enable it: {enable}"
    return Check(name, False, f"Contributor Insights for the {what} is {status}{because}", fix)


# ---- the stack ---------------------------------------------------------------------------------


_DEPLOY = f"deploy the stack: npx cdk deploy {names.STACK_NAME}"


@dataclass
class FunctionReport:
    """One expected function: which construct, which deployed name, and what Lambda says."""

    service: str
    construct: str
    name: str | None = None
    logical_id: str | None = None
    resource_status: str | None = None
    exists: bool | None = None
    state: str | None = None
    problem: str | None = None
    fix: str | None = None

    def fail(self, problem: str, fix: str) -> None:
        if self.problem is None:
            self.problem, self.fix = problem, fix

    def to_json(self) -> dict[str, Any]:
        return {
            "construct": self.construct,
            "service": self.service,
            "name": self.name,
            "logicalId": self.logical_id,
            "resourceStatus": self.resource_status,
            "exists": self.exists,
            "state": self.state,
            "problem": self.problem,
        }


@dataclass
class StackReport:
    """What preflight learnt of the stack, for `--json`'s `stack` and the human listing."""

    name: str
    status: str | None = None
    outputs: dict[str, str] | None = None
    functions: list[FunctionReport] = field(default_factory=list)
    other_functions: list[dict[str, str]] = field(default_factory=list)
    state_machine: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "outputs": self.outputs,
            "functions": [f.to_json() for f in self.functions],
            "otherFunctions": self.other_functions,
            "stateMachine": self.state_machine,
        }


def _stack_failure(name: str, err: StackLookupError, permission: str, stack_name: str) -> Check:
    if _error_code(err) == "ValidationError" and "does not exist" in _error_text(err):
        return Check(
            name,
            False,
            f"stack {stack_name!r} does not exist in this region",
            f"check --stack-name and --region (the stack is {names.STACK_NAME} unless deployed "
            f"under another name); deploy it: npx cdk deploy {names.STACK_NAME}",
        )
    return _unavailable(name, _Unavailable(err, permission, f"stack {stack_name}"))


def check_stack(
    description: StackDescription | StackLookupError, report: StackReport, table: str
) -> Check:
    if isinstance(description, StackLookupError):
        return _stack_failure("stack", description, PERMISSION_DESCRIBE_STACKS, report.name)
    report.status = description.status
    report.outputs = dict(description.outputs)
    problems: list[str] = []
    fixes: list[str] = []
    if description.status not in _SETTLED_STACK:
        reason = f" ({description.status_reason})" if description.status_reason else ""
        problems.append(f"its status is {description.status}{reason}")
        if description.status.endswith("_IN_PROGRESS"):
            fixes.append("an operation is running on the stack: wait for it to end")
        else:
            fixes.append(
                "its last operation did not complete (see the stack's events in the "
                f"CloudFormation console): fix the cause, then {_DEPLOY}"
            )
    deployed_table = description.outputs.get(TABLE_NAME_OUTPUT)
    if deployed_table is not None and deployed_table != table:
        problems.append(f"its functions use table {deployed_table!r}, not {table!r}")
        fixes.append(
            f"check --table (or SAGA_TABLE_NAME): the stack's output {TABLE_NAME_OUTPUT} "
            f"names {deployed_table!r}"
        )
    if problems:
        return Check(
            "stack", False, f"stack {report.name!r}: " + "; ".join(problems), "; ".join(fixes)
        )
    shown_table = f", table {deployed_table!r}" if deployed_table else ""
    return Check("stack", True, f"stack {report.name!r} is {description.status}{shown_table}")


def _resource_problem(resource: StackResource) -> str | None:
    if resource.status.endswith("_FAILED") or resource.status.startswith("DELETE_"):
        return f"the stack lists it as {resource.status}"
    return None


def _ask_lambda(lambda_client: Any, function: FunctionReport) -> None:
    """Fill `function` from GetFunctionConfiguration."""
    function_name = function.name or ""
    try:
        config = _call(
            PERMISSION_GET_FUNCTION,
            f"function {function_name}",
            lambda: lambda_client.get_function_configuration(FunctionName=function_name),
        )
    except _Unavailable as failure:
        if _is_not_found(failure.err):
            function.exists = False
            function.fail("Lambda has no such function (deleted outside CloudFormation?)", _DEPLOY)
        else:
            unavailable = _unavailable("functions", failure)
            function.fail(unavailable.detail, unavailable.fix or "")
        return
    function.exists = True
    function.state = config.get("State")
    variables = (config.get("Environment") or {}).get("Variables") or {}
    deployed_service = variables.get(names.ENV_POWERTOOLS_SERVICE)
    if function.state == "Failed":
        function.fail(
            f"its state is Failed ({config.get('StateReason', 'no reason given')})",
            f"see the function's StateReason in the Lambda console, then {_DEPLOY}",
        )
    elif deployed_service is not None and deployed_service != function.service:
        function.fail(
            f"it runs service {deployed_service!r}, not {function.service!r}",
            f"the deployed stack is not this code's version: {_DEPLOY}",
        )


def check_functions(
    deployed: DeployedStack | StackLookupError, lambda_client: Any, report: StackReport
) -> Check:
    name = "functions"
    report.functions = [FunctionReport(s, construct_name(s)) for s in EXPECTED_SERVICES]
    if isinstance(deployed, StackLookupError):
        failed = _stack_failure(name, deployed, PERMISSION_LIST_STACK_RESOURCES, report.name)
        return Check(name, False, f"not checked: {failed.detail}", failed.fix)
    resources = {r.construct_name: r for r in deployed.of_type(FUNCTION_TYPE)}
    expected = {f.construct for f in report.functions}
    report.other_functions = [
        {"construct": construct, "name": r.physical_id, "logicalId": r.logical_id}
        for construct, r in sorted(resources.items())
        if construct not in expected
    ]
    for function in report.functions:
        resource = resources.get(function.construct)
        if resource is None:
            function.exists = False
            function.fail(f"the stack has no function {function.construct}", _DEPLOY)
            continue
        function.name = resource.physical_id
        function.logical_id = resource.logical_id
        function.resource_status = resource.status
        problem = _resource_problem(resource)
        if problem:
            function.fail(problem, _DEPLOY)
        _ask_lambda(lambda_client, function)
    bad = [f for f in report.functions if f.problem]
    if not bad:
        return Check(
            name,
            True,
            f"all {len(report.functions)} functions exist: "
            + ", ".join(f"{f.construct}={f.name}" for f in report.functions),
        )
    detail = "; ".join(f"{f.construct} ({f.service}): {f.problem}" for f in bad)
    return Check(
        name,
        False,
        f"{len(bad)} of {len(report.functions)} functions: {detail}",
        "; ".join(dict.fromkeys(f.fix for f in bad if f.fix)),
    )


def check_state_machine(
    deployed: DeployedStack | StackLookupError,
    description: StackDescription | StackLookupError,
    sfn: Any,
    report: StackReport,
) -> Check:
    name = "state-machine"
    if isinstance(deployed, StackLookupError):
        failed = _stack_failure(name, deployed, PERMISSION_LIST_STACK_RESOURCES, report.name)
        return Check(name, False, f"not checked: {failed.detail}", failed.fix)
    machines = deployed.of_type(STATE_MACHINE_TYPE)
    if len(machines) != 1:
        found = ", ".join(m.logical_id for m in machines) or "none"
        return Check(
            name,
            False,
            f"the stack should hold exactly one state machine ({STATE_MACHINE_CONSTRUCT}), "
            f"found {found}",
            _DEPLOY,
        )
    machine = machines[0]
    arn = machine.physical_id
    report.state_machine = {
        "construct": machine.construct_name,
        "logicalId": machine.logical_id,
        "arn": arn,
        "resourceStatus": machine.status,
        "exists": None,
        "status": None,
    }
    problems: list[str] = []
    fixes: list[str] = []
    if not isinstance(description, StackLookupError):
        try:
            output_arn = state_machine_arn_from_outputs(description.outputs, report.name)
        except StackLookupError:
            problems.append(
                f"the stack has no single output {STATE_MACHINE_OUTPUT_PREFIX}... (outputs: "
                f"{', '.join(sorted(description.outputs)) or 'none'})"
            )
            fixes.append(_DEPLOY)
        else:
            if output_arn != arn:
                problems.append(
                    f"the output {STATE_MACHINE_OUTPUT_PREFIX}... names {output_arn}, not the "
                    f"stack's state machine {arn}"
                )
                fixes.append(_DEPLOY)
    resource_problem = _resource_problem(machine)
    if resource_problem:
        problems.append(resource_problem)
    try:
        described = _call(
            PERMISSION_DESCRIBE_STATE_MACHINE,
            f"state machine {arn}",
            lambda: sfn.describe_state_machine(stateMachineArn=arn),
        )
    except _Unavailable as failure:
        if _error_code(failure.err) == "StateMachineDoesNotExist":
            report.state_machine["exists"] = False
            problems.append("Step Functions has no such state machine (deleted by hand?)")
            fixes.append(_DEPLOY)
        else:
            unavailable = _unavailable(name, failure)
            problems.append(unavailable.detail)
            fixes.append(unavailable.fix or "")
    else:
        status = str(described.get("status", "UNKNOWN"))
        report.state_machine.update(exists=True, status=status)
        if status != "ACTIVE":
            problems.append(f"its status is {status}")
            fixes.append(_DEPLOY)
    if problems:
        return Check(
            name,
            False,
            f"state machine {arn}: " + "; ".join(problems),
            "; ".join(dict.fromkeys(f for f in fixes if f)) or None,
        )
    return Check(name, True, f"{machine.construct_name} = {arn} (ACTIVE)")


# ---- the run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clients:
    dynamodb: Any
    cloudformation: Any
    lambda_: Any
    stepfunctions: Any


@dataclass(frozen=True)
class PreflightReport:
    checks: tuple[Check, ...]
    stack: StackReport

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checks": [c.to_json() for c in self.checks],
            "stack": self.stack.to_json(),
        }


def run_preflight(clients: Clients, table: str, stack_name: str) -> PreflightReport:
    """Every check, in the runbook's order; none is skipped because another failed."""
    region = clients.dynamodb.meta.region_name
    described = describe_table(clients.dynamodb, table)
    stack = StackReport(name=stack_name)
    description: StackDescription | StackLookupError
    deployed: DeployedStack | StackLookupError
    try:
        description = describe_stack(clients.cloudformation, stack_name)
    except StackLookupError as err:
        description = err
    try:
        deployed = read_stack(clients.cloudformation, stack_name)
    except StackLookupError as err:
        deployed = err
    checks = (
        check_table(described, table),
        check_index(described, table),
        check_point_in_time_recovery(clients.dynamodb, table, region),
        check_contributor_insights(clients.dynamodb, table, region, index=None),
        check_contributor_insights(clients.dynamodb, table, region, index=names.INDEX_NAME),
        check_stack(description, stack, table),
        check_functions(deployed, clients.lambda_, stack),
        check_state_machine(deployed, description, clients.stepfunctions, stack),
    )
    return PreflightReport(checks=checks, stack=stack)


def render(report: PreflightReport) -> str:
    lines = [f"{'PASS' if c.ok else 'FAIL'}  {c.name}: {c.detail}" for c in report.checks]
    stack = report.stack
    if any(f.name for f in stack.functions) or stack.state_machine:
        lines += ["", f"stack {stack.name}: which is which"]
        for function in stack.functions:
            lines.append(f"  {function.construct:<34} {function.name or '(missing)'}")
        for other in stack.other_functions:
            lines.append(f"  {other['construct']:<34} {other['name']} (not expected)")
        if stack.state_machine:
            lines.append(f"  {stack.state_machine['construct']:<34} {stack.state_machine['arn']}")
    failed = [c for c in report.checks if not c.ok]
    if failed:
        lines += ["", "To fix:"]
        lines += [f"  {c.name}: {c.fix}" for c in failed]
        lines += ["", f"{len(failed)} of {len(report.checks)} checks failed"]
    else:
        lines += ["", f"all {len(report.checks)} checks passed"]
    return "\n".join(lines)


@click.command("preflight")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@stack_name_option("The deployed CloudFormation stack (its name or ARN).")
@service_endpoint_option("cloudformation", "CLOUDFORMATION", "CloudFormation")
@service_endpoint_option("lambda", "LAMBDA", "Lambda")
@service_endpoint_option("stepfunctions", "SFN", "Step Functions")
@pass_cli
def preflight_command(
    cli: CliContext,
    as_json: bool,
    stack_name: str,
    cloudformation_endpoint_url: str | None,
    lambda_endpoint_url: str | None,
    stepfunctions_endpoint_url: str | None,
) -> None:
    """Check what the runbook assumes before its step 1 (read-only).

    \b
    table                       the table exists and is ACTIVE (or UPDATING)
    index                       renewal-saga-person-index exists, is ACTIVE, keyed
                                GSI4PK/GSI4SK, projects ALL
    point-in-time-recovery      ENABLED on the table
    contributor-insights-table  ENABLED on the table
    contributor-insights-index  ENABLED on the index
    stack                       the stack exists, its last operation completed, and its
                                TableName output is --table
    functions                   every expected function (the four sweeps, drift guard,
                                backfill plan/worker/verify) is in the stack and in Lambda;
                                lists which generated name is which construct
    state-machine               the stack's state machine exists, ACTIVE, and is the one
                                its BackfillStateMachineArn... output names

    Needs dynamodb:DescribeTable, dynamodb:DescribeContinuousBackups,
    dynamodb:DescribeContributorInsights, cloudformation:DescribeStacks,
    cloudformation:ListStackResources, lambda:GetFunctionConfiguration and
    states:DescribeStateMachine. A check that cannot be made fails, naming the permission.

    \b
    --json: {"ok", "checks": [{"name", "ok", "detail", "fix"}], "stack": {"name", "status",
    "outputs", "functions": [{"construct", "service", "name", "logicalId", "resourceStatus",
    "exists", "state", "problem"}], "otherFunctions", "stateMachine": {"construct",
    "logicalId", "arn", "resourceStatus", "exists", "status"}}}

    Exit 0 every check passed, 1 any failed, 2 bad usage.
    """
    table = cli.require_table()
    clients = Clients(
        dynamodb=cli.client,
        cloudformation=cli.aws_client("cloudformation", endpoint_url=cloudformation_endpoint_url),
        lambda_=cli.aws_client("lambda", endpoint_url=lambda_endpoint_url),
        stepfunctions=cli.aws_client("stepfunctions", endpoint_url=stepfunctions_endpoint_url),
    )
    report = run_preflight(clients, table, stack_name)
    if as_json:
        emit(report.to_json())
    else:
        click.echo(render(report))
    raise click.exceptions.Exit(EXIT_PASSED if report.ok else EXIT_FAILED)
