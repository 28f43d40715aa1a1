"""After an open-index run: the table compared with the open index and judged, the same check
that `open-index set open` (forward) and `set off` (rollback) make before they move
(checks.OpenIndexReader: a consistent Scan of the saga rows, the open index's every key, and
a re-read of each difference so that GSI lag alone fails nothing); and the release of a run's
lease by its kind (release_run)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from saga_index.layout_change.backfill.inputs import BackfillRequest
from saga_index.layout_change.backfill.keeper import release_with_completion
from saga_index.layout_change.backfill.readback import summarise_verified
from saga_index.layout_change.backfill.summary import BackfillSummary, VerificationResult
from saga_index.layout_change.backfill.wire import MAX_ANOMALY_KEYS, RunTicket, SegmentResult
from saga_index.layout_change.checks import OpenIndexReader
from saga_index.layout_change.lease import release_lease
from saga_index.layout_change.record import (
    BackfillCompletion,
    BackfillDirection,
    BackfillKind,
    ControlStore,
    WallClock,
    utc_now,
)
from saga_index.store.dynamo import ScanOptions

# How long the check waits before it re-reads a difference (the open index's GSI lag).
DEFAULT_OPEN_RECHECK_SECONDS = 2.0


@dataclass(frozen=True)
class OpenVerify:
    """How the verification reads: its wait before a difference is re-read (GSI lag) and the
    read units per second its consistent base-table Scan may use."""

    recheck_delay_seconds: float = DEFAULT_OPEN_RECHECK_SECONDS
    read_units_per_second: float = ScanOptions.read_units_per_second


DEFAULT_OPEN_VERIFY = OpenVerify()


def verify_open_index(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    ticket: RunTicket,
    *,
    options: OpenVerify = DEFAULT_OPEN_VERIFY,
    sleep: Callable[[float], None] = time.sleep,
) -> VerificationResult:
    """Forward: every open saga is in the open index under its key and no closed one is;
    rollback: no row carries OpenSagaPK and the index is empty. A dry run only reports (what
    differs, without the wait and re-read that keep GSI lag from failing a verdict it has not)."""
    index = ticket.open_index()
    forward = ticket.direction is BackfillDirection.FORWARD
    reader = OpenIndexReader(
        client,
        table_name,
        ScanOptions(
            segments=request.total_segments,
            read_units_per_second=options.read_units_per_second,
        ),
        recheck_delay_seconds=0 if request.dry_run else options.recheck_delay_seconds,
        sleep=sleep,
    )
    report = reader.check(index, stamps_expected=forward)
    wrong = len(report.differences)
    ok = request.dry_run or report.ok
    want = (
        f"every open saga in the open index {index.shard_count} key(s) and no closed one"
        if forward
        else "no row carrying OpenSagaPK and the open index empty"
    )
    if report.ok:
        message = f"{want}: {report.rows} saga row(s), {report.open_rows} open, all as wanted"
    else:
        message = (
            f"{wrong} of {report.rows} saga row(s) differ from {want} (e.g. {report.examples()})"
            + (
                ": dry run, nothing was written"
                if request.dry_run
                else ": a writer changed them during the run (counted as skipped) or a writer "
                "not yet following the record wrote them; run the backfill again: it converges"
            )
        )
    return VerificationResult(
        direction=ticket.direction,
        dry_run=request.dry_run,
        partitions=list(index.partitions()),
        remaining=wrong,
        remaining_anomalies=0,
        remaining_other_entities=0,
        unexpected=wrong,
        unexpected_keys=[{"PK": d.pk, "reason": d.reason} for d in report.differences][
            :MAX_ANOMALY_KEYS
        ],
        ok=ok,
        message=message,
    )


def finish_open_index(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    results: Sequence[SegmentResult],
    ticket: RunTicket,
    *,
    throttles: int | None = None,
    applied_caps: Sequence[float] | None = None,
    options: OpenVerify = DEFAULT_OPEN_VERIFY,
    sleep: Callable[[float], None] = time.sleep,
) -> BackfillSummary:
    """The open-index run's summary, verified (as readback.finish_backfill for a layout run:
    a segment that did not finish fails the verification whatever the table shows)."""
    verification = verify_open_index(
        client, table_name, request, ticket, options=options, sleep=sleep
    )
    return summarise_verified(
        request,
        results,
        verification,
        throttles=throttles,
        move=ticket.move(),
        applied_caps=applied_caps,
    )


def release_run(
    store: ControlStore,
    ticket: RunTicket,
    summary: BackfillSummary,
    *,
    clock: WallClock = utc_now,
) -> BackfillCompletion | None:
    """Free the run's lease: a layout run records its completion (release_with_completion); an
    open-index run records none (no layout move checks it: `open-index set` checks the table
    itself), so the last layout run's completion stays what `phase set` reads."""
    if ticket.kind is BackfillKind.OPEN_INDEX:
        if ticket.lease_token is None:
            raise ValueError("a run without a lease (a dry run) has no lease to release")
        release_lease(store, token=ticket.lease_token, clock=clock)
        return None
    return release_with_completion(store, ticket, summary, clock=clock)
