"""The preflight checks of the table: it exists and serves, its index renewal-saga-person-index
is ACTIVE, keyed GSI4PK/GSI4SK and projects ALL, the open-saga index renewal-saga-open-index is
ready for its move (a warning until then: the layout's runbook does not need it), point-in-time
recovery is on, and Contributor Insights is on for the table and the index (import mode can set
neither: the fix is the AWS CLI command)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from saga_index.index import names
from saga_index.store import readiness_from_description
from saga_index_cli.preflight.check import (
    PERMISSION_CONTINUOUS_BACKUPS,
    PERMISSION_CONTRIBUTOR_INSIGHTS,
    PERMISSION_DESCRIBE_TABLE,
    PreflightCheck,
    Unavailable,
    aws_command,
    checked_call,
    is_not_found,
    unavailable_check,
)

# DescribeTable statuses in which the table serves reads and writes.
_SERVING_TABLE = frozenset({"ACTIVE", "UPDATING"})


@dataclass
class _Table:
    """DescribeTable's answer, or why there is none."""

    description: dict[str, Any] | None
    failure: PreflightCheck | None


def describe_table(dynamodb: Any, table: str) -> _Table:
    try:
        response = checked_call(
            PERMISSION_DESCRIBE_TABLE,
            f"table {table}",
            lambda: dynamodb.describe_table(TableName=table),
        )
    except Unavailable as failure:
        if is_not_found(failure.err):
            return _Table(
                None,
                PreflightCheck(
                    "table",
                    False,
                    f"table {table!r} does not exist in region "
                    f"{dynamodb.meta.region_name} at {dynamodb.meta.endpoint_url}",
                    "check --table (or SAGA_TABLE_NAME), --region and --endpoint-url: the "
                    "table is the one cdk.json's tableName names",
                ),
            )
        return _Table(None, unavailable_check("table", failure))
    return _Table(response["Table"], None)


def check_table(described: _Table, table: str) -> PreflightCheck:
    if described.description is None:
        assert described.failure is not None
        return described.failure
    status = str(described.description.get("TableStatus", "UNKNOWN"))
    if status not in _SERVING_TABLE:
        return PreflightCheck(
            "table",
            False,
            f"table {table!r} is {status}",
            "the runbook needs a table that serves reads and writes (ACTIVE or UPDATING): "
            "wait for CREATING to end; ARCHIVED or INACCESSIBLE_ENCRYPTION_CREDENTIALS need the "
            "table restored or its KMS key made usable first",
        )
    return PreflightCheck("table", True, f"table {table!r} exists ({status})")


def check_index(described: _Table, table: str) -> PreflightCheck:
    index = names.INDEX_NAME
    if described.description is None:
        return PreflightCheck(
            "index",
            False,
            f"index {index!r} not checked: the table could not be described (see check table)",
            "fix check table first",
        )
    found = [
        gsi
        for gsi in described.description.get("GlobalSecondaryIndexes", [])
        if gsi.get("IndexName") == index
    ]
    if not found:
        present = ", ".join(
            sorted(g["IndexName"] for g in described.description.get("GlobalSecondaryIndexes", []))
        )
        return PreflightCheck(
            "index",
            False,
            f"table {table!r} has no index {index!r} (its indexes: {present or 'none'})",
            f"the runbook re-keys an existing index: check --table; the table this stack "
            f"serves carries {index} (keys {names.INDEX_PARTITION_KEY}/"
            f"{names.INDEX_SORT_KEY}, projection ALL)",
        )
    gsi = found[0]
    status = str(gsi.get("IndexStatus", "UNKNOWN"))
    projection = str(gsi.get("Projection", {}).get("ProjectionType", "UNKNOWN"))
    key_schema = {k["KeyType"]: k["AttributeName"] for k in gsi.get("KeySchema", [])}
    expected_keys = {"HASH": names.INDEX_PARTITION_KEY, "RANGE": names.INDEX_SORT_KEY}
    problems: list[str] = []
    fixes: list[str] = []
    if status != "ACTIVE":
        backfilling = " (backfilling)" if gsi.get("Backfilling") else ""
        problems.append(f"it is {status}{backfilling}, not ACTIVE")
        fixes.append("wait until the index is ACTIVE (describe-table shows IndexStatus)")
    if key_schema != expected_keys:
        problems.append(
            f"its keys are {key_schema.get('HASH')}/{key_schema.get('RANGE')}, not "
            f"{names.INDEX_PARTITION_KEY}/{names.INDEX_SORT_KEY}"
        )
    if projection != "ALL":
        problems.append(f"it projects {projection}, not ALL")
    if key_schema != expected_keys or projection != "ALL":
        fixes.append(
            "every reader takes whole saga rows from this index, and DynamoDB cannot change an "
            "existing index's keys or projection: stop here; this table is not the one the "
            "runbook is written for"
        )
    if problems:
        return PreflightCheck(
            "index", False, f"index {index!r}: " + "; ".join(problems), "; ".join(fixes)
        )
    return PreflightCheck(
        "index",
        True,
        f"index {index!r} is ACTIVE, keyed {names.INDEX_PARTITION_KEY}/{names.INDEX_SORT_KEY}, "
        "projects ALL",
    )


# The move that needs the open-saga index ready; the layout's runbook does not.
OPEN_INDEX_MOVE = "saga-index open-index set adding"


