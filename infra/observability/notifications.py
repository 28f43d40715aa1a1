"""The end of every backfill execution, told to the operator through the pager topic.

An EventBridge rule on the account's default bus matches Step Functions' "Step Functions
Execution Status Change" events of the backfill state machine whose status is SUCCEEDED, FAILED,
TIMED_OUT or ABORTED, and publishes one readable line per execution (an input transformer) to
the pager topic. A success is news too: the operator waits for it before `phase set`. An
execution that ends without success also pages through its alarm (alarms.py).

EventBridge publishes with the events.amazonaws.com service principal, so the topic's policy
must allow it. The stack's own topic gets that statement (only for this rule: aws:SourceArn), and
its KMS key lets the principal encrypt. An external topic (context `alarmTopicArn`) must allow it
itself: docs/deploy.md says how.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from infra.observability.pager import Pager

EXECUTION_STATUS_CHANGE = "Step Functions Execution Status Change"
FINAL_STATUSES = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
# Input-transformer variables: event paths whose values are identifiers, times and ARNs. Not the
# execution's cause: free text, it could break the message's JSON string.
MESSAGE_FIELDS = {
    "execution": "$.detail.name",
    "status": "$.detail.status",
    "error": "$.detail.error",
    "stopped": "$.time",
    "arn": "$.detail.executionArn",
}
MESSAGE = (
    "Renewal saga index backfill execution <execution> ended <status> at <stopped> "
    "(error: <error>). Execution ARN: <arn>. What to do next: "
    "docs/observability.md#backfill-ended"
)


class BackfillNotifications:
    """`.rule`, added to `scope`: the end of each backfill execution to the pager topic."""

    def __init__(self, scope: Construct, *, pager: Pager, state_machine: sfn.IStateMachine) -> None:
        self.rule = events.CfnRule(
            scope,
            "BackfillExecutionEnded",
            description="The end of a backfill execution, to the pager topic",
            state="ENABLED",
            event_pattern={
                "source": ["aws.states"],
                "detail-type": [EXECUTION_STATUS_CHANGE],
                "detail": {
                    "stateMachineArn": [state_machine.state_machine_arn],
                    "status": list(FINAL_STATUSES),
                },
            },
            targets=[
                events.CfnRule.TargetProperty(
                    id="Pager",
                    arn=pager.topic.topic_arn,
                    input_transformer=events.CfnRule.InputTransformerProperty(
                        input_paths_map=dict(MESSAGE_FIELDS),
                        # A JSON string: SNS delivers its text.
                        input_template=f'"{MESSAGE}"',
                    ),
                )
            ],
        )
        rule_arn = cdk.Token.as_string(self.rule.attr_arn)
        if pager.owned:
            pager.allow_event_rule(rule_arn)
        cdk.CfnOutput(
            scope,
            "BackfillEndedRuleArn",
            value=rule_arn,
            description="EventBridge rule that publishes the end of each backfill execution to "
            "the pager topic (an external topic must let it publish: docs/deploy.md)",
        )
