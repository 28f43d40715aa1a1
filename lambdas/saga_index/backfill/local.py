"""The backfill run in this process: every segment on a local thread, then the read-back.

The CLI without --state-machine-arn and the demo call backfill_locally; run_backfill is its
threaded runner (benchmarks and tests drive it directly).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict

from saga_index.backfill.messages import (
    MAX_CONCURRENT_SEGMENTS,
    BackfillRequest,
    BackfillSummary,
    SegmentCounts,
    SegmentResult,
    summarise,
)
from saga_index.backfill.pacing import TokenBucket, throttle_count
from saga_index.backfill.readback import finish_backfill
from saga_index.backfill.restamp import run_segment
from saga_index.dynamo.client import ThrottleCounter, attach_throttle_observer
from saga_index.errors import SagaIndexError
from saga_index.model import Phase
from saga_index.names import INDEX_NAME

log = logging.getLogger(__name__)


class LocalRun(BaseModel):
    """The outcome of run_backfill: per-segment results, and why it ended early if it did."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    results: list[SegmentResult]
    failures: dict[int, str]
    interrupted: bool
    throttles: int  # seen by the shared client during the run

    @property
    def complete(self) -> bool:
        return not self.failures and not self.interrupted


def run_backfill(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    *,
    shard_count: int,
    throttles: ThrottleCounter | None = None,
    stop: threading.Event | None = None,
    on_progress: Callable[[SegmentResult], None] | None = None,
    page_size: int | None = None,
    max_concurrency: int = MAX_CONCURRENT_SEGMENTS,
) -> LocalRun:
    """Run every segment in this process, one thread per segment, with no deadline.

    The threads share ONE token bucket at the total cap: the cap then holds exactly however
    unevenly the rows fall into segments (with a bucket per segment, as in Lambda, a segment
    that finishes early leaves its share unused), and a throttle slows the whole run, which is
    right, since every segment writes to the same hot partition. The first failing segment
    stops the others after their in-flight write (a throttle storm or a permission error hits
    them all alike); `stop` does the same from outside.
    """
    stop = stop or threading.Event()
    segments = request.segment_requests(shard_count, max_concurrency)
    bucket = TokenBucket(request.max_writes_per_second, sleep=stop.wait)
    results: dict[int, SegmentResult] = {}
    failures: dict[int, str] = {}
    # The live counts of every segment: a segment that fails still reports what it did.
    latest: dict[int, SegmentResult] = {}

    def track(result: SegmentResult) -> None:
        latest[result.segment] = result
        if on_progress is not None:
            on_progress(result)

    throttles_before = throttle_count(throttles)
    workers = min(len(segments), max_concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="backfill") as pool:
        futures: dict[Future[SegmentResult], int] = {
            pool.submit(
                run_segment,
                client,
                table_name,
                segment,
                throttles=throttles,
                stop=stop,
                on_progress=track,
                page_size=page_size,
                bucket=bucket,
            ): segment.segment
            for segment in segments
        }
        try:
            for future, number in futures.items():
                try:
                    results[number] = future.result()
                except (SagaIndexError, ClientError, BotoCoreError) as err:
                    failures[number] = f"{type(err).__name__}: {err}"
                    log.error("backfill segment %d failed: %s", number, failures[number])
                    stop.set()
                    if number in latest:
                        results[number] = latest[number]
        except BaseException:
            # A bug or KeyboardInterrupt: let the other threads finish their write and stop.
            stop.set()
            raise
    return LocalRun(
        results=[results[n] for n in sorted(results)],
        failures=failures,
        interrupted=any(r.interrupted for r in results.values()),
        throttles=throttle_count(throttles) - throttles_before,
    )


@dataclass(frozen=True)
class LocalBackfill:
    """A local run and its summary (read back and verified only when the run completed)."""

    run: LocalRun
    summary: BackfillSummary
    seconds: float  # wall time of the segments' run, without the read-back


def _running_totals(on_totals: Callable[[SegmentCounts], None]) -> Callable[[SegmentResult], None]:
    """Turn per-segment live results into the run's totals, one report at a time."""
    lock = threading.Lock()
    latest: dict[int, SegmentResult] = {}

    def track(result: SegmentResult) -> None:
        with lock:
            latest[result.segment] = result
            totals = SegmentCounts()
            for counts in latest.values():
                totals.add(counts, key_limit=0)
            # Under the lock: the totals reach the display in the order they grew.
            on_totals(totals)

    return track


def backfill_locally(
    client: Any,
    table_name: str,
    request: BackfillRequest,
    *,
    phase: Phase | str,
    shard_count: int,
    index_name: str = INDEX_NAME,
    stop: threading.Event | None = None,
    on_progress: Callable[[SegmentCounts], None] | None = None,
    while_running: AbstractContextManager[object] | None = None,
    page_size: int | None = None,
) -> LocalBackfill:
    """Refuse a run the writers would undo, run every segment here, then judge what it did.

    A complete run is read back (finish_backfill verifies what is left on the source key); an
    incomplete one (a segment failed, or `stop` was set) is only summarised, with complete
    false. on_progress receives the run's live totals over all segments (without anomaly keys).
    while_running is entered around the segments' run only, not around the read-back: a
    progress display, or signal handlers that set `stop`. Throttles are counted by the
    client's observer (attach_throttle_observer) and slow the run.
    """
    request.direction.check_phase(phase)
    throttles = attach_throttle_observer(client)
    started = time.monotonic()
    with while_running if while_running is not None else contextlib.nullcontext():
        run = run_backfill(
            client,
            table_name,
            request,
            shard_count=shard_count,
            throttles=throttles,
            stop=stop,
            on_progress=_running_totals(on_progress) if on_progress is not None else None,
            page_size=page_size,
        )
    seconds = time.monotonic() - started
    if run.complete:
        summary = finish_backfill(
            client,
            table_name,
            request,
            run.results,
            index_name=index_name,
            shard_count=shard_count,
            throttles=run.throttles,
        )
    else:
        summary = summarise(request, run.results, complete=False, throttles=run.throttles)
    return LocalBackfill(run=run, summary=summary, seconds=seconds)
