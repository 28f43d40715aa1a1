"""The cdk-nag findings of the backfill's state machine (infra/backfill.py) that its design
carries, each acknowledged with the reason it is acceptable: what a reviewer reads apart from
how the state machine is built."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn


def acknowledge_state_machine_findings(
    state_machine: sfn.StateMachine, functions: Sequence[lambda_.IFunction]
) -> None:
    """Acknowledge, with its reason, each cdk-nag finding the backfill's state machine
    carries by design: log delivery and X-Ray, the LambdaInvoke tasks' version ARNs, and the
    Distributed Map's child executions."""
    stack = cdk.Stack.of(state_machine)
    acknowledgments = [
        cdk.Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="Step Functions log delivery (logs:CreateLogDelivery, ...) and X-Ray "
            "(xray:PutTraceSegments, ...) support no resource-level permissions.",
        )
    ]
    for fn in functions:
        resource = fn.node.default_child
        assert isinstance(resource, cdk.CfnResource)
        logical_id = stack.resolve(stack.get_logical_id(resource))
        acknowledgments.append(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]",
                reason="lambda:InvokeFunction on the function's own versions and aliases "
                "('<arn>:*'), which the LambdaInvoke task always grants next to the "
                "function ARN; the role can invoke these three functions and nothing else.",
            )
        )
    cdk.Validations.of(state_machine.role).acknowledge(*acknowledgments)
    # The Distributed Map's own policy (CDK adds it): StartExecution on this state machine
    # only; Describe/StopExecution on its executions and RedriveExecution on its Map Runs'
    # child executions, whose names are not known before they run.
    machine = state_machine.node.default_child
    assert isinstance(machine, cdk.CfnResource)
    machine_id = stack.resolve(stack.get_logical_id(machine))
    own_name = f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{machine_id}"}}]}}]}}'
    executions = f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{own_name}"
    cdk.Validations.of(state_machine.node.find_child("DistributedMapPolicy")).acknowledge(
        *(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{executions}{suffix}]",
                reason="The Segments Distributed Map starts one child execution per segment "
                "and stops or redrives them: executions of this state machine only, named "
                "at run time.",
            )
            for suffix in (":*", "/*:*")
        )
    )
