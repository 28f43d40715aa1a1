"""The parts of `saga-index status`'s report, as JSON documents: the backfill's lease, throttle,
pause and last run from the record; the row counts, the drift checks and the alarms read from
AWS. A part that cannot be read says so instead of failing the command."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import DEFAULT_SHARD_COUNT, INDEX_NAME, SagaIndexError, keys
from saga_index.layout_change.checks.drift import DriftChecker
from saga_index.layout_change.record import (
    BackfillCompletion,
    BackfillDirection,
    ControlState,
    Lease,
    Phase,
    RecordCondition,
    format_time,
)
from saga_index.layout_change.transitions import backfill_verified
from saga_index.store import count_partition
from saga_index_cli.context import CliContext, record_shard_count
from saga_index_cli.phase.documents import layout_document

log = logging.getLogger("saga_index.cli")

# DescribeAlarms is one call per 100 alarms; a shell without AWS access must not hang on it.
_CLOUDWATCH_CONFIG = Config(
    connect_timeout=3, read_timeout=5, retries={"total_max_attempts": 2, "mode": "standard"}
)
_COUNT_WORKERS = 16


def lease_document(lease: Lease | None, now: datetime) -> dict[str, Any] | None:
    if lease is None:
        return None
    return {
        "holder": lease.holder,
        "direction": lease.direction.value,
        # What the run holding it changes: `layout` (GSI4PK) or `open-index` (OpenSagaPK).
        "kind": lease.kind.value,
        "acquiredAt": format_time(lease.acquired_at),
        "heartbeatAt": format_time(lease.heartbeat_at),
        "expiresAt": format_time(lease.expires_at),
        "live": lease.is_live(now),
        "stateVersion": lease.state_version,
        "pace": lease.pace,
    }


def completion_document(run: BackfillCompletion | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "direction": run.direction.value,
        "source": layout_document(run.source),
        "target": layout_document(run.target),
        "stateVersion": run.state_version,
        "startedAt": format_time(run.started_at),
        "completedAt": format_time(run.completed_at),
        "scanned": run.scanned,
        "restamped": run.restamped,
        "anomalies": run.anomalies,
        "complete": run.complete,
        "verified": run.verified,
        "holder": run.holder,
    }


# The move that completes each moving phase, and the backfill direction it needs.
_COMPLETING: Mapping[Phase, tuple[Phase, BackfillDirection]] = {
    Phase.MIGRATING: (Phase.SHARDED, BackfillDirection.FORWARD),
    Phase.ROLLING_BACK: (Phase.LEGACY, BackfillDirection.ROLLBACK),
    Phase.RESHARDING: (Phase.SHARDED, BackfillDirection.FORWARD),
}


def backfill_document(state: ControlState, now: datetime) -> dict[str, Any]:
    """Lease, throttle, pause, last run, and whether that run satisfies the next completing
    move's backfill-verified check (the other checks run only in `phase set`)."""
    next_move = None
    if state.phase in _COMPLETING and state.condition is RecordCondition.PRESENT:
        to_phase, direction = _COMPLETING[state.phase]
        next_move = {
            "to": to_phase.value,
            "backfillCheck": backfill_verified(state, direction).to_json(),
        }
    return {
        "lease": lease_document(state.lease, now),
        "maxWritesPerSecond": state.backfill_max_writes_per_second,
        "paused": state.backfill_paused,
        "lastRun": completion_document(state.last_backfill),
        "nextMove": next_move,
    }


def row_counts(cli: CliContext, state: ControlState) -> dict[str, Any]:
    """Rows on the legacy key and on each shard key of the record's N (16 when it names none,
    as the drift guard watches; while resharding the larger of its two, so a merge's rows
    still on the upper keys are counted): one COUNT Query per key, read to its last page."""
    table = cli.require_table()
    shard_count = max(
        state.layout.shard_count or 0, record_shard_count(state) or DEFAULT_SHARD_COUNT
    )
    shard_keys = keys.all_shard_gsi4pks(shard_count)

    def count(gsi4pk: str) -> int:
        return count_partition(cli.client, table, gsi4pk, index_name=INDEX_NAME)[0]

    try:
        with ThreadPoolExecutor(max_workers=_COUNT_WORKERS) as pool:
            legacy = pool.submit(count, keys.LEGACY_GSI4PK)
            per_shard = list(pool.map(count, shard_keys))
            legacy_rows = legacy.result()
    except (ClientError, BotoCoreError) as err:
        log.warning("could not count the rows: %s", err)
        return {"counted": False, "error": f"{type(err).__name__}: {err}"}
    return {
        "counted": True,
        "legacy": legacy_rows,
        "sharded": sum(per_shard),
        "shardCount": shard_count,
        "perShard": {str(n): rows for n, rows in enumerate(per_shard)},
        # The keys the rows sit on: during a re-shard 16 -> 32 they fill 16 of the 32 counted.
        "shardKeysWithRows": sum(1 for rows in per_shard if rows),
    }


_DRIFT_SUMMARY = (
    "healthy",
    "findings",
    "controlRecordMissing",
    "legacyRows",
    "shardedRows",
    "unexpectedLegacyRows",
    "unexpectedShardedRows",
    "misroutedRows",
    "anomalousRows",
    "shardSkew",
)


def drift_summary(cli: CliContext, state: ControlState) -> dict[str, Any]:
    """The drift guard's every-run checks against the record's state (no base-table scan:
    `saga-index drift` adds it)."""
    try:
        report = DriftChecker(cli.client, cli.require_table(), state=state).check(
            scan_unindexed=False
        )
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        log.warning("could not run the drift checks: %s", err)
        return {"checked": False, "error": f"{type(err).__name__}: {err}"}
    full = report.to_dict()
    return {"checked": True, **{key: full[key] for key in _DRIFT_SUMMARY}}


def alarm_states(cli: CliContext, prefix: str, endpoint_url: str | None) -> dict[str, Any]:
    """The deployed alarms whose names start with `prefix` (CloudWatch DescribeAlarms). Never
    fails the command: no credentials, no network or a local table is reported, not raised."""
    out: dict[str, Any] = {"checked": False, "prefix": prefix}
    if cli.endpoint_url and not endpoint_url:
        out["error"] = (
            "skipped: DynamoDB has its own endpoint (--endpoint-url, a local server?) and "
            "CloudWatch none (--cloudwatch-endpoint-url or $AWS_ENDPOINT_URL_CLOUDWATCH)"
        )
        return out
    try:
        cloudwatch = cli.aws_client(
            "cloudwatch", endpoint_url=endpoint_url, config=_CLOUDWATCH_CONFIG
        )
        alarms: list[dict[str, Any]] = []
        for page in cloudwatch.get_paginator("describe_alarms").paginate(
            AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
        ):
            for alarm in [*page.get("MetricAlarms", []), *page.get("CompositeAlarms", [])]:
                updated = alarm.get("StateUpdatedTimestamp")
                alarms.append(
                    {
                        "name": alarm["AlarmName"],
                        "state": alarm.get("StateValue"),
                        "reason": alarm.get("StateReason"),
                        "updatedAt": format_time(updated) if updated else None,
                        "actionsEnabled": alarm.get("ActionsEnabled"),
                    }
                )
    except (ClientError, BotoCoreError) as err:
        log.warning("could not read the alarms: %s", err)
        out["error"] = f"{type(err).__name__}: {err}"
        return out
    alarms.sort(key=lambda a: (a["state"] != "ALARM", a["name"]))
    return {
        **out,
        "checked": True,
        "inAlarm": sum(1 for a in alarms if a["state"] == "ALARM"),
        "alarms": alarms,
    }
