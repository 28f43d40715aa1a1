"""The pager: ONE SNS topic every paging alarm notifies, and its optional subscriptions.

The topic is encrypted with a customer-managed KMS key, not the AWS-managed alias/aws/sns:
CloudWatch alarms cannot publish to a topic under the AWS-managed key (its key policy cannot
grant the CloudWatch service), so the alarms would fire into nothing. Its policy denies any
request not made over TLS (enforce_ssl).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import StackConfig


class Pager:
    """`.topic`, added to `scope` with the output PagerTopicArn."""

    def __init__(self, scope: Construct, *, config: StackConfig) -> None:
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
        if config.pager_email:
            topic.add_subscription(subscriptions.EmailSubscription(config.pager_email))
        if config.pager_https_url:
            topic.add_subscription(
                subscriptions.UrlSubscription(
                    config.pager_https_url, protocol=sns.SubscriptionProtocol.HTTPS
                )
            )
        self.topic = topic
        cdk.CfnOutput(
            scope,
            "PagerTopicArn",
            value=topic.topic_arn,
            description="SNS topic every renewal-saga-index alarm pages through",
        )
