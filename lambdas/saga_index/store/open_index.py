"""Is the sparse open-saga index there, and can the move that fills it start? (DescribeTable)

The open index (`renewal-saga-open-index`, keyed OpenSagaPK / GSI4SK, projecting ALL) is a
second GSI beside GSI4. An owned table gets it from the stack; the production table is attached,
so its owning stack adds it (infra/open_index.py) or an operator runs the one `aws dynamodb
update-table` command built here (docs/deploy.md shows it; a test ties the two). DynamoDB then
builds it online: IndexStatus CREATING (Backfilling true while it reads the table), then ACTIVE.
Nothing can Query it before ACTIVE, so the move that starts writing and reading the open key
needs it ACTIVE with its backfill finished, keyed and projected as the readers expect.

`open_index_readiness` answers that from one DescribeTable; `readiness_from_description`
is the same decision on a DescribeTable-shaped dict (moto creates an index ACTIVE at once and
never reports Backfilling, so the CREATING answers are tested on the dict). Every `problem`
says what to do, with commands that work when run as printed.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import ClientError

from saga_index.index import names

# What the readers need of the index: its keys (both strings) and whole rows (ALL: the sweeps
# read every attribute; a narrower projection would cost a GetItem per row).
OPEN_INDEX_KEY_SCHEMA: tuple[tuple[str, str], ...] = (
    (names.OPEN_INDEX_PARTITION_KEY, "HASH"),
    (names.OPEN_INDEX_SORT_KEY, "RANGE"),
)
OPEN_INDEX_PROJECTION = "ALL"
KEY_ATTRIBUTE_TYPE = "S"
# Where the owning stack's function lives and where the command is documented.
OPEN_INDEX_CONSTRUCT = "infra.open_index.add_open_saga_index(table)"
DEPLOY_DOC = "docs/deploy.md"
STATUS_ACTIVE = "ACTIVE"


def open_index_attribute_definitions() -> list[dict[str, str]]:
    """UpdateTable's AttributeDefinitions for the open index's keys (both strings)."""
    return [
        {"AttributeName": attribute, "AttributeType": KEY_ATTRIBUTE_TYPE}
        for attribute, _ in OPEN_INDEX_KEY_SCHEMA
    ]


def open_index_create(provisioned: Mapping[str, int] | None = None) -> dict[str, Any]:
    """UpdateTable's `{"Create": ...}` for the open index. A provisioned table's index needs its
    own ProvisionedThroughput (`provisioned`: ReadCapacityUnits, WriteCapacityUnits); an
    on-demand table's must not carry one."""
    create: dict[str, Any] = {
        "IndexName": names.OPEN_INDEX_NAME,
        "KeySchema": [
            {"AttributeName": attribute, "KeyType": key_type}
            for attribute, key_type in OPEN_INDEX_KEY_SCHEMA
        ],
        "Projection": {"ProjectionType": OPEN_INDEX_PROJECTION},
    }
    if provisioned is not None:
        create["ProvisionedThroughput"] = {
            "ReadCapacityUnits": int(provisioned["ReadCapacityUnits"]),
            "WriteCapacityUnits": int(provisioned["WriteCapacityUnits"]),
        }
    return {"Create": create}


def add_open_index_command(
    table_name: str,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    provisioned: Mapping[str, int] | None = None,
) -> str:
    """The one AWS CLI command that adds the open index to an existing table."""
    definitions = json.dumps(open_index_attribute_definitions(), separators=(",", ":"))
    updates = json.dumps([open_index_create(provisioned)], separators=(",", ":"))
    return " ".join(
        [
            "aws dynamodb update-table",
            *_where(region, endpoint_url),
            "--table-name",
            shlex.quote(table_name),
            "--attribute-definitions",
            shlex.quote(definitions),
            "--global-secondary-index-updates",
            shlex.quote(updates),
        ]
    )


def open_index_status_command(
    table_name: str, *, region: str | None = None, endpoint_url: str | None = None
) -> str:
    """The AWS CLI command that prints the open index's IndexStatus and Backfilling (an empty
    list when the table has no such index)."""
    query = (
        f"Table.GlobalSecondaryIndexes[?IndexName=='{names.OPEN_INDEX_NAME}']"
        ".{IndexStatus: IndexStatus, Backfilling: Backfilling}"
    )
    # Double quotes: the query holds single quotes and nothing a shell expands inside "...".
    return " ".join(
        [
            "aws dynamodb describe-table",
            *_where(region, endpoint_url),
            "--table-name",
            shlex.quote(table_name),
            "--query",
            f'"{query}"',
        ]
    )


