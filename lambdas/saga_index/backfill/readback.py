"""After a run: what is still on the source key, read back through the index and judged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from saga_index import keys
from saga_index.backfill.direction import Direction
from saga_index.backfill.messages import (
    MAX_ANOMALY_KEYS,
    TABLE_KEY_ATTRIBUTES,
    BackfillRequest,
    BackfillSummary,
    SegmentResult,
    TableKey,
    VerificationResult,
    plain_key,
    summarise,
)
from saga_index.dynamo.codec import deserialize
from saga_index.dynamo.pages import query_pages
from saga_index.repository import count_partition


def _source_rows(
    client: Any, table_name: str, index_name: str, partition: str
) -> list[dict[str, Any]]:
    """Every row under one index partition (paginated to the end), only the judged attributes."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": index_name,
        "KeyConditionExpression": "#gsi4pk = :pk",
        "ProjectionExpression": "#pk, #sk, #entityType, #personId, #gsi4pk, #gsi4sk",
        "ExpressionAttributeNames": {
            "#pk": "PK",
            "#sk": "SK",
            "#entityType": "entityType",
            "#personId": "personId",
            "#gsi4pk": "GSI4PK",
            "#gsi4sk": "GSI4SK",
        },
        "ExpressionAttributeValues": {":pk": {"S": partition}},
    }
    rows: list[dict[str, Any]] = []
    for page in query_pages(client, request):
        rows.extend(page.get("Items", []))
    return rows


def count_source_rows(
    client: Any, table_name: str, *, index_name: str, direction: Direction, shard_count: int
) -> int:
    """Rows still on the source key (through the index, COUNT only): the progress bar's total."""
    return sum(
        count_partition(client, table_name, partition, index_name=index_name)[0]
        for partition in direction.source_partitions(shard_count)
    )


def verify_source_drained(
    client: Any,
    table_name: str,
    *,
    index_name: str,
    direction: Direction,
    shard_count: int,
    dry_run: bool = False,
) -> VerificationResult:
    """Read back what is still on the source key after a run and judge it.

    Left on purpose: saga rows with an unusable personId (the anomalies) and rows of other
    entity types. Anything else still there fails the check, after a strongly consistent
    GetItem confirms it: index reads are eventually consistent, so a row the run moved a moment
    ago may still show under its old key; only the base table can say it has not moved. A dry
    run moves nothing, so it only reports (ok is true).
    """
    partitions = direction.source_partitions(shard_count)
    remaining = anomalies = others = 0
    candidates: list[dict[str, Any]] = []
    for partition in partitions:
        for raw in _source_rows(client, table_name, index_name, partition):
            remaining += 1
            if raw.get("entityType", {}).get("S") != keys.ENTITY_TYPE:
                others += 1
            elif keys.person_anomaly(deserialize(raw)) is not None:
                anomalies += 1
            else:
                candidates.append(raw)
    unexpected: list[TableKey] = []
    for raw in candidates if not dry_run else []:
        current = client.get_item(
            TableName=table_name,
            Key={name: raw[name] for name in TABLE_KEY_ATTRIBUTES},
            ConsistentRead=True,
            ProjectionExpression="#gsi4pk",
            ExpressionAttributeNames={"#gsi4pk": "GSI4PK"},
        ).get("Item")
        if current is not None and direction.is_source(current.get("GSI4PK", {}).get("S")):
            unexpected.append(plain_key(raw))
    ok = dry_run or not unexpected
    if dry_run:
        message = (
            f"dry run: {len(candidates)} row(s) with a usable personId on the "
            f"{direction.source_name} key would move; {anomalies} anomaly row(s) would stay"
        )
    elif ok:
        message = (
            f"no saga row with a usable personId is left on the {direction.source_name} key "
            f"({anomalies} anomaly row(s) left on purpose)"
        )
    else:
        message = (
            f"{len(unexpected)} saga row(s) with a usable personId are still on the "
            f"{direction.source_name} key after the {direction.value} backfill (first keys: "
            f"{unexpected[:5]}): a writer in the wrong phase re-stamped them, or they changed "
            "during the run (counted as skipped). Check the deployed phase, then run the "
            "backfill again: it converges"
        )
    return VerificationResult(
        direction=direction,
        dry_run=dry_run,
        partitions=partitions,
        remaining=remaining,
        remaining_anomalies=anomalies,
        remaining_other_entities=others,
        unexpected=len(unexpected),
        unexpected_keys=unexpected[:MAX_ANOMALY_KEYS],
        ok=ok,
        message=message,
    )


def finish_backfill(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    results: Sequence[SegmentResult],
    *,
    index_name: str,
    shard_count: int,
    throttles: int | None = None,
) -> BackfillSummary:
    """Aggregate the segments' results and verify what is left on the source key.

    A run is complete when every segment returned a null cursor; an incomplete run fails the
    verification whatever the index shows (rows past the missing cursors were never read).
    """
    done = {r.segment for r in results if r.cursor is None and not r.interrupted}
    missing = sorted(set(range(request.total_segments)) - done)
    verification = verify_source_drained(
        client,
        table_name,
        index_name=index_name,
        direction=request.direction,
        shard_count=shard_count,
        dry_run=request.dry_run,
    )
    if missing:
        verification = verification.model_copy(
            update={
                "ok": False,
                "message": f"segment(s) {missing[:20]} did not finish; " + verification.message,
            }
        )
    return summarise(
        request, results, complete=not missing, verification=verification, throttles=throttles
    )