def check_open_index(
    described: _Table, region: str | None, endpoint_url: str | None, *, required: bool = False
) -> PreflightCheck:
    """PASS when the open-saga index is ready for its move (store.open_index_readiness's
    decision, on the same DescribeTable answer); WARN while it is missing or still being built
    (the layout's runbook does not need it, its own move does: the fix says so, with the
    commands), a FAIL instead when `required` (preflight before that move, runbook O0); FAIL
    when an index of that name is keyed or projected otherwise (DynamoDB cannot change that: it
    must be removed and added again)."""
    name, index = "open-index", names.OPEN_INDEX_NAME
    if described.description is None:
        return PreflightCheck(
            name,
            False,
            f"index {index!r} not checked: the table could not be described (see check table)",
            "fix check table first",
        )
    readiness = readiness_from_description(
        described.description, region=region, endpoint_url=endpoint_url
    )
    if readiness.ready:
        return PreflightCheck(
            name,
            True,
            f"index {index!r} is ACTIVE, keyed {names.OPEN_INDEX_PARTITION_KEY}/"
            f"{names.OPEN_INDEX_SORT_KEY}, projects ALL: ready for `{OPEN_INDEX_MOVE}`",
        )
    if readiness.exists and not (readiness.keys_as_expected and readiness.projection_as_expected):
        return PreflightCheck(name, False, f"index {index!r} is built otherwise", readiness.problem)
    state = (
        f"is {readiness.index_status} (Backfilling: {str(readiness.backfilling).lower()})"
        if readiness.exists
        else "does not exist"
    )
    if required:
        return PreflightCheck(
            name,
            False,
            f"index {index!r} {state}: `{OPEN_INDEX_MOVE}` refuses until it is ACTIVE and not "
            "backfilling",
            f"before `{OPEN_INDEX_MOVE}`: {readiness.problem}",
        )
    return PreflightCheck(
        name,
        True,
        f"index {index!r} {state}: not needed for the layout's runbook, required before "
        f"`{OPEN_INDEX_MOVE}`",
        f"before `{OPEN_INDEX_MOVE}`: {readiness.problem}",
        warning=True,
    )


def check_point_in_time_recovery(dynamodb: Any, table: str, region: str | None) -> PreflightCheck:
    name = "point-in-time-recovery"
    try:
        response = checked_call(
            PERMISSION_CONTINUOUS_BACKUPS,
            f"table {table}",
            lambda: dynamodb.describe_continuous_backups(TableName=table),
        )
    except Unavailable as failure:
        return unavailable_check(name, failure)
    pitr = response.get("ContinuousBackupsDescription", {}).get(
        "PointInTimeRecoveryDescription", {}
    )
    status = str(pitr.get("PointInTimeRecoveryStatus", "UNKNOWN"))
    if status == "ENABLED":
        days = pitr.get("RecoveryPeriodInDays")
        earliest = pitr.get("EarliestRestorableDateTime")
        extras: list[str] = []
        if days:
            extras.append(f"recovery period {days} days")
        if earliest:
            extras.append(f"restorable from {earliest:%Y-%m-%dT%H:%M:%S%z}")
        return PreflightCheck(name, True, "ENABLED" + (f" ({', '.join(extras)})" if extras else ""))
    return PreflightCheck(
        name,
        False,
        f"point-in-time recovery of table {table!r} is {status}",
        "import mode (importExistingTable) cannot set it; turn it on: "
        + aws_command(
            region,
            "dynamodb",
            "update-continuous-backups",
            "--table-name",
            table,
            "--point-in-time-recovery-specification",
            "PointInTimeRecoveryEnabled=true",
        ),
    )


def check_contributor_insights(
    dynamodb: Any, table: str, region: str | None, *, index: str | None
) -> PreflightCheck:
    name = "contributor-insights-index" if index else "contributor-insights-table"
    what = f"index {index!r} of table {table!r}" if index else f"table {table!r}"
    request: dict[str, str] = {"TableName": table, **({"IndexName": index} if index else {})}
    resource = f"table {table}" + (f" (index {index})" if index else "")
    try:
        response = checked_call(
            PERMISSION_CONTRIBUTOR_INSIGHTS,
            resource,
            lambda: dynamodb.describe_contributor_insights(**request),
        )
    except Unavailable as failure:
        return unavailable_check(name, failure)
    status = str(response.get("ContributorInsightsStatus", "UNKNOWN"))
    mode = response.get("ContributorInsightsMode")
    shown_mode = f"mode {mode}" if mode else "mode not reported"
    if status == "ENABLED":
        return PreflightCheck(name, True, f"ENABLED for the {what} ({shown_mode})")
    exception = response.get("FailureException") or {}
    because = (
        f": {exception.get('ExceptionName')}: {exception.get('ExceptionDescription')}"
        if exception
        else ""
    )
    enable = aws_command(
        region,
        "dynamodb",
        "update-contributor-insights",
        "--table-name",
        table,
        *(("--index-name", index) if index else ()),
        "--contributor-insights-action",
        "ENABLE",
        "--contributor-insights-mode",
        "THROTTLED_KEYS",
    )
    if status == "ENABLING":
        fix = f"it is being turned on: run preflight again in a few minutes (or: {enable})"
    else:
        fix = f"import mode (importExistingTable) cannot set it; enable it: {enable}"
    return PreflightCheck(
        name, False, f"Contributor Insights for the {what} is {status}{because}", fix
    )
