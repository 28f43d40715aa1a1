"""After a run: what is still on the source keys, read back through the index and judged."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from saga_index.index import keys
from saga_index.layout_change.backfill.inputs import BackfillRequest
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.row import ROW_DECISION_ATTRIBUTES
from saga_index.layout_change.backfill.summary import BackfillSummary, VerificationResult, summarise
from saga_index.layout_change.backfill.wire import (
    MAX_ANOMALY_KEYS,
    TABLE_KEY_ATTRIBUTES,
    SegmentResult,
    TableKey,
    plain_key,
)
from saga_index.store import count_partition
from saga_index.store.dynamo import (
    attribute_list,
    deserialize,
    on_index_partition,
    query_pages,
    request_expressions,
)

# What the base table confirms of a row the index still shows on a source key.
_CONFIRMED = attribute_list({"#gsi4pk": "GSI4PK", "#personId": "personId"})


def _source_pages(
    client: Any, table_name: str, index_name: str, partition: str
) -> Iterator[list[dict[str, Any]]]:
    """The rows under one index partition, page by page (to the end), only the judged
    attributes. One page is held at a time: the caller keeps counts, never the rows."""
    request: dict[str, Any] = {
        "TableName": table_name,
        "IndexName": index_name,
        **request_expressions(
            key_condition=on_index_partition(partition), projection=ROW_DECISION_ATTRIBUTES
        ),
    }
    for page in query_pages(client, request):
        yield page.get("Items", [])


def _still_to_move(client: Any, table_name: str, move: Move, raw: Mapping[str, Any]) -> bool:
    """Does the base table (strongly consistent) confirm a row the index shows on a source key
    is still there to move? A deleted row is not."""
    current = client.get_item(
        TableName=table_name,
        Key={name: raw[name] for name in TABLE_KEY_ATTRIBUTES},
        ConsistentRead=True,
        **request_expressions(projection=_CONFIRMED),
    ).get("Item")
    if current is None:
        return False  # deleted since: nothing left behind
    gsi4pk = current.get("GSI4PK", {}).get("S")
    if not move.target_needs_person:
        return move.is_on_source(gsi4pk)
    person = current.get("personId", {}).get("S")
    return bool(person) and move.must_move(gsi4pk, person)


def _left_on_target_key(move: Move, item: Mapping[str, Any]) -> bool:
    """Does a row the index shows on a key of the target (not of the source) count as left
    behind: not a saga, an anomaly, or a saga misrouted onto another person's key?"""
    if item.get("entityType") != keys.ENTITY_TYPE:
        return True
    return move.target_key_of(item) is None or move.must_move_row(item)


def count_source_rows(client: Any, table_name: str, *, index_name: str, move: Move) -> int:
    """Rows still on the source keys (through the index, COUNT only): the progress bar's total."""
    return sum(
        count_partition(client, table_name, partition, index_name=index_name)[0]
        for partition in move.source_partitions()
    )


def _source_words(move: Move) -> str:
    return "legacy key" if not move.source.is_sharded else f"{move.source} keys"


