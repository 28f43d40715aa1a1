"""The preflight checks of the deployed stack: it exists, its last operation completed and its
TableName output is the table checked; every function the code expects is in it and in Lambda
(which generated name is which construct); its state machine exists and is the one its
BackfillStateMachineArn... output names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from saga_index.index import SWEEP_NAMES, names
from saga_index_cli.preflight.check import (
    PERMISSION_DESCRIBE_STACKS,
    PERMISSION_DESCRIBE_STATE_MACHINE,
    PERMISSION_GET_FUNCTION,
    PERMISSION_LIST_STACK_RESOURCES,
    PreflightCheck,
    Unavailable,
    checked_call,
    error_code,
    error_text,
    is_not_found,
    unavailable_check,
)
from saga_index_cli.stack import (
    FUNCTION_TYPE,
    STATE_MACHINE_OUTPUT_PREFIX,
    STATE_MACHINE_TYPE,
    DeployedStack,
    StackDescription,
    StackLookupError,
    StackResource,
    state_machine_arn_from_outputs,
)

# Each function's logical ID is names.FUNCTIONS_CONSTRUCT, its construct ID and CDK's hash.
FUNCTIONS_SCOPE = names.FUNCTIONS_CONSTRUCT
STATE_MACHINE_CONSTRUCT = "BackfillStateMachine"
# The stack output naming the table the stack's functions use (infra/stack.py).
TABLE_NAME_OUTPUT = names.OUTPUT_TABLE_NAME

# Every function the code expects, by the service name it runs as (POWERTOOLS_SERVICE_NAME).
EXPECTED_SERVICES: tuple[str, ...] = (
    *SWEEP_NAMES,
    names.SERVICE_DRIFT_GUARD,
    names.SERVICE_BACKFILL_PLAN,
    names.SERVICE_BACKFILL_WORKER,
    names.SERVICE_BACKFILL_VERIFY,
)

# The stack statuses in which its resources are the last deploy's, complete.
_SETTLED_STACK = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})


def construct_name(service: str) -> str:
    """`drift-guard` -> `FunctionsDriftGuard`: infra names each function's construct after the
    service it runs (DriftGuard, BackfillWorker, WorkflowHealthSweep, ...)."""
    return FUNCTIONS_SCOPE + "".join(part.capitalize() for part in service.split("-"))


# The fix of every check that finds the stack or one of its resources missing.
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
    # Set when Lambda could not be asked (a failures.FailureKind value), not when it answered.
    unavailable: str | None = None

    def fail(self, problem: str, fix: str, unavailable: str | None = None) -> None:
        if self.problem is None:
            self.problem, self.fix, self.unavailable = problem, fix, unavailable

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


def _stack_failure(
    name: str, err: StackLookupError, permission: str, stack_name: str
) -> PreflightCheck:
    if error_code(err) == "ValidationError" and "does not exist" in error_text(err):
        return PreflightCheck(
            name,
            False,
            f"stack {stack_name!r} does not exist in this region",
            f"check --stack-name and --region (the stack is {names.STACK_NAME} unless deployed "
            f"under another name); deploy it: npx cdk deploy {names.STACK_NAME}",
        )
    return unavailable_check(name, Unavailable(err, permission, f"stack {stack_name}"))


def check_stack(
    description: StackDescription | StackLookupError, report: StackReport, table: str
) -> PreflightCheck:
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
        return PreflightCheck(
            "stack", False, f"stack {report.name!r}: " + "; ".join(problems), "; ".join(fixes)
        )
    shown_table = f", table {deployed_table!r}" if deployed_table else ""
    return PreflightCheck(
        "stack", True, f"stack {report.name!r} is {description.status}{shown_table}"
    )


def _resource_problem(resource: StackResource) -> str | None:
    if resource.status.endswith("_FAILED") or resource.status.startswith("DELETE_"):
        return f"the stack lists it as {resource.status}"
    return None


def _ask_lambda(lambda_client: Any, function: FunctionReport) -> None:
    """Fill `function` from GetFunctionConfiguration."""
    function_name = function.name or ""
    try:
        config = checked_call(
            PERMISSION_GET_FUNCTION,
            f"function {function_name}",
            lambda: lambda_client.get_function_configuration(FunctionName=function_name),
        )
    except Unavailable as failure:
        if is_not_found(failure.err):
            function.exists = False
            function.fail("Lambda has no such function (deleted outside CloudFormation?)", _DEPLOY)
        else:
            unavailable = unavailable_check("functions", failure)
            function.fail(unavailable.detail, unavailable.fix or "", unavailable.unavailable)
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
) -> PreflightCheck:
    name = "functions"
    report.functions = [FunctionReport(s, construct_name(s)) for s in EXPECTED_SERVICES]
    if isinstance(deployed, StackLookupError):
        failed = _stack_failure(name, deployed, PERMISSION_LIST_STACK_RESOURCES, report.name)
        return PreflightCheck(
            name, False, f"not checked: {failed.detail}", failed.fix, failed.unavailable
        )
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
        return PreflightCheck(
            name,
            True,
            f"all {len(report.functions)} functions exist: "
            + ", ".join(f"{f.construct}={f.name}" for f in report.functions),
        )
    detail = "; ".join(f"{f.construct} ({f.service}): {f.problem}" for f in bad)
    # Could not be made only when no function was found wrong, only not asked.
    kinds = {f.unavailable for f in bad}
    return PreflightCheck(
        name,
        False,
        f"{len(bad)} of {len(report.functions)} functions: {detail}",
        "; ".join(dict.fromkeys(f.fix for f in bad if f.fix)),
        kinds.pop() if len(kinds) == 1 else None,
    )


def check_state_machine(
    deployed: DeployedStack | StackLookupError,
    description: StackDescription | StackLookupError,
    sfn: Any,
    report: StackReport,
) -> PreflightCheck:
    name = "state-machine"
    if isinstance(deployed, StackLookupError):
        failed = _stack_failure(name, deployed, PERMISSION_LIST_STACK_RESOURCES, report.name)
        return PreflightCheck(
            name, False, f"not checked: {failed.detail}", failed.fix, failed.unavailable
        )
    machines = deployed.of_type(STATE_MACHINE_TYPE)
    if len(machines) != 1:
        found = ", ".join(m.logical_id for m in machines) or "none"
        return PreflightCheck(
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
    # Set when Step Functions could not be asked; the verdict only when nothing else is wrong.
    not_asked: str | None = None
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
        described = checked_call(
            PERMISSION_DESCRIBE_STATE_MACHINE,
            f"state machine {arn}",
            lambda: sfn.describe_state_machine(stateMachineArn=arn),
        )
    except Unavailable as failure:
        if error_code(failure.err) == "StateMachineDoesNotExist":
            report.state_machine["exists"] = False
            problems.append("Step Functions has no such state machine (deleted by hand?)")
            fixes.append(_DEPLOY)
        else:
            unavailable = unavailable_check(name, failure)
            problems.append(unavailable.detail)
            fixes.append(unavailable.fix or "")
            not_asked = unavailable.unavailable
    else:
        status = str(described.get("status", "UNKNOWN"))
        report.state_machine.update(exists=True, status=status)
        if status != "ACTIVE":
            problems.append(f"its status is {status}")
            fixes.append(_DEPLOY)
    if problems:
        return PreflightCheck(
            name,
            False,
            f"state machine {arn}: " + "; ".join(problems),
            "; ".join(dict.fromkeys(f for f in fixes if f)) or None,
            not_asked if len(problems) == 1 else None,
        )
    return PreflightCheck(name, True, f"{machine.construct_name} = {arn} (ACTIVE)")
