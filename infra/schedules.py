"""The construct that schedules one job of the job spec (saga_index.index.jobs) on its
staggered minute, and how Lambda handles that invocation.

The spec checks the stagger itself (no two jobs in the same minute over a week); tests/infra
asserts it again from the synthesised template.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from saga_index.index.jobs import JOBS_BY_NAME

# Lambda's own retries of a scheduled function that failed: none. Every job's work is idempotent
# and the next firing (one period later) repeats all of it, so a retry gains nothing the next
# run does not, while it adds load exactly when something (often the table) is failing. The
# failure is not lost: it lands in the job's failure queue, which pages.
ASYNC_RETRY_ATTEMPTS = 0


class ScheduledInvocation(Construct):
    """One EventBridge Scheduler schedule invoking one function at the job's staggered minute,
    and how Lambda handles that (asynchronous) invocation.

    Flexible time window OFF (a window would move runs and undo the stagger); retries, an
    encrypted dead-letter queue and a role that can invoke only this function per target; the
    scheduled time in the payload, because Scheduler delivers at least once and the time keys
    idempotent claims. The schedule's retries and dead-letter queue cover DELIVERY only:
    Scheduler invokes the function asynchronously, so once Lambda has accepted the event a
    function error is Lambda's to handle and never reaches the schedule's dead-letter queue. The
    function's EventInvokeConfig (`.invoke_config`) therefore retries ASYNC_RETRY_ATTEMPTS times,
    drops an event older than the job's period (the next firing is due by then), and sends an
    event that failed or expired to `.failure_queue` (encrypted, TLS-only), which pages.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        job_name: str,
        function: lambda_.IFunction,
        retry_attempts: int = 2,
    ) -> None:
        super().__init__(scope, construct_id)
        job = JOBS_BY_NAME[job_name]
        self.job = job
        max_event_age = cdk.Duration.minutes(min(job.period_minutes, 60))
        self.dead_letter_queue = _queue(
            self, "DeadLetters", "This queue IS the dead-letter queue of the schedule target."
        )
        self.failure_queue = _queue(
            self,
            "FailedInvocations",
            "This queue IS the on-failure destination of the function's asynchronous invocation.",
        )
        # The L1 resource and a grant of its own: lambda-destinations' SqsDestination would also
        # grant sqs:GetQueueAttributes and sqs:GetQueueUrl, which delivery does not use.
        self.invoke_config = lambda_.CfnEventInvokeConfig(
            self,
            "AsyncInvoke",
            function_name=function.function_name,
            qualifier="$LATEST",
            maximum_retry_attempts=ASYNC_RETRY_ATTEMPTS,
            maximum_event_age_in_seconds=int(max_event_age.to_seconds()),
            destination_config=lambda_.CfnEventInvokeConfig.DestinationConfigProperty(
                on_failure=lambda_.CfnEventInvokeConfig.OnFailureProperty(
                    destination=self.failure_queue.queue_arn
                )
            ),
        )
        # Lambda sends the failed event with the function's role.
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"], resources=[self.failure_queue.queue_arn]
            )
        )
        if function.role is not None:
            # Lambda refuses a destination the role cannot send to when the config is created:
            # depend on the role and so on its policy (a child of the role construct).
            self.invoke_config.node.add_dependency(function.role)
        # One role per schedule, so its one wildcard (the function's versions and aliases, which
        # Lambda's grantInvoke always adds) is acknowledged on this role and nowhere else.
        # aws:SourceAccount keeps another account's schedule from using it (confused deputy).
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": cdk.Stack.of(self).account}},
            ),
            description=f"EventBridge Scheduler: invoke the {job.name} function",
        )
        payload = scheduler.ScheduleTargetInput.from_object(
            {
                "job": job.name,
                "scheduledTime": scheduler.ContextAttribute.scheduled_time,
                "executionId": scheduler.ContextAttribute.execution_id,
                "attempt": scheduler.ContextAttribute.attempt_number,
            }
        )
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.expression(job.expression),
            description=job.description,
            time_window=scheduler.TimeWindow.off(),
            target=targets.LambdaInvoke(
                function,
                input=payload,
                role=self.role,
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=retry_attempts,
                max_event_age=max_event_age,
            ),
        )
        self._acknowledge_invoke_wildcard(function)

    def _acknowledge_invoke_wildcard(self, function: lambda_.IFunction) -> None:
        resource = function.node.default_child
        if not isinstance(resource, cdk.CfnResource):
            return  # an imported function: its ARN is no logical-id reference in the finding
        stack = cdk.Stack.of(self)
        logical_id = stack.resolve(stack.get_logical_id(resource))
        cdk.Validations.of(self.role).acknowledge(
            cdk.Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>:*]",
                reason="lambda:InvokeFunction on the function's own versions and aliases "
                "('<arn>:*'), which Lambda's grantInvoke always adds next to the function ARN; "
                "the role can invoke this one function and nothing else.",
            )
        )


def _queue(scope: Construct, construct_id: str, why_no_dead_letter_queue: str) -> sqs.Queue:
    queue = sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=cdk.Duration.days(14),
    )
    cdk.Validations.of(queue).acknowledge(
        cdk.Acknowledgment(id="AwsSolutions-SQS3", reason=why_no_dead_letter_queue)
    )
    return queue