def verify_source_drained(
    client: Any,
    table_name: str,
    *,
    index_name: str,
    move: Move,
    dry_run: bool = False,
) -> VerificationResult:
    """Read back what is still on the source keys after a run and judge it.

    Left on purpose: rows of other entity types, and (sharded target only: legacy needs no
    personId) saga rows with an unusable personId (the anomalies). Anything else still there
    fails the check, after a strongly consistent
    GetItem confirms it: index reads are eventually consistent, so a row the run moved a moment
    ago may still show under its old key; only the base table can say it has not moved. A dry
    run moves nothing, so it only reports (ok is true).

    The index is read page by page and only counts are kept (plus at most MAX_ANOMALY_KEYS
    unexpected keys): memory does not grow with the table.
    """
    # The swept keys: the source's, and a sharded target's own (its misrouted rows).
    partitions = move.swept_partitions()
    remaining = anomalies = others = movable = unexpected_rows = 0
    unexpected: list[TableKey] = []  # a bounded sample; the count is exact
    source_keys = set(move.source_partitions())
    # A key of both layouts (a re-shard: shard 3 of 16 is shard 3 of 32) holds rows that are
    # where the target puts them: those are not left behind.
    target_keys = set(move.target.partitions()) if move.target.is_sharded else set()
    for partition in partitions:
        on_source = partition in source_keys
        on_target = partition in target_keys or not on_source
        for items in _source_pages(client, table_name, index_name, partition):
            for raw in items:
                item = deserialize(raw)
                if on_target and not _left_on_target_key(move, item):
                    continue  # a row on its own key of the target: where it belongs
                remaining += 1
                if item.get("entityType") != keys.ENTITY_TYPE:
                    others += 1
                elif move.target_key_of(item) is None:
                    anomalies += 1
                elif move.must_move_row(item):
                    movable += 1
                    if not dry_run and _still_to_move(client, table_name, move, raw):
                        unexpected_rows += 1
                        if len(unexpected) < MAX_ANOMALY_KEYS:
                            unexpected.append(plain_key(raw))
    ok = dry_run or not unexpected_rows
    source = _source_words(move)
    # A move to the legacy key moves every saga row; one to shards needs a usable personId.
    rows = "saga row(s) with a usable personId" if move.target_needs_person else "saga row(s)"
    if dry_run:
        message = (
            f"dry run: {movable} {rows} on the {source} would move to {move.target}; "
            f"{anomalies} anomaly row(s) would stay"
        )
    elif ok:
        message = (
            f"no {rows.replace('(s)', '')} is left to move on the {source} "
            f"({anomalies} anomaly row(s) left on purpose)"
        )
    else:
        message = (
            f"{unexpected_rows} {rows} are still on the {source} "
            f"after the {move.direction.value} backfill to {move.target} (first keys: "
            f"{unexpected[:5]}): a writer that had not yet seen the record's state re-stamped "
            "them, or they changed during the run (counted as skipped). Check `saga-index "
            "status`, then run the backfill again: it converges"
        )
    return VerificationResult(
        direction=move.direction,
        dry_run=dry_run,
        partitions=partitions,
        remaining=remaining,
        remaining_anomalies=anomalies,
        remaining_other_entities=others,
        unexpected=unexpected_rows,
        unexpected_keys=unexpected,
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
    move: Move,
    throttles: int | None = None,
    applied_caps: Sequence[float] | None = None,
) -> BackfillSummary:
    """Aggregate the segments' results and verify what is left on the source keys
    (throttles, applied_caps: as summary.summarise takes them).

    A run is complete when every segment says it is done; an incomplete run fails the
    verification whatever the index shows (rows past the missing cursors were never read).
    """
    verification = verify_source_drained(
        client, table_name, index_name=index_name, move=move, dry_run=request.dry_run
    )
    return summarise_verified(
        request, results, verification, throttles=throttles, move=move, applied_caps=applied_caps
    )


def summarise_verified(
    request: BackfillRequest,
    results: Sequence[SegmentResult],
    verification: VerificationResult,
    *,
    throttles: int | None,
    move: Move,
    applied_caps: Sequence[float] | None,
) -> BackfillSummary:
    """The summary of a run read back by `verification`: complete when every segment says it
    is done; a segment that did not finish fails the verification whatever the read-back
    showed (rows past its cursor were never read). Every kind of run ends here."""
    done = {r.segment for r in results if r.done and not r.interrupted}
    missing = sorted(set(range(request.total_segments)) - done)
    if missing:
        verification = verification.model_copy(
            update={
                "ok": False,
                "message": f"segment(s) {missing[:20]} did not finish; " + verification.message,
            }
        )
    return summarise(
        request,
        results,
        complete=not missing,
        verification=verification,
        throttles=throttles,
        move=move,
        applied_caps=applied_caps,
    )
