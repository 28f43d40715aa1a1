"""The deployed stack, as CloudFormation describes it: which generated name is which.

The stack's functions and state machine have generated physical names
(`RenewalSagaIndex-FunctionsDriftGuard576FAF98-AbC123...`); an operator should not have to copy
them from the console. The stack's outputs name the state machine (`BackfillStateMachineArn...`,
DescribeStacks), and CloudFormation lists the stack's resources by logical ID, which carries the
construct names (`FunctionsDriftGuard...`), so the CLI finds them by type and name. Needs
`cloudformation:DescribeStacks` and `cloudformation:ListStackResources` on the stack.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import STACK_NAME, SagaIndexError

FUNCTION_TYPE = "AWS::Lambda::Function"
STATE_MACHINE_TYPE = "AWS::StepFunctions::StateMachine"
# CloudFormation's rule for a stack name, or a stack's ARN (DescribeStacks takes either).
_STACK_NAME = re.compile(
    r"[A-Za-z][A-Za-z0-9-]{0,127}|arn:aws[a-z-]*:cloudformation:[a-z0-9-]+:[0-9]{12}:stack/\S+"
)
# CDK's logical IDs end in an 8-hex-digit hash of the construct path.
_HASH_SUFFIX = re.compile(r"[0-9A-F]{8}$")


class StackLookupError(SagaIndexError):
    """The stack, or a resource the CLI needs from it, could not be found (exit 1)."""


@dataclass(frozen=True)
class StackResource:
    logical_id: str
    physical_id: str
    resource_type: str
    status: str

    @property
    def construct_name(self) -> str:
        """`FunctionsDriftGuard576FAF98` -> `FunctionsDriftGuard` (the construct path, joined)."""
        return _HASH_SUFFIX.sub("", self.logical_id)


@dataclass(frozen=True)
class DeployedStack:
    """The resources of one deployed stack, by logical ID."""

    name: str
    resources: tuple[StackResource, ...]

    def of_type(self, resource_type: str) -> list[StackResource]:
        return [r for r in self.resources if r.resource_type == resource_type]


# CfnOutput keys are the construct path plus CDK's hash: `BackfillStateMachineArn9561ED01`.
STATE_MACHINE_OUTPUT_PREFIX = "BackfillStateMachineArn"


def _lookup_error(stack_name: str, err: ClientError | BotoCoreError) -> StackLookupError:
    if isinstance(err, ClientError):
        message = err.response.get("Error", {}).get("Message", str(err))
        return StackLookupError(
            f"could not read stack {stack_name!r} ({message}): check --region and that the "
            "stack is deployed there (`cdk deploy`)"
        )
    return StackLookupError(f"could not read stack {stack_name!r}: {err}")


def read_outputs(cloudformation: Any, stack_name: str = STACK_NAME) -> dict[str, str]:
    """The stack's outputs, OutputKey -> OutputValue (DescribeStacks)."""
    return describe_stack(cloudformation, stack_name).outputs


def state_machine_arn_from_outputs(outputs: dict[str, str], stack_name: str = STACK_NAME) -> str:
    """The backfill state machine's ARN from the stack outputs (key BackfillStateMachineArn...)."""
    found = sorted(k for k in outputs if k.startswith(STATE_MACHINE_OUTPUT_PREFIX))
    if len(found) != 1:
        raise StackLookupError(
            f"stack {stack_name!r} has {len(found)} outputs named "
            f"{STATE_MACHINE_OUTPUT_PREFIX}... ({', '.join(found) or 'none'}): pass "
            "--state-machine-arn"
        )
    return outputs[found[0]]


def read_stack(cloudformation: Any, stack_name: str = STACK_NAME) -> DeployedStack:
    """Every resource of `stack_name` (ListStackResources, all pages: complete or an error)."""
    resources: list[StackResource] = []
    try:
        for page in cloudformation.get_paginator("list_stack_resources").paginate(
            StackName=stack_name
        ):
            resources.extend(
                StackResource(
                    logical_id=item["LogicalResourceId"],
                    physical_id=item.get("PhysicalResourceId", ""),
                    resource_type=item["ResourceType"],
                    status=item.get("ResourceStatus", ""),
                )
                for item in page.get("StackResourceSummaries", [])
            )
    except (ClientError, BotoCoreError) as err:
        raise _lookup_error(stack_name, err) from err
    return DeployedStack(name=stack_name, resources=tuple(resources))


@dataclass(frozen=True)
class StackDescription:
    """What DescribeStacks says of one stack: its status (and why) and its outputs."""

    name: str
    status: str
    status_reason: str | None
    outputs: dict[str, str]


def describe_stack(cloudformation: Any, stack_name: str = STACK_NAME) -> StackDescription:
    """The stack's status and outputs, from one DescribeStacks call."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except (ClientError, BotoCoreError) as err:
        raise _lookup_error(stack_name, err) from err
    if not stacks:
        raise StackLookupError(f"stack {stack_name!r} was not found")
    stack = stacks[0]
    return StackDescription(
        name=stack_name,
        status=str(stack.get("StackStatus", "")),
        status_reason=stack.get("StackStatusReason"),
        outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
    )


def _stack_name(_: click.Context, __: click.Parameter, value: str) -> str:
    if not _STACK_NAME.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a CloudFormation stack name (a letter, then up to 127 letters, "
            "digits and hyphens) or stack ARN"
        )
    return value


def stack_name_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--stack-name` (default the stack this repository deploys), a name or ARN
    CloudFormation accepts, else exit 2 naming it."""
    return click.option(
        "--stack-name", default=STACK_NAME, show_default=True, callback=_stack_name, help=help
    )