def delete_open_index_command(
    table_name: str, *, region: str | None = None, endpoint_url: str | None = None
) -> str:
    """The AWS CLI command that deletes the open index (only to re-add one built wrongly)."""
    updates = json.dumps([{"Delete": {"IndexName": names.OPEN_INDEX_NAME}}], separators=(",", ":"))
    return " ".join(
        [
            "aws dynamodb update-table",
            *_where(region, endpoint_url),
            "--table-name",
            shlex.quote(table_name),
            "--global-secondary-index-updates",
            shlex.quote(updates),
        ]
    )


@dataclass(frozen=True)
class OpenIndexReadiness:
    """What DescribeTable says of the open index, and what to do when it is not ready.

    `problem` is None exactly when the index exists, is ACTIVE, is not backfilling, and is keyed
    and projected as the readers expect; otherwise it names what is wrong and what to do.
    Unknown answers are None (the table is missing: nothing about the index is known).
    """

    table_name: str
    index_name: str
    table_exists: bool
    exists: bool
    index_status: str | None
    backfilling: bool | None
    keys_as_expected: bool | None
    projection_as_expected: bool | None
    problem: str | None

    @property
    def ready(self) -> bool:
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table_name,
            "index": self.index_name,
            "tableExists": self.table_exists,
            "exists": self.exists,
            "indexStatus": self.index_status,
            "backfilling": self.backfilling,
            "keysAsExpected": self.keys_as_expected,
            "projectionAsExpected": self.projection_as_expected,
            "ready": self.ready,
            "problem": self.problem,
        }


def open_index_readiness(client: Any, table_name: str) -> OpenIndexReadiness:
    """The open index's readiness on `table_name`, from one DescribeTable.

    A missing table is an answer (table_exists False, with a problem); any other failure of the
    call (denied, unreachable, throttled past the client's retries) propagates as botocore
    raised it, for the caller's failure handling to name."""
    region = getattr(client.meta, "region_name", None)
    endpoint_url = getattr(client.meta, "endpoint_url", None)
    try:
        response = client.describe_table(TableName=table_name)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        where = f"region {region}" + (f" at {endpoint_url}" if endpoint_url else "")
        return _readiness(
            table_name,
            table_exists=False,
            exists=False,
            problem=(
                f"table {table_name} does not exist in {where}: name the saga table (the one "
                f"cdk.json's tableName names) and its region; {names.OPEN_INDEX_NAME} is added "
                "to that table"
            ),
        )
    return readiness_from_description(response["Table"], region=region, endpoint_url=endpoint_url)


def readiness_from_description(
    table: Mapping[str, Any], *, region: str | None = None, endpoint_url: str | None = None
) -> OpenIndexReadiness:
    """The decision on DescribeTable's `Table` object; `region` and `endpoint_url` go into the
    commands the problem names (so they reach the same table when run as printed)."""
    table_name = str(table.get("TableName", ""))
    where = {"region": region, "endpoint_url": endpoint_url}
    index = next(
        (
            gsi
            for gsi in table.get("GlobalSecondaryIndexes") or []
            if gsi.get("IndexName") == names.OPEN_INDEX_NAME
        ),
        None,
    )
    status_command = open_index_status_command(table_name, **where)
    if index is None:
        add = add_open_index_command(table_name, provisioned=_provisioned(table), **where)
        return _readiness(
            table_name,
            exists=False,
            problem=(
                f"{names.OPEN_INDEX_NAME} does not exist on table {table_name}: add it with "
                f"{OPEN_INDEX_CONSTRUCT} in the stack that owns the table, or with `{add}` "
                f"({DEPLOY_DOC}), then wait until its IndexStatus is ACTIVE and Backfilling is "
                f"not true: `{status_command}` shows both"
            ),
        )
    status = str(index.get("IndexStatus", "UNKNOWN"))
    backfilling = bool(index.get("Backfilling", False))
    keys_ok = _keys_as_expected(index, table)
    projection_ok = (index.get("Projection") or {}).get("ProjectionType") == OPEN_INDEX_PROJECTION
    problem = _shape_problem(table_name, index, keys_ok, projection_ok, where)
    if problem is None and (status != STATUS_ACTIVE or backfilling):
        problem = _status_problem(table_name, status, backfilling, status_command)
    return _readiness(
        table_name,
        exists=True,
        index_status=status,
        backfilling=backfilling,
        keys_as_expected=keys_ok,
        projection_as_expected=projection_ok,
        problem=problem,
    )


