"""The segment worker: one parallel-Scan segment, row by row (layout_change.backfill.row), from
its cursor until it is done or must stop.

Why this is safe to run beside live writers, to kill, and to run again:
- the only attribute written is GSI4PK, so no other attribute can be lost to a stale read;
- the condition makes every write a compare-and-set on what was read, so a concurrent writer
  always wins, and a re-run writes nothing that is already done (only rows still on the source
  key are written);
- a segment's cursor only moves past rows that are handled: a page's LastEvaluatedKey once the
  whole page is handled, or the key of the last handled row when the worker stops mid-page
  (a Scan resumes right after any key of its segment, exactly as after a Limit), so a killed
  run can leave work undone but never skips a row;
- writes are paced by a token bucket at the rate the run's pacer chooses from DynamoDB's
  ThrottlingReasons (layout_change.backfill.pacer); botocore still does the retrying. The
  control record's runtime throttle and pause reach the bucket through the run's lease keeper
  (keeper): a paused bucket hands out no token, so the worker waits, writing nothing, until it
  is resumed, stopped or (in Lambda) out of time; it then returns its cursor, not done. Any
  wait for a token ends at the safety margin too (at a low cap throttled to its floor one
  token can take longer);
- a leased run writes through its lease fence (layout_change.backfill.fence): a worker that
  lost its lease (taken over, released, a transition since) stops before its next row.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from saga_index.index import InvalidInputError
from saga_index.layout_change.backfill.fence import LeaseFence
from saga_index.layout_change.backfill.inputs import SegmentRequest
from saga_index.layout_change.backfill.open_row import OpenRowStamper
from saga_index.layout_change.backfill.pacing import (
    SegmentThrottledError,
    TokenBucket,
    throttle_count,
)
from saga_index.layout_change.backfill.row import RowRestamper
from saga_index.layout_change.backfill.throttle_reasons import reasons_of
from saga_index.layout_change.backfill.wire import Cursor, SegmentCounts, SegmentResult, cursor_of
from saga_index.layout_change.record import BackfillKind
from saga_index.store.dynamo import ThrottleCounter, error_code, is_throttle, request_expressions

log = logging.getLogger(__name__)

# Stop this long before the Lambda deadline: one write, with botocore's backoff between its
# attempts, must fit in it (the worker's client is configured with few attempts for this).
DEFAULT_SAFETY_MARGIN_SECONDS = 60.0


class _SegmentWorker:
    def __init__(
        self,
        client: Any,
        table_name: str,
        request: SegmentRequest,
        *,
        throttles: ThrottleCounter | None,
        remaining_seconds: Callable[[], float] | None,
        safety_margin_seconds: float,
        stop: threading.Event | None,
        on_progress: Callable[[SegmentResult], None] | None,
        page_size: int | None,
        bucket: TokenBucket | None,
        fence: LeaseFence | None,
    ) -> None:
        self.client = client
        self.table_name = table_name
        self.request = request
        self.throttles = throttles
        self.remaining_seconds = remaining_seconds
        self.safety_margin_seconds = safety_margin_seconds
        self.stop = stop
        self.on_progress = on_progress
        self.page_size = page_size
        self.bucket = bucket or TokenBucket(
            request.max_writes_per_second, sleep=stop.wait if stop is not None else time.sleep
        )
        self.move = request.move
        self.result = SegmentResult(segment=request.segment)
        # The change the run makes to a row: the layout's re-stamp, or the open index's.
        rows = OpenRowStamper if request.run.kind is BackfillKind.OPEN_INDEX else RowRestamper
        self.rows = rows(
            client,
            table_name,
            request,
            self.result,
            throttles=throttles,
            bucket=self.bucket,
            fence=fence,
        )
        self._throttles_at_start = throttle_count(throttles)
        # Until this invocation has handled one row or one page, the deadline is not honoured:
        # every invocation moves the cursor forward, so the state machine's loop terminates.
        self._progressed = False

    # ---- stopping ----

    def _stop_requested(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def _out_of_time(self) -> bool:
        if self.remaining_seconds is None or not self._progressed:
            return False
        return self.remaining_seconds() < self.safety_margin_seconds

    def _must_stop(self) -> bool:
        return self._stop_requested() or self._out_of_time()

    def _token_budget(self) -> float:
        """How long the worker may still wait for a write token: until the safety margin, even
        before any progress (a wait at the throttle floor or a pause can outlast the margin; the
        invocation then returns its cursor, not done, and the next one waits on)."""
        if self.remaining_seconds is None:
            return math.inf
        return self.remaining_seconds() - self.safety_margin_seconds

    def _take_token(self) -> bool:
        return self.bucket.acquire(
            self._stop_requested, budget=self._token_budget, segment=self.request.segment
        )

    # ---- the loop ----

    def run(self) -> SegmentResult:
        cursor = self.request.cursor
        while True:
            if self._must_stop():
                return self._finish(cursor, interrupted=self._stop_requested())
            page = self._scan(cursor)
            items = page.get("Items", [])
            for position, raw in enumerate(items):
                if position and self._must_stop():
                    # Every row before this one is handled: resume right after the last.
                    return self._finish(
                        cursor_of(items[position - 1]), interrupted=self._stop_requested()
                    )
                if not self.rows.handle(raw, self._take_token):
                    # Stopped while waiting for a write token.
                    resume = cursor_of(items[position - 1]) if position else cursor
                    return self._finish(resume, interrupted=self._stop_requested())
                self.result.scanned += 1
                self._progressed = True
                self._report()
            self._progressed = True
            cursor = page.get("LastEvaluatedKey")
            if not cursor:
                return self._finish(None, interrupted=False, done=True)

    def _finish(
        self, cursor: Cursor | None, *, interrupted: bool, done: bool = False
    ) -> SegmentResult:
        self.result.cursor = cursor
        self.result.done = done
        self.result.interrupted = interrupted
        self.result.throttles = throttle_count(self.throttles) - self._throttles_at_start
        self._report()
        log.info(
            "backfill segment %d %s: %d scanned, %d re-stamped, %d skipped, %d anomalies, "
            "%d would re-stamp",
            self.request.segment,
            "interrupted" if interrupted else ("done" if done else "returning its cursor"),
            self.result.scanned,
            self.result.restamped,
            self.result.skipped,
            self.result.anomalies,
            self.result.would_restamp,
            extra={
                "segment": self.request.segment,
                "direction": self.move.direction.value,
                "source": str(self.move.source),
                "target": str(self.move.target),
                "dryRun": self.request.dry_run,
                "done": done,
                "interrupted": interrupted,
                "counts": self.result.to_json(),
            },
        )
        return self.result

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.result)

    def _scan(self, cursor: Cursor | None) -> dict[str, Any]:
        scan: dict[str, Any] = {
            "TableName": self.table_name,
            "Segment": self.request.segment,
            "TotalSegments": self.request.total_segments,
            # Only what the decision needs: a row's other attributes are never read, so they
            # can never be written back stale.
            **request_expressions(projection=self.rows.projection),
            # Said explicitly: the worker's role may Scan only with dynamodb:Select =
            # SPECIFIC_ATTRIBUTES (infra/backfill.py), and IAM evaluates the request's value.
            "Select": "SPECIFIC_ATTRIBUTES",
            # No FilterExpression: it would save no capacity (a Scan is charged for every item
            # it reads, before filtering), and rows it hid could be neither counted nor stepped
            # past by a worker that stops mid-page. Saga rows on the source key are picked
            # out by RowRestamper.handle.
            # Strongly consistent: a row written on the source key by a writer still on the
            # previous state just before the Scan passed it is seen. The cost lands on the base
            # table, spread over its partitions, not on the hot index partition.
            "ConsistentRead": True,
        }
        if cursor:
            scan["ExclusiveStartKey"] = cursor
        if self.page_size is not None:
            scan["Limit"] = self.page_size
        try:
            response: dict[str, Any] = self.client.scan(**scan)
        except ClientError as err:
            if is_throttle(err):
                self.bucket.on_throttle(reasons_of(err.response), segment=self.request.segment)
                raise SegmentThrottledError(
                    f"segment {self.request.segment}: Scan still throttled after retries "
                    f"({error_code(err)}); the segment stopped, nothing was lost"
                ) from err
            raise
        return response


def run_segment(
    client: Any,
    table_name: str,
    request: SegmentRequest,
    *,
    throttles: ThrottleCounter | None = None,
    remaining_seconds: Callable[[], float] | None = None,
    safety_margin_seconds: float = DEFAULT_SAFETY_MARGIN_SECONDS,
    stop: threading.Event | None = None,
    on_progress: Callable[[SegmentResult], None] | None = None,
    page_size: int | None = None,
    bucket: TokenBucket | None = None,
    fence: LeaseFence | None = None,
) -> SegmentResult:
    """Re-stamp one parallel-Scan segment from request.cursor until it is done or must stop.

    remaining_seconds: the Lambda's remaining time (None locally: no deadline); the worker
    returns its cursor once less than safety_margin_seconds remain. stop: set to stop after the
    in-flight write (Ctrl-C, SIGTERM, a lost lease). bucket: the pace (and pause) to follow.
    throttles: the counter attached to `client` (attach_throttle_observer); its increments slow
    the bucket. fence: the run's lease fence (fence.py; None for an unleased run): every
    re-stamp goes through it, and a refused one stops the segment. Returns this invocation's
    counts
    plus request.totals, the cursor, and `done` once the segment's Scan reached its end.
    """
    if page_size is not None and page_size < 1:
        raise InvalidInputError(f"page_size must be >= 1, got {page_size}")
    worker = _SegmentWorker(
        client,
        table_name,
        request,
        throttles=throttles,
        remaining_seconds=remaining_seconds,
        safety_margin_seconds=safety_margin_seconds,
        stop=stop,
        on_progress=on_progress,
        page_size=page_size,
        bucket=bucket,
        fence=fence,
    )
    own = worker.run()
    own.invocation = SegmentCounts.model_validate(own.model_dump())
    if request.totals is None:
        return own
    combined = SegmentResult(
        segment=own.segment,
        cursor=own.cursor,
        done=own.done,
        interrupted=own.interrupted,
        invocation=own.invocation,
    )
    limits = {"key_limit": request.anomaly_key_limit, "example_limit": request.open_example_limit}
    combined.add(request.totals, **limits)
    combined.add(own, **limits)
    return combined
