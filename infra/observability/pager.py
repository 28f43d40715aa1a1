"""The pager: ONE SNS topic every alarm notifies.

Context `alarmTopicArn` names the organisation's existing paging topic (the usual set-up): the
alarms publish there and the stack creates no topic, key or subscription; that topic's policy
(and its KMS key's, if encrypted) must let cloudwatch.amazonaws.com publish. Otherwise the stack
creates its own topic, subscribed as the committed pager.json lists, so no deploy command line
can add or drop a subscription by what it passes or omits.

The stack's own topic is encrypted with a customer-managed KMS key, not the AWS-managed
alias/aws/sns: CloudWatch alarms cannot publish to a topic under the AWS-managed key (its key
policy cannot grant the CloudWatch service), so the alarms would fire into nothing. Its policy
denies any request not made over TLS (enforce_ssl). EventBridge rules of this stack may publish
to it too (allow_event_rule: the end of a backfill execution, notifications.py).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import PagerConfig, StackConfig

# The synth warning when the stack's own topic has no subscriber (acknowledgeable by this id).
UNSUBSCRIBED_WARNING = "renewal-saga-index:pager-unsubscribed"


class Pager:
    """`.topic` (the stack's own, or the organisation's by ARN), added to `scope` with the
    output PagerTopicArn; `.owned` says which."""

    def __init__(self, scope: Construct, *, config: StackConfig) -> None:
        self.topic: sns.ITopic
        self.owned = config.alarm_topic_arn is None
        self._own: tuple[sns.Topic, kms.Key] | None = None
        if config.alarm_topic_arn is not None:
            self.topic = sns.Topic.from_topic_arn(scope, "Pager", config.alarm_topic_arn)
        else:
            self._own = _own_topic(scope, config.pager)
            self.topic = self._own[0]
            if not config.pager.subscribes_anyone:
                # A warning, not an error: dev and test stacks page nobody on purpose.
                cdk.Annotations.of(self.topic).add_warning_v2(
                    UNSUBSCRIBED_WARNING,
                    "The alarms page through a topic nobody subscribes to: set context "
                    "alarmTopicArn (the organisation's paging topic) or list subscriptions in "
                    "pager.json (docs/deploy.md).",
                )
        cdk.CfnOutput(
            scope,
            "PagerTopicArn",
            value=self.topic.topic_arn,
            description="SNS topic every renewal-saga-index alarm pages through",
        )

    def allow_event_rule(self, rule_arn: str) -> None:
        """Let the EventBridge rule `rule_arn` (of this account) publish to the stack's own topic
        and use its key. An external topic's policy is its owner's (docs/deploy.md)."""
        if self._own is None:
            raise ValueError("an external pager topic's policy is not this stack's to change")
        topic, key = self._own
        account = cdk.Stack.of(topic).account
        events_principal = iam.ServicePrincipal("events.amazonaws.com")
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesPublishToThePager",
                principals=[events_principal],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeRulesOfThisStack",
                principals=[events_principal],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnEquals": {"aws:SourceArn": rule_arn},
                },
            )
        )


def _own_topic(scope: Construct, pager: PagerConfig) -> tuple[sns.Topic, kms.Key]:
    stack = cdk.Stack.of(scope)
    key = kms.Key(
        scope,
        "PagerKey",
        description="Encrypts the renewal-saga-index pager topic (CloudWatch may use it)",
        enable_key_rotation=True,
    )
    cloudwatch = iam.ServicePrincipal("cloudwatch.amazonaws.com")
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsPublishToThePager",
            principals=[cloudwatch],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" means this key
            conditions={"StringEquals": {"aws:SourceAccount": stack.account}},
        )
    )
    topic = sns.Topic(
        scope,
        "Pager",
        display_name="Renewal saga index pager",
        master_key=key,
        enforce_ssl=True,
    )
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[cloudwatch],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {
                    "aws:SourceArn": stack.format_arn(
                        service="cloudwatch",
                        resource="alarm",
                        resource_name="*",
                        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
                    )
                },
            },
        )
    )
    for address in pager.emails:
        topic.add_subscription(subscriptions.EmailSubscription(address))
    for url in pager.https_urls:
        topic.add_subscription(
            subscriptions.UrlSubscription(url, protocol=sns.SubscriptionProtocol.HTTPS)
        )
    return topic, key
