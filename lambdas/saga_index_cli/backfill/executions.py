"""Which Step Functions execution `backfill --follow` and `--stop` act on: the one an ARN names,
or the state machine's one running execution; and what it was started with."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from botocore.exceptions import ClientError
from pydantic import ValidationError

from saga_index.index import InvalidInputError, SagaIndexError
from saga_index.layout_change.backfill import BackfillRequest
from saga_index_cli.context import CliContext
from saga_index_cli.stack import StackLookupError, read_outputs, state_machine_arn_from_outputs

log = logging.getLogger("saga_index.cli.backfill")

# `--follow` / `--stop` given without a value: the state machine's one running execution.
THE_RUNNING_EXECUTION = "<the running execution>"

STATE_MACHINE_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}"
)
# A (parent) execution of a state machine. Execution names are 1-80 characters without
# whitespace, brackets, wildcards or any of " # % \ ^ | ~ ` $ & , ; : / (StartExecution).
EXECUTION_ARN = re.compile(
    r"(arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}):execution:([A-Za-z0-9_-]{1,80})"
    r":[^\s<>{}\[\]?*\"#%\\^|~`$&,;:/]{1,80}"
)


class ExecutionLookupError(SagaIndexError):
    """No execution, or not exactly one, to follow or stop (exit 1); the message says why."""


def state_machine_of(execution_arn: str) -> str:
    """The ARN of the state machine an execution ARN belongs to."""
    match = EXECUTION_ARN.fullmatch(execution_arn)
    if match is None:
        raise ValueError(f"{execution_arn!r} is not an execution ARN")
    return f"{match.group(1)}:stateMachine:{match.group(2)}"


def running_execution(sfn: Any, state_machine_arn: str) -> str:
    """THE running execution of the state machine (ListExecutions, RUNNING, every page): none
    or several is ExecutionLookupError naming what was found."""
    running: list[str] = []
    kwargs: dict[str, Any] = {
        "stateMachineArn": state_machine_arn,
        "statusFilter": "RUNNING",
        "maxResults": 100,
    }
    while True:
        page = sfn.list_executions(**kwargs)
        running.extend(e["executionArn"] for e in page.get("executions", []))
        if not page.get("nextToken"):
            break
        kwargs["nextToken"] = page["nextToken"]
    if not running:
        raise ExecutionLookupError(
            f"no backfill execution is running on {state_machine_arn}: nothing to attach to "
            "or stop (`saga-index status` shows the last run)"
        )
    if len(running) > 1:
        listed = "\n  ".join(sorted(running))
        raise ExecutionLookupError(
            f"{len(running)} backfill executions are running on {state_machine_arn}; pass "
            f"one of them:\n  {listed}"
        )
    return running[0]


def describe(sfn: Any, execution_arn: str) -> dict[str, Any]:
    """DescribeExecution; an execution Step Functions does not know is ExecutionLookupError."""
    try:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            raise ExecutionLookupError(
                f"execution {execution_arn} does not exist: check the ARN, --region and "
                "--stepfunctions-endpoint-url"
            ) from err
        raise
    return described


def request_of(described: dict[str, Any]) -> BackfillRequest:
    """The backfill request an execution was started with (its input)."""
    try:
        return BackfillRequest.model_validate(json.loads(described.get("input") or "null"))
    except (json.JSONDecodeError, ValidationError) as err:
        raise ExecutionLookupError(
            f"execution {described.get('executionArn')} was not started with a backfill "
            f"request as its input ({type(err).__name__}): is it an execution of the backfill "
            "state machine?"
        ) from err


def resolve_state_machine(cli: CliContext, state_machine_arn: str | None, stack_name: str) -> str:
    """--state-machine-arn, else the stack's output BackfillStateMachineArn...."""
    if state_machine_arn is not None:
        return state_machine_arn
    outputs = read_outputs(cli.aws_client("cloudformation"), stack_name)
    arn = state_machine_arn_from_outputs(outputs, stack_name)
    if not STATE_MACHINE_ARN.fullmatch(arn):
        raise StackLookupError(
            f"stack {stack_name!r} names {arn!r} as its backfill state machine, which is not a "
            "state machine ARN: pass --state-machine-arn"
        )
    log.info("backfill state machine (stack %s): %s", stack_name, arn)
    return arn


def target_execution(
    cli: CliContext,
    sfn: Any,
    given: str,
    state_machine_arn: str | None,
    stack_name: str,
) -> str:
    """The execution --follow/--stop names, or the state machine's one running execution."""
    if given != THE_RUNNING_EXECUTION:
        if state_machine_arn is not None and state_machine_of(given) != state_machine_arn:
            raise InvalidInputError(
                f"execution {given} is not one of --state-machine-arn {state_machine_arn}"
            )
        return given
    machine = resolve_state_machine(cli, state_machine_arn, stack_name)
    return running_execution(sfn, machine)
