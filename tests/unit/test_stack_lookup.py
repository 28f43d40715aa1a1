"""Finding the deployed state machine from the stack's outputs, with a fake CloudFormation
client (moto's CloudFormation cannot create this stack)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from saga_index.index.names import STACK_NAME
from saga_index_cli.stack import StackLookupError, read_outputs, state_machine_arn_from_outputs

ARN = "arn:aws:states:eu-west-1:123456789012:stateMachine:BackfillStateMachine1A2B-xyz"


class FakeCloudFormation:
    def __init__(self, stacks: dict[str, dict[str, str]]) -> None:
        self.stacks = stacks
        self.asked: list[str] = []

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        self.asked.append(StackName)
        if StackName not in self.stacks:
            raise ClientError(
                {
                    "Error": {
                        "Code": "ValidationError",
                        "Message": f"Stack with id {StackName} does not exist",
                    }
                },
                "DescribeStacks",
            )
        outputs = [{"OutputKey": k, "OutputValue": v} for k, v in self.stacks[StackName].items()]
        return {"Stacks": [{"StackName": StackName, "Outputs": outputs}]}


def test_the_state_machine_is_the_output_named_backfill_state_machine_arn() -> None:
    cloudformation = FakeCloudFormation(
        {STACK_NAME: {"BackfillStateMachineArn9561ED01": ARN, "ObservabilityDashboardName": "d"}}
    )
    outputs = read_outputs(cloudformation)
    assert cloudformation.asked == [STACK_NAME]
    assert state_machine_arn_from_outputs(outputs) == ARN


def test_a_stack_that_does_not_exist_is_named_with_what_to_check() -> None:
    with pytest.raises(StackLookupError, match=r"could not read stack 'Other'.*--region"):
        read_outputs(FakeCloudFormation({}), "Other")


@pytest.mark.parametrize(
    "outputs",
    [{}, {"BackfillStateMachineArnA": ARN, "BackfillStateMachineArnB": ARN}],
)
def test_no_output_or_several_say_to_pass_the_arn(outputs: dict[str, str]) -> None:
    with pytest.raises(StackLookupError, match="pass --state-machine-arn"):
        state_machine_arn_from_outputs(outputs, "S")