def _status_problem(table_name: str, status: str, backfilling: bool, status_command: str) -> str:
    what = f"{names.OPEN_INDEX_NAME} on table {table_name} is {status} (Backfilling: " + (
        "true)" if backfilling else "false)"
    )
    if status == "DELETING":
        return (
            f"{what}: it is being deleted; wait until `{status_command}` prints an empty list, "
            f"then add it again ({DEPLOY_DOC})"
        )
    if status == "CREATING" and backfilling:
        doing = "DynamoDB is still reading the table into it"
    elif status == "CREATING":
        doing = "DynamoDB is still building it"
    else:
        doing = "nothing can rely on it until it is ACTIVE"
    return (
        f"{what}: {doing}; wait until IndexStatus is ACTIVE and Backfilling is not true: "
        f"`{status_command}` shows both (the table serves reads and writes meanwhile)"
    )


def _shape_problem(
    table_name: str,
    index: Mapping[str, Any],
    keys_ok: bool,
    projection_ok: bool,
    where: Mapping[str, str | None],
) -> str | None:
    wrong: list[str] = []
    if not keys_ok:
        keys = ", ".join(
            f"{k.get('AttributeName')} ({k.get('KeyType')})" for k in index.get("KeySchema", [])
        )
        expected = ", ".join(
            f"{a} ({t}, type {KEY_ATTRIBUTE_TYPE})" for a, t in OPEN_INDEX_KEY_SCHEMA
        )
        wrong.append(f"its keys are {keys or 'none'}, not {expected}")
    if not projection_ok:
        projection = (index.get("Projection") or {}).get("ProjectionType")
        wrong.append(f"it projects {projection}, not {OPEN_INDEX_PROJECTION}")
    if not wrong:
        return None
    delete = delete_open_index_command(table_name, **where)
    status_command = open_index_status_command(table_name, **where)
    return (
        f"{names.OPEN_INDEX_NAME} on table {table_name} is not the open index the readers "
        f"expect: {'; '.join(wrong)}. DynamoDB cannot change an index's keys or projection: "
        f"remove it where it was added (its definition in the owning stack, or `{delete}`), "
        f"wait until `{status_command}` prints an empty list, then add it as {DEPLOY_DOC} "
        "says"
    )


def _keys_as_expected(index: Mapping[str, Any], table: Mapping[str, Any]) -> bool:
    schema = tuple((k.get("AttributeName"), k.get("KeyType")) for k in index.get("KeySchema", []))
    if schema != OPEN_INDEX_KEY_SCHEMA:
        return False
    types = {
        d.get("AttributeName"): d.get("AttributeType")
        for d in table.get("AttributeDefinitions") or []
    }
    return all(types.get(attribute) == KEY_ATTRIBUTE_TYPE for attribute, _ in OPEN_INDEX_KEY_SCHEMA)


def _provisioned(table: Mapping[str, Any]) -> dict[str, int] | None:
    """The throughput a new index on a provisioned table needs: GSI4's, else the table's; None
    on an on-demand table (BillingModeSummary PAY_PER_REQUEST)."""
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode")
    if billing == "PAY_PER_REQUEST":
        return None
    sources = [
        gsi.get("ProvisionedThroughput") or {}
        for gsi in table.get("GlobalSecondaryIndexes") or []
        if gsi.get("IndexName") == names.INDEX_NAME
    ]
    sources.append(table.get("ProvisionedThroughput") or {})
    for throughput in sources:
        read, write = throughput.get("ReadCapacityUnits"), throughput.get("WriteCapacityUnits")
        if read and write:
            return {"ReadCapacityUnits": int(read), "WriteCapacityUnits": int(write)}
    # A table whose mode is not stated and that reports no throughput is on-demand.
    return None


def _where(region: str | None, endpoint_url: str | None) -> list[str]:
    words: list[str] = []
    if region:
        words += ["--region", shlex.quote(region)]
    if endpoint_url and not _is_aws_endpoint(endpoint_url):
        # A local server (dynalite, moto's): the CLI must be sent there too.
        words += ["--endpoint-url", shlex.quote(endpoint_url)]
    return words


def _is_aws_endpoint(endpoint_url: str) -> bool:
    host = (urlsplit(endpoint_url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn", ".api.aws"))


def _readiness(
    table_name: str,
    *,
    exists: bool,
    table_exists: bool = True,
    problem: str | None,
    index_status: str | None = None,
    backfilling: bool | None = None,
    keys_as_expected: bool | None = None,
    projection_as_expected: bool | None = None,
) -> OpenIndexReadiness:
    return OpenIndexReadiness(
        table_name=table_name,
        index_name=names.OPEN_INDEX_NAME,
        table_exists=table_exists,
        exists=exists,
        index_status=index_status,
        backfilling=backfilling,
        keys_as_expected=keys_as_expected,
        projection_as_expected=projection_as_expected,
        problem=problem,
    )
