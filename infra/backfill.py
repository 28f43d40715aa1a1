"""The backfill: its three functions and the Step Functions state machine that runs them.

  PlanSegments     take the run's lease in the control record (holder: the execution's id,
                   passed in as $$.Execution.Id; the token is derived from it) and lay out the
                   segments; the record names the move (source and target layouts), or, for
                   a run of kind open-index, the open index's direction and N
  Segments (Map)   a Distributed Map: one Standard child execution per parallel-Scan segment,
                   at most MAX_CONCURRENT_SEGMENTS at once; each loops RestampSegment until the
                   worker says the segment is done.
                   Each invocation heartbeats the lease (start, every few seconds, end) and
                   follows the record's runtime throttle and pause
  VerifyBackfill   aggregate the counts; read back what is still to move on the source keys;
                   release the lease with the completion `phase set` checks. An open-index
                   run: compare the table with the open index (the check `open-index set
                   open` / `set off` makes) and release the lease, recording no completion
  Verified?        a row with a usable personId left to move fails the execution (an
                   open-index run: any row the open index gets wrong)

Both kinds of run (the request's `kind`: layout, re-stamping GSI4PK; open-index, stamping or
removing OpenSagaPK) go through the same states; the worker picks the row rule from the run's
ticket, the verify step its check and release (saga_index/layout_change/backfill/steps.py).

A failed or stopped execution does not release its lease: it expires (the lease's TTL) unless
`saga-index backfill` that started the execution releases it when the operator stops it.

Why these shapes:
- Segment numbers, not segment inputs, are the Map's items: the ItemSelector builds each input
  from the plan's template, so 1,000 segments still fit the 256 KB state limit.
- The loop hands the worker's last result back in as `totals`, so each iteration ends with the
  whole segment's counts without intrinsic arithmetic, and the verifier sums the segments.
- The loop ends on the worker's `done`, not on a null cursor: a paused worker may return before
  its segment's first row, with no cursor yet and the segment not done.
- The run ticket (`$.run`: the move and the lease token) is in the state once and every worker
  and the verifier get it, so no step re-derives the layouts from a record that may have moved.
- The first step is a Lambda and not Choice states: pydantic names every bad field, and the
  per-segment share of the write cap is a division ASL cannot do.
- The Map is distributed so that the history of a segment's loop is its child execution's, not
  the parent's: an inline Map put about 9 events per worker invocation of every segment into
  one execution's 25,000 (about 2,700 invocations per run). See HISTORY_EVENT_LIMIT below.
Everything here ran against moto's Step Functions interpreter from the synthesised template
(tests/component/test_backfill_state_machine.py: the Distributed Map, whose item processor it
also runs as an execution of its own, the Choice loop, Retry with jitter, Fail with CausePath).

Least privilege, per role:
  every function  the control record: GetItem + Query on the TABLE (what SagaFunctions grants
            every function), each only for items of the control partition
            (dynamodb:LeadingKeys = CONTROL_PK);
  planner, verifier  PutItem + UpdateItem of the control partition's items (the run's lease,
            its event items, the recorded result); no saga data access beyond what follows;
  planner   GetItem + PutItem of the fence slots (LeadingKeys like "RSAGA_INDEX#FENCE#*"):
            arming them with the run's lease epoch;
  worker    UpdateItem of the control partition's items (the lease's heartbeats; it creates no
            item there); ConditionCheckItem + GetItem of the fence slots only (the fence's
            check of its segment's slot in every re-stamp's TransactWriteItems, and the read
            that names the epoch that armed it when refused; nothing on the control partition
            is in a re-stamp); dynamodb:Scan on the TABLE only projecting
            WORKER_SCAN_ATTRIBUTES (dynamodb:Select = SPECIFIC_ATTRIBUTES); dynamodb:UpdateItem
            on the TABLE only of saga rows (LeadingKeys like "RSAGA#*"), naming only
            WORKER_UPDATE_ATTRIBUTES, ReturnValues NONE where given (the re-stamp, of GSI4PK
            or of OpenSagaPK);
  verifier  dynamodb:Query on the INDEX (what is left on the source key) and on the open
            index (its every key) + dynamodb:Scan on the TABLE only projecting
            VERIFY_SCAN_ATTRIBUTES (an open-index run's consistent Scan of the saga rows) +
            dynamodb:GetItem of saga rows projecting VERIFY_READ_ATTRIBUTES (a re-read before
            one counts as left, or as wrong in the open index);
  state machine  lambda:InvokeFunction on these three functions, its log delivery, X-Ray;
            the Distributed Map's states:StartExecution on itself and Describe/Stop/Redrive of
            its own executions (CDK's DistributedMapPolicy).
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra.backfill_findings import acknowledge_state_machine_findings
from infra.functions import SagaFunctions
from saga_index.index.names import (
    BACKFILL_SEGMENT_TEMPLATE_FIELDS,
    BACKFILL_THROTTLED_ERROR,
    ENV_BACKFILL_SAFETY_MARGIN,
    ENV_MAX_ATTEMPTS,
    INDEX_PARTITION_KEY,
    INDEX_SORT_KEY,
    MAX_CONCURRENT_SEGMENTS,
    OPEN_INDEX_PARTITION_KEY,
    SERVICE_BACKFILL_PLAN,
    SERVICE_BACKFILL_VERIFY,
    SERVICE_BACKFILL_WORKER,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
)

# The worker stops WORKER_SAFETY_MARGIN_SECONDS before this and returns its cursor: an
# invocation re-stamps for about a minute, then the state machine invokes it again. Short on
# purpose: a stopped execution starts no new invocation, but one already running keeps going
# until it returns, so this bounds how long writes continue after an operator stops a run.
WORKER_TIMEOUT = cdk.Duration.minutes(2)
WORKER_SAFETY_MARGIN_SECONDS = 60
# Few attempts per request: one write with botocore's backoff between attempts (1+2+4+8+16 s at
# most) must fit in the safety margin. A throttle that outlasts them raises
# SegmentThrottledError, which the state machine retries with a much longer backoff.
WORKER_MAX_ATTEMPTS = 6
EXECUTION_TIMEOUT = cdk.Duration.hours(24)
LAMBDA_SERVICE_ERRORS = [
    "Lambda.ClientExecutionTimeoutException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
]
# A Lambda killed at its timeout: the worker stops before it, so this is rare; re-running from
# the same cursor is safe (the Scan skips what was re-stamped).
LAMBDA_TIMEOUT_ERROR = "Sandbox.Timedout"
VERIFICATION_FAILED_ERROR = "BackfillVerificationFailed"
# Step Functions fails a Standard execution at its 25,000th history event. One worker invocation
# adds 9 to the history of its segment's child execution (Task entered, scheduled, started,
# succeeded, exited; Choice entered, exited; Pass entered, exited), each retried attempt 3 more;
# a child adds CHILD_FIXED_EVENTS of its own (started, succeeded; SegmentFinished replaces the
# last ContinueFromCursor). The parent holds the plan, one Map Run and the verification:
# PARENT_HISTORY_EVENTS, plus 3 per retried plan or verify attempt (12 at most), whatever the
# number of segments or invocations. tests/component/test_backfill_state_machine.py counts them;
# docs/runbook.md ("Reference") derives the ceiling.
HISTORY_EVENT_LIMIT = 25_000
HISTORY_EVENTS_PER_WORKER_INVOCATION = 9
CHILD_FIXED_EVENTS = 2
PARENT_HISTORY_EVENTS = 22
# Every attribute the worker's requests name (layout_change/backfill/segment.py, row.py and
# open_row.py): its Scan projects these; its re-stamp's key, update and condition expressions
# name only the update list. The key attributes of the table and of the index must be in both
# (AWS: dynamodb:Attributes must list them). An open-index run's re-stamp SETs or REMOVEs
# OpenSagaPK and names `state` in its condition only (the row still as read); IAM cannot tell a
# condition's attribute from an update's. tests/infra drives the worker through both kinds of
# run and checks each request it makes against these lists.
WORKER_UPDATE_ATTRIBUTES = (
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    INDEX_PARTITION_KEY,
    INDEX_SORT_KEY,
    "personId",
    "state",
    OPEN_INDEX_PARTITION_KEY,
)
WORKER_SCAN_ATTRIBUTES = (*WORKER_UPDATE_ATTRIBUTES, "entityType")
# What the verify step's confirming GetItem of a saga row names: its key and projection (a row
# still on a source key, layout_change/backfill/readback.py; a row the open index gets wrong,
# layout_change/checks/open_index.py); tests/infra holds its requests to it.
_OPEN_ROW = ("personId", "state", OPEN_INDEX_PARTITION_KEY)
VERIFY_READ_ATTRIBUTES = (TABLE_PARTITION_KEY, TABLE_SORT_KEY, INDEX_PARTITION_KEY, *_OPEN_ROW)
# What an open-index run's verification Scan of the saga rows projects and filters on (PK, SK).
VERIFY_SCAN_ATTRIBUTES = (TABLE_PARTITION_KEY, TABLE_SORT_KEY, *_OPEN_ROW)
# An open-index run's verification reads the whole base table (at the run's
# verifyReadUnitsPerSecond, 1,000 by default from the CLI: about 3.6 GB of consistent reads
# in 15 minutes); a layout run's queries what is left on the source keys.
VERIFY_TIMEOUT = cdk.Duration.minutes(15)


class SagaBackfill(Construct):
    """`.state_machine`, `.plan_function`, `.worker_function`, `.verify_function`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: SagaFunctions,
    ) -> None:
        super().__init__(scope, construct_id)
        table = functions.table

        self.plan_function = functions.function(
            "BackfillPlan",
            handler="handlers.backfill_plan.handler",
            description="Backfill: validate the run against the control record, lay out segments",
            service=SERVICE_BACKFILL_PLAN,
            timeout=cdk.Duration.seconds(30),
        )
        self.worker_function = functions.function(
            "BackfillWorker",
            handler="handlers.backfill_worker.handler",
            description="Backfill: re-stamp GSI4PK or OpenSagaPK of one Scan segment, rate-capped",
            service=SERVICE_BACKFILL_WORKER,
            timeout=WORKER_TIMEOUT,
            environment={
                ENV_MAX_ATTEMPTS: str(WORKER_MAX_ATTEMPTS),
                ENV_BACKFILL_SAFETY_MARGIN: str(WORKER_SAFETY_MARGIN_SECONDS),
            },
        )
        table.grant_projected_scan(self.worker_function, attributes=WORKER_SCAN_ATTRIBUTES)
        table.grant_saga_row_update(self.worker_function, attributes=WORKER_UPDATE_ATTRIBUTES)
        self.verify_function = functions.function(
            "BackfillVerify",
            handler="handlers.backfill_verify.handler",
            description="Backfill: aggregate counts, find rows left to move or the open index "
            "gets wrong",
            service=SERVICE_BACKFILL_VERIFY,
            timeout=VERIFY_TIMEOUT,
        )
        table.grant_index_query(self.verify_function)
        table.grant_open_index_query(self.verify_function)
        table.grant_projected_scan(self.verify_function, attributes=VERIFY_SCAN_ATTRIBUTES)
        table.grant_saga_row_read(self.verify_function, attributes=VERIFY_READ_ATTRIBUTES)

        for fn in (self.plan_function, self.verify_function):
            table.grant_control_write(fn)
        table.grant_control_update(self.worker_function)
        # The plan step takes the run: it arms the fence slots with the lease's epoch
        # (saga_index/layout_change/backfill/slots.py).
        table.grant_fence_arm(self.plan_function)
        # Every fenced re-stamp is a TransactWriteItems whose ConditionCheck reads its
        # segment's fence slot (saga_index/layout_change/backfill/fence.py): IAM authorises it
        # as dynamodb:ConditionCheckItem, for the fence slots only; the transaction's Update is
        # the re-stamp's UpdateItem grant above.
        table.grant_fence_check(self.worker_function)

        self.log_group = logs.LogGroup(
            self,
            "StateMachineLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Re-stamp GSI4PK of saga rows from the record's source layout to its target, "
            "or stamp / remove their OpenSagaPK (a run of kind open-index)",
            definition_body=sfn.DefinitionBody.from_chainable(self._definition()),
            state_machine_type=sfn.StateMachineType.STANDARD,
            timeout=EXECUTION_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                # Inputs and outputs carry counts, cursors and table keys, never row contents.
                include_execution_data=True,
            ),
        )
        acknowledge_state_machine_findings(
            self.state_machine, (self.plan_function, self.worker_function, self.verify_function)
        )
        cdk.CfnOutput(
            self,
            "StateMachineArn",
            value=self.state_machine.state_machine_arn,
            description="saga-index backfill --state-machine-arn <this>",
        )

    # ---- the definition -------------------------------------------------------------------

    def _definition(self) -> sfn.IChainable:
        plan = tasks.LambdaInvoke(
            self,
            "PlanSegments",
            lambda_function=self.plan_function,
            payload=sfn.TaskInput.from_object(
                {
                    "request": sfn.JsonPath.object_at("$"),
                    # The lease's holder; its token is derived from it (one per execution).
                    "holder": sfn.JsonPath.execution_id,
                }
            ),
            output_path="$.Payload",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda_service_errors(plan)

        restamp = self._segment_loop()
        segment_input = _segment_item_selector()

        # Distributed: each segment's loop is a child execution with its own history (an
        # inline Map put every invocation of every segment in the parent's 25,000 events).
        # Standard children: a segment's loop runs for hours. No tolerated failures: the first
        # failed segment fails the Map Run, which stops the others.
        segments = sfn.DistributedMap(
            self,
            "Segments",
            items_path="$.segments",
            item_selector=segment_input,
            max_concurrency=MAX_CONCURRENT_SEGMENTS,
            result_path="$.segmentResults",
            map_execution_type=sfn.StateMachineType.STANDARD,
        )
        segments.item_processor(restamp)

        verify = tasks.LambdaInvoke(
            self,
            "VerifyBackfill",
            lambda_function=self.verify_function,
            payload=sfn.TaskInput.from_object(
                {
                    "request": sfn.JsonPath.object_at("$.request"),
                    "run": sfn.JsonPath.object_at("$.run"),
                    "segments": sfn.JsonPath.list_at("$.segmentResults"),
                }
            ),
            output_path="$.Payload",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda_service_errors(verify)
        verdict = (
            sfn.Choice(self, "Verified?")
            .when(
                sfn.Condition.boolean_equals("$.verification.ok", True),
                sfn.Succeed(self, "BackfillComplete"),
            )
            .otherwise(
                sfn.Fail(
                    self,
                    "BackfillIncomplete",
                    error=VERIFICATION_FAILED_ERROR,
                    cause_path="$.verification.message",
                )
            )
        )
        return plan.next(segments).next(verify).next(verdict)

    def _segment_loop(self) -> tasks.LambdaInvoke:
        """One segment's loop: re-stamp from the cursor until the worker answers done."""
        restamp = tasks.LambdaInvoke(
            self,
            "RestampSegment",
            lambda_function=self.worker_function,
            payload=sfn.TaskInput.from_json_path_at("$"),
            result_selector={"output": sfn.JsonPath.object_at("$.Payload")},
            result_path="$.invocation",
            retry_on_service_exceptions=False,
        )
        self._retry_lambda_service_errors(restamp)
        restamp.add_retry(
            errors=[BACKFILL_THROTTLED_ERROR],
            interval=cdk.Duration.seconds(30),
            backoff_rate=2,
            max_attempts=5,
            max_delay=cdk.Duration.minutes(5),
            jitter_strategy=sfn.JitterType.FULL,
        )
        restamp.add_retry(
            errors=[LAMBDA_TIMEOUT_ERROR],
            interval=cdk.Duration.seconds(5),
            backoff_rate=2,
            max_attempts=2,
        )
        next_input: dict[str, Any] = {
            field: sfn.JsonPath.string_at(f"$.{field}")
            for field in ("segment", *BACKFILL_SEGMENT_TEMPLATE_FIELDS)
        }
        next_input["run"] = sfn.JsonPath.object_at("$.run")
        next_input["cursor"] = sfn.JsonPath.object_at("$.invocation.output.cursor")
        next_input["totals"] = sfn.JsonPath.object_at("$.invocation.output")
        continue_segment = sfn.Pass(
            self,
            "ContinueFromCursor",
            comment="Next invocation: same segment, from the returned cursor, with the totals",
            parameters=next_input,
        )
        segment_finished = sfn.Pass(self, "SegmentFinished", output_path="$.invocation.output")
        restamp.next(
            sfn.Choice(self, "SegmentDone?")
            .when(sfn.Condition.boolean_equals("$.invocation.output.done", True), segment_finished)
            .otherwise(continue_segment)
        )
        continue_segment.next(restamp)
        return restamp

    @staticmethod
    def _retry_lambda_service_errors(task: tasks.LambdaInvoke) -> None:
        task.add_retry(
            errors=LAMBDA_SERVICE_ERRORS,
            interval=cdk.Duration.seconds(2),
            backoff_rate=2,
            max_attempts=6,
            max_delay=cdk.Duration.minutes(1),
            jitter_strategy=sfn.JitterType.FULL,
        )


def _segment_item_selector() -> dict[str, Any]:
    """Each segment's first input: the request's template fields, its number and the run."""
    template = "$.template"
    segment_input: dict[str, Any] = {
        field: sfn.JsonPath.string_at(f"{template}.{field}")
        for field in BACKFILL_SEGMENT_TEMPLATE_FIELDS
    }
    segment_input["segment"] = sfn.JsonPath.string_at("$$.Map.Item.Value")
    segment_input["run"] = sfn.JsonPath.object_at("$.run")
    return segment_input
