"""The sparse open-saga index, as the stack that OWNS a saga table adds it.

This stack owns the dev/test tables and adds it to them itself (infra/table.py). The production
table is attached, not owned: CloudFormation can add a GSI only to a table its own stack
defines, so the stack that owns that table calls `add_open_saga_index(table)` (the one
alternative is the AWS CLI command in docs/deploy.md; tests/infra ties both to the same
definition). DynamoDB then builds the index online from the table: the table keeps serving
reads and writes, and the index answers no Query until it is ACTIVE.
"""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb

from saga_index.index.names import OPEN_INDEX_NAME, OPEN_INDEX_PARTITION_KEY, OPEN_INDEX_SORT_KEY


def add_open_saga_index(table: dynamodb.Table | dynamodb.TableV2) -> str:
    """Add `renewal-saga-open-index` to `table` and return its name.

    Keyed OpenSagaPK (string; only open sagas carry it, so the index holds them alone) and
    GSI4SK (string; the order the sweeps read GSI4 in), projecting ALL: the sweeps take whole
    saga rows from it, and a narrower projection would cost a GetItem per row. Single-attribute
    keys, so that every engine the project runs on (dynalite, moto) serves it. It takes the
    table's capacity mode (on-demand, as production runs).
    """
    table.add_global_secondary_index(
        index_name=OPEN_INDEX_NAME,
        partition_key=dynamodb.Attribute(
            name=OPEN_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.STRING
        ),
        sort_key=dynamodb.Attribute(name=OPEN_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
        projection_type=dynamodb.ProjectionType.ALL,
    )
    return OPEN_INDEX_NAME
