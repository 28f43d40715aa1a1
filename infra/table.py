"""The saga table capability: own the table (dev/test stacks) or attach to an existing one."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.open_index import add_open_saga_index
from saga_index.index.names import (
    CONTROL_PK,
    DRIFT_CURSOR_PK,
    FENCE_PK_PREFIX,
    INDEX_NAME,
    INDEX_PARTITION_KEY,
    INDEX_SORT_KEY,
    OPEN_INDEX_NAME,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
)

# The control record's reads (ControlStore.read: a consistent GetItem of STATE, and when it is
# missing a Query of the newest HISTORY item) and its writes (conditional UpdateItem of STATE,
# PutItem of HISTORY / EVENT items).
CONTROL_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:Query")
CONTROL_WRITE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")
# Every item a request touches must be in the control partition. ForAllValues is safe here: each
# of these actions always carries the key (it names the partition key it reads or writes).
CONTROL_PARTITION_CONDITION = {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [CONTROL_PK]}}
# Saga rows' partitions (index.keys: PK = "RSAGA#" + sagaId; tests/infra ties the two). The
# control partition ("RSAGA_INDEX#CONTROL") does not match it: "#" follows "RSAGA" there only
# after "_INDEX".
SAGA_PARTITIONS = "RSAGA#*"
SAGA_PARTITION_CONDITION: dict[str, dict[str, object]] = {
    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [SAGA_PARTITIONS]}
}
# The backfill's fence slots (layout_change.backfill.slots: PK = FENCE_PK_PREFIX + the slot's
# number), one partition key each: neither the control partition nor a saga row's.
FENCE_SLOT_PARTITIONS = FENCE_PK_PREFIX + "*"
FENCE_SLOT_CONDITION: dict[str, dict[str, object]] = {
    "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [FENCE_SLOT_PARTITIONS]}
}
# The drift guard's cursor: exactly its one partition key (not the control partition, not a
# fence slot), read and overwritten whole: GetItem + PutItem, never an update or a delete.
DRIFT_CURSOR_CONDITION: dict[str, dict[str, object]] = {
    "ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [DRIFT_CURSOR_PK]}
}
DRIFT_CURSOR_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")
# The re-stamp's check of its slot (a TransactWriteItems' ConditionCheck is authorised as
# dynamodb:ConditionCheckItem), and the slot read that says which epoch armed it when refused.
FENCE_CHECK_ACTIONS = ("dynamodb:ConditionCheckItem", "dynamodb:GetItem")
# Arming: a consistent read of slot 0 (the high-water mark), then a conditional PutItem a slot.
FENCE_ARM_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")

# Contributor Insights on throttled keys only: it names the hot key when something throttles, and
# its rules see only throttled requests rather than every request. Owned tables only:
# CloudFormation cannot set it on a table the stack merely attaches to (import mode);
# docs/observability.md has the one CLI command for that case.
THROTTLED_KEYS_INSIGHTS = dynamodb.ContributorInsightsSpecification(
    enabled=True, mode=dynamodb.ContributorInsightsMode.THROTTLED_KEYS
)


class SagaTable(Construct):
    """Exposes `.table`, `.index_name` and `.open_index_name` whichever way the table came to
    exist.

    import_existing=True attaches by name and creates no table resource: the production table
    predates this stack and CloudFormation must never be able to replace or delete it, nor
    add an index to it (its owning stack adds the open index: infra/open_index.py).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, table_name: str, import_existing: bool
    ) -> None:
        super().__init__(scope, construct_id)
        self.index_name = INDEX_NAME
        self.open_index_name = OPEN_INDEX_NAME
        self.table: dynamodb.ITable
        if import_existing:
            # global_indexes makes grant_* cover ".../index/<name>" ARNs; without it a Query on
            # the GSI is denied even though the table grant looks right.
            self.table = dynamodb.Table.from_table_attributes(
                self, "Table", table_name=table_name, global_indexes=[INDEX_NAME, OPEN_INDEX_NAME]
            )
            return

        table = dynamodb.Table(
            self,
            "Table",
            table_name=table_name,
            partition_key=dynamodb.Attribute(
                name=TABLE_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=TABLE_SORT_KEY, type=dynamodb.AttributeType.STRING),
            # On-demand, as production runs; the hot-partition ceiling does not depend on it.
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # The table holds the durable saga read-model (ADR-0047): a stack deletion or a
            # replacing change must orphan it, never drop it.
            removal_policy=cdk.RemovalPolicy.RETAIN,
            contributor_insights_specification=THROTTLED_KEYS_INSIGHTS,
        )
        table.add_global_secondary_index(
            index_name=INDEX_NAME,
            partition_key=dynamodb.Attribute(
                name=INDEX_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
            # Readers return whole saga rows from the index; a narrower projection would force
            # a GetItem per row on the very partition we are trying to unload.
            projection_type=dynamodb.ProjectionType.ALL,
            # On-call must see WHICH GSI4PK throttles (the legacy key, one hot shard).
            contributor_insights_specification=THROTTLED_KEYS_INSIGHTS,
        )
        # The sparse open-saga index, exactly as the production table's owning stack adds it.
        add_open_saga_index(table)
        self.table = table

    @property
    def index_arn(self) -> str:
        """The ARN a Query on the GSI is authorised against (the index, not the table)."""
        return f"{self.table.table_arn}/index/{self.index_name}"

    @property
    def open_index_arn(self) -> str:
        """The ARN a Query on the open-saga index is authorised against."""
        return f"{self.table.table_arn}/index/{self.open_index_name}"

    def grant_control_read(self, grantee: iam.IGrantable) -> None:
        """GetItem and Query on the TABLE, for the control partition's items only."""
        self._grant_control(grantee, CONTROL_READ_ACTIONS)

    def grant_control_write(self, grantee: iam.IGrantable) -> None:
        """PutItem and UpdateItem on the TABLE, for the control partition's items only."""
        self._grant_control(grantee, CONTROL_WRITE_ACTIONS)

    def grant_control_update(self, grantee: iam.IGrantable) -> None:
        """UpdateItem on the TABLE, for the control partition's items only (no new items)."""
        self._grant_control(grantee, ("dynamodb:UpdateItem",))

    def grant_saga_row_update(
        self, grantee: iam.IGrantable, *, attributes: tuple[str, ...] | None = None
    ) -> None:
        """UpdateItem on the TABLE, for saga rows only (dynamodb:LeadingKeys on SAGA_PARTITIONS).

        With `attributes`, also an allow-list: every attribute the request names (its key, the
        update and the condition expression all count, as AWS documents dynamodb:Attributes) must
        be one of them, and ReturnValues must be NONE where the request carries it (ALL_OLD /
        ALL_NEW would return attributes outside the list). IfExists: the Update of a fenced
        TransactWriteItems has no ReturnValues at all (it cannot return attributes), and an
        absent ReturnValues on UpdateItem is NONE."""
        conditions: dict[str, dict[str, object]] = dict(SAGA_PARTITION_CONDITION)
        if attributes is not None:
            conditions["ForAllValues:StringEquals"] = {"dynamodb:Attributes": list(attributes)}
            conditions["StringEqualsIfExists"] = {"dynamodb:ReturnValues": "NONE"}
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
                conditions=conditions,
            )
        )

    def grant_saga_row_read(self, grantee: iam.IGrantable, *, attributes: tuple[str, ...]) -> None:
        """GetItem on the TABLE, for saga rows only (dynamodb:LeadingKeys on SAGA_PARTITIONS),
        projecting only `attributes` (the key's among them: AWS counts them as named). A GetItem
        without a projection reads the whole item: dynamodb:Select must then be
        SPECIFIC_ATTRIBUTES where the request carries it, as AWS's attribute-level example has."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem"],
                resources=[self.table.table_arn],
                conditions={
                    **SAGA_PARTITION_CONDITION,
                    "ForAllValues:StringEquals": {"dynamodb:Attributes": list(attributes)},
                    "StringEqualsIfExists": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"},
                },
            )
        )

    def grant_projected_scan(
        self, grantee: iam.IGrantable, *, attributes: tuple[str, ...] | None = None
    ) -> None:
        """Scan on the TABLE only with a projection (dynamodb:Select = SPECIFIC_ATTRIBUTES: never
        whole items), and with `attributes`, projecting (and filtering on) only those."""
        conditions: dict[str, dict[str, object]] = {
            "StringEquals": {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"}
        }
        if attributes is not None:
            conditions["ForAllValues:StringEquals"] = {"dynamodb:Attributes": list(attributes)}
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["dynamodb:Scan"], resources=[self.table.table_arn], conditions=conditions
            )
        )

    def grant_fence_check(self, grantee: iam.IGrantable) -> None:
        """ConditionCheckItem and GetItem on the TABLE, for the fence slots only: what a
        re-stamping function needs of them (no write, no delete)."""
        self._grant_fence(grantee, FENCE_CHECK_ACTIONS)

    def grant_fence_arm(self, grantee: iam.IGrantable) -> None:
        """GetItem and PutItem on the TABLE, for the fence slots only: what taking a run needs
        (arming them with its lease epoch; never a delete)."""
        self._grant_fence(grantee, FENCE_ARM_ACTIONS)

    def grant_drift_cursor(self, grantee: iam.IGrantable) -> None:
        """GetItem and PutItem on the TABLE, of the drift guard's cursor item only."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(DRIFT_CURSOR_ACTIONS),
                resources=[self.table.table_arn],
                conditions=DRIFT_CURSOR_CONDITION,
            )
        )

    def _grant_fence(self, grantee: iam.IGrantable, actions: tuple[str, ...]) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions),
                resources=[self.table.table_arn],
                conditions=FENCE_SLOT_CONDITION,
            )
        )

    def _grant_control(self, grantee: iam.IGrantable, actions: tuple[str, ...]) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=list(actions),
                resources=[self.table.table_arn],
                conditions=CONTROL_PARTITION_CONDITION,
            )
        )

    def grant_index_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """dynamodb:Query on the GSI only: not on the table, not on any other index."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["dynamodb:Query"], resource_arns=[self.index_arn]
        )

    def grant_open_index_query(self, grantee: iam.IGrantable) -> iam.Grant:
        """dynamodb:Query on the open-saga index only: not on the table, not on GSI4."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["dynamodb:Query"], resource_arns=[self.open_index_arn]
        )
