"""The backfill: move every saga row's GSI4PK between the legacy key and its shard (ADR-0085).

What the backfill does to ONE row:

  read   PK, SK, entityType, personId, GSI4PK, GSI4SK from a strongly consistent parallel Scan
  keep   saga rows (entityType = "RenewalSaga") still on the SOURCE key of the direction
         (forward: the legacy key; rollback: a sharded key)
  leave  rows whose personId is unusable (keys.person_anomaly): an anomaly, reported by table
         key, never written (nothing guesses a shard for it)
  write  UpdateItem SET GSI4PK = target, and nothing else, IF the row still exists and GSI4PK,
         personId and GSI4SK are still what the Scan read
  count  restamped; or skipped when the condition failed (someone else moved, changed or deleted
         the row since the read: never an error, and a deleted row is never re-created)

Why this is safe to run beside live writers, to kill, and to run again:
- the only attribute written is GSI4PK, so no other attribute can be lost to a stale read;
- the condition makes every write a compare-and-set on what was read, so a concurrent writer
  always wins, and a re-run writes nothing that is already done (only rows still on the source
  key are written);
- a segment's cursor only moves past rows that are handled: a page's LastEvaluatedKey once the
  whole page is handled, or the key of the last handled row when the worker stops mid-page
  (a Scan resumes right after any key of its segment, exactly as after a Limit), so a killed
  run can leave work undone but never skips a row;
- writes are paced by a token bucket: re-stamping a row deletes it from the hot legacy index
  partition (a GSI key change is a delete plus a put), so an uncapped backfill would cause the
  very throttling it exists to end. Throttles halve the pace for a while (AIMD); botocore
  still does the retrying.

Nothing here reads os.environ; the DynamoDB client is injected. The Lambda handlers
(handlers/backfill_*.py) and the CLI (saga_index/cli/backfill.py) are thin shells around
run_segment, plan_segments, verify_source_drained and run_backfill.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum
from typing import Annotated, Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from saga_index import keys
from saga_index.dynamo import ThrottleCounter, deserialize, error_code, is_throttle
from saga_index.errors import InvalidInputError, SagaIndexError
from saga_index.model import Phase
from saga_index.repository import count_partition
from saga_index.shard import validate_shard_count

log = logging.getLogger(__name__)

# DynamoDB's parallel Scan accepts far more segments; 1,000 is where more parallelism stops
# meaning anything here (the write cap, not the scan, bounds the run) and where one inline Step
# Functions Map can still carry every segment's result in its 256 KB state.
MAX_TOTAL_SEGMENTS = 1000
# One partition serves at most 1,000 WCU/s and every re-stamp writes to the hot legacy
# partition: a cap above that could never be honoured, only throttled.
MAX_WRITES_PER_SECOND = 1000.0
DEFAULT_TOTAL_SEGMENTS = 4
DEFAULT_MAX_WRITES_PER_SECOND = 50.0
# At most this many segments run at once (the Map's MaxConcurrency and the local thread pool):
# each segment's share of the cap is total / min(segments, this), so the sum stays under it.
MAX_CONCURRENT_SEGMENTS = 16
MAX_ANOMALY_KEYS = 100
# In the state machine the whole run carries at most this many anomaly keys across its
# segments, so the Map's output (one result per segment, ~150 bytes of counts plus ~85 bytes per
# key) stays below Step Functions' 256 KB state limit even at 1,000 segments. Past 400 segments
# no keys travel (each is still logged by the worker that found it, and counted).
ANOMALY_KEY_BUDGET = 400
# The table's key schema (infra/table.py): the cursor is a key of this shape.
TABLE_KEY_ATTRIBUTES = ("PK", "SK")
# Stop this long before the Lambda deadline: one write, with botocore's backoff between its
# attempts, must fit in it (the worker's client is configured with few attempts for this).
DEFAULT_SAFETY_MARGIN_SECONDS = 60.0

# ---- condition fragments of the re-stamp (combined with AND) ----------------------------
# UpdateItem creates a missing row; this turns a write to a deleted saga into a no-op instead.
ROW_STILL_EXISTS = "attribute_exists(#pk)"
# Nobody re-stamped the row since the Scan read it (writers in `migrating` do, and win).
STILL_ON_THE_KEY_READ = "#gsi4pk = :readGsi4pk"
# The target shard was computed from this personId; another person means another shard.
STILL_THE_PERSON_READ = "#personId = :readPersonId"
# The anomaly check also read GSI4SK (it must belong to personId); hold that too.
STILL_THE_SORT_KEY_READ = "#gsi4sk = :readGsi4sk"
SORT_KEY_STILL_ABSENT = "attribute_not_exists(#gsi4sk)"
# The only change a re-stamp makes.
SET_ONLY_GSI4PK = "SET #gsi4pk = :target"


class SegmentThrottledError(SagaIndexError):
    """DynamoDB kept throttling after botocore's retries: the segment stops where it is.

    Raised, not swallowed: the Step Functions task retries it with a long backoff (its name is
    part of the state machine's Retry), and the local runner stops and exits 1. Nothing is lost:
    the rows already re-stamped stay re-stamped and the next run's Scan skips them.
    """


class Direction(StrEnum):
    FORWARD = "forward"  # legacy -> shard(personId)
    ROLLBACK = "rollback"  # shard -> legacy

    def is_source(self, gsi4pk: object) -> bool:
        """Is a row with this GSI4PK still to be moved by this direction?"""
        if self is Direction.FORWARD:
            return gsi4pk == keys.LEGACY_GSI4PK
        return keys.is_sharded_gsi4pk(gsi4pk)

    def target(self, person_id: str, shard_count: int) -> str:
        if self is Direction.FORWARD:
            return keys.shard_gsi4pk_for_person(person_id, shard_count)
        return keys.LEGACY_GSI4PK

    def source_partitions(self, shard_count: int) -> list[str]:
        """The GSI4 partitions rows are moved away from."""
        if self is Direction.FORWARD:
            return [keys.LEGACY_GSI4PK]
        return keys.all_shard_gsi4pks(shard_count)

    @property
    def source_name(self) -> str:
        return "legacy" if self is Direction.FORWARD else "sharded"

    @property
    def allowed_phases(self) -> tuple[Phase, ...]:
        # Writers must already stamp the target key, or every transition would move a row
        # back to the source while the backfill moves it forward: the run would never converge.
        if self is Direction.FORWARD:
            return (Phase.MIGRATING, Phase.SHARDED)
        return (Phase.ROLLING_BACK, Phase.LEGACY)

    def check_phase(self, phase: Phase | str) -> None:
        current = Phase.parse(phase)
        if current not in self.allowed_phases:
            wanted = " or ".join(p.value for p in self.allowed_phases)
            raise InvalidInputError(
                f"a {self.value} backfill needs the writers in phase {wanted}, but the phase is "
                f"{current.value!r}: writers in {current.value!r} stamp the "
                f"{'legacy' if self is Direction.FORWARD else 'sharded'} key, so they would undo "
                f"the backfill. Deploy with `cdk deploy -c phase={self.allowed_phases[0].value}` "
                f"first (and pass --phase {self.allowed_phases[0].value} to the CLI)"
            )


# ---- the models (JSON in camelCase: the Step Functions and CLI contracts) ----------------


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


TableKey = dict[str, str]
Cursor = dict[str, dict[str, str]]


def _check_cursor(value: Cursor | None) -> Cursor | None:
    if value is None:
        return None
    shape = '{"PK": {"S": "..."}, "SK": {"S": "..."}}'
    if set(value) != set(TABLE_KEY_ATTRIBUTES):
        raise ValueError(
            f"cursor must be the segment's ExclusiveStartKey {shape} or null; "
            f"got attributes {sorted(value)}"
        )
    for name in TABLE_KEY_ATTRIBUTES:
        attribute = value[name]
        if set(attribute) != {"S"} or not isinstance(attribute["S"], str) or not attribute["S"]:
            raise ValueError(
                f"cursor.{name} must be a typed string value {{'S': '...'}} as in {shape}; "
                f"got {attribute!r}"
            )
    return value


class SegmentCounts(_Model):
    """What a segment did (cumulative when `totals` were handed in)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=False
    )

    scanned: int = Field(default=0, ge=0)
    restamped: int = Field(default=0, ge=0)
    skipped: int = Field(default=0, ge=0)
    anomalies: int = Field(default=0, ge=0)
    would_restamp: int = Field(default=0, ge=0)
    throttles: int = Field(default=0, ge=0)
    anomaly_keys: list[TableKey] = Field(default_factory=list)

    @property
    def handled(self) -> int:
        """Source-key rows dealt with, one way or another (drives the progress bar)."""
        return self.restamped + self.skipped + self.anomalies + self.would_restamp

    def add(self, other: SegmentCounts, *, key_limit: int = MAX_ANOMALY_KEYS) -> None:
        self.scanned += other.scanned
        self.restamped += other.restamped
        self.skipped += other.skipped
        self.anomalies += other.anomalies
        self.would_restamp += other.would_restamp
        self.throttles += other.throttles
        room = max(0, key_limit - len(self.anomaly_keys))
        self.anomaly_keys.extend(other.anomaly_keys[:room])


class SegmentRequest(_Model):
    """The worker's input: one invocation's share of one parallel-Scan segment."""

    direction: Direction
    segment: Annotated[int, Field(strict=True, ge=0)]
    total_segments: Annotated[int, Field(strict=True, ge=1, le=MAX_TOTAL_SEGMENTS)]
    cursor: Cursor | None = None
    max_writes_per_second: Annotated[float, Field(strict=True, gt=0, le=MAX_WRITES_PER_SECOND)]
    dry_run: Annotated[bool, Field(strict=True)]
    shard_count: Annotated[int, Field(strict=True)]
    # The segment's running totals from the previous invocations (the state machine's loop
    # hands the last result back in), so the final result is the whole segment's.
    totals: SegmentCounts | None = None
    anomaly_key_limit: Annotated[int, Field(strict=True, ge=0, le=MAX_ANOMALY_KEYS)] = (
        MAX_ANOMALY_KEYS
    )

    @field_validator("cursor")
    @classmethod
    def _cursor_shape(cls, value: Cursor | None) -> Cursor | None:
        return _check_cursor(value)

    @field_validator("shard_count")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        return validate_shard_count(value)

    @model_validator(mode="after")
    def _segment_in_range(self) -> SegmentRequest:
        if self.segment >= self.total_segments:
            raise ValueError(
                f"segment must be less than totalSegments ({self.total_segments}), "
                f"got {self.segment}"
            )
        return self


class SegmentResult(SegmentCounts):
    """The worker's output: counts, and the cursor to resume from (null: segment done)."""

    segment: int
    cursor: Cursor | None = None
    # Local runner only: the stop event ended the run; the cursor is where it stopped.
    interrupted: bool = Field(default=False, exclude=True)
    # This invocation's own counts, without the totals handed in (what its metrics publish).
    invocation: SegmentCounts | None = Field(default=None, exclude=True)


class BackfillRequest(_Model):
    """The state machine's input, and what the CLI builds from its options."""

    direction: Direction
    total_segments: Annotated[int, Field(strict=True, ge=1, le=MAX_TOTAL_SEGMENTS)] = (
        DEFAULT_TOTAL_SEGMENTS
    )
    # The TOTAL cap, over all segments.
    max_writes_per_second: Annotated[float, Field(strict=True, gt=0, le=MAX_WRITES_PER_SECOND)] = (
        DEFAULT_MAX_WRITES_PER_SECOND
    )
    # Required: whoever starts a run against the production table says whether it writes.
    dry_run: Annotated[bool, Field(strict=True)]

    def per_segment_writes_per_second(
        self, max_concurrency: int = MAX_CONCURRENT_SEGMENTS
    ) -> float:
        return self.max_writes_per_second / min(self.total_segments, max_concurrency)

    def anomaly_key_limit(self, budget: int | None) -> int:
        if budget is None:
            return MAX_ANOMALY_KEYS
        return min(MAX_ANOMALY_KEYS, budget // self.total_segments)

    def segment_requests(
        self,
        shard_count: int,
        max_concurrency: int = MAX_CONCURRENT_SEGMENTS,
        anomaly_key_budget: int | None = None,
    ) -> list[SegmentRequest]:
        rate = self.per_segment_writes_per_second(max_concurrency)
        return [
            SegmentRequest(
                direction=self.direction,
                segment=segment,
                total_segments=self.total_segments,
                max_writes_per_second=rate,
                dry_run=self.dry_run,
                shard_count=shard_count,
                anomaly_key_limit=self.anomaly_key_limit(anomaly_key_budget),
            )
            for segment in range(self.total_segments)
        ]


class SegmentPlan(_Model):
    """The plan step's output: the Map iterates `segments` and builds each worker input from
    `template` plus the segment number (so the state stays small at 1,000 segments)."""

    request: BackfillRequest
    segments: list[int]
    template: dict[str, Any]


def check_deployment(
    direction: Direction, shard_count: int, *, deployed_shard_count: int, phase: Phase | str
) -> None:
    """Refuse a run the deployment would undo: the writers' phase, and the writers' N."""
    direction.check_phase(phase)
    if shard_count != deployed_shard_count:
        raise InvalidInputError(
            f"shardCount {shard_count} differs from the deployed shard count "
            f"{deployed_shard_count}: rows would be stamped with shards the readers do not "
            "query. Use the deployed N (context shardCount), or change N with a new deploy first"
        )


def plan_segments(
    request: BackfillRequest,
    *,
    shard_count: int,
    phase: Phase | str,
    max_concurrency: int = MAX_CONCURRENT_SEGMENTS,
) -> SegmentPlan:
    """Validate a run against the deployment and lay out its segments."""
    check_deployment(request.direction, shard_count, deployed_shard_count=shard_count, phase=phase)
    first = request.segment_requests(
        validate_shard_count(shard_count), max_concurrency, ANOMALY_KEY_BUDGET
    )[0]
    template = first.to_json()
    for per_segment in ("segment", "cursor", "totals"):
        template.pop(per_segment)
    return SegmentPlan(
        request=request, segments=list(range(request.total_segments)), template=template
    )


class VerificationResult(_Model):
    """What is still on the source key after a run, read back through the index."""

    direction: Direction
    dry_run: bool
    partitions: list[str]
    remaining: int  # rows still under a source-key partition of the index
    remaining_anomalies: int  # of which saga rows with an unusable personId (left on purpose)
    remaining_other_entities: int  # of which rows that are not sagas (never touched)
    unexpected: int  # saga rows with a usable personId still on the source key
    unexpected_keys: list[TableKey]
    ok: bool
    message: str


class BackfillSummary(_Model):
    """One run, all segments: the CLI's --json object and the state machine's output."""

    direction: Direction
    dry_run: bool
    total_segments: int
    max_writes_per_second: float
    scanned: int
    restamped: int
    skipped: int
    anomalies: int
    would_restamp: int
    throttles: int
    anomaly_keys: list[TableKey]
    complete: bool
    verification: VerificationResult | None = None

    @property
    def anomalies_remain(self) -> bool:
        remaining = self.verification.remaining_anomalies if self.verification else 0
        return self.anomalies > 0 or remaining > 0

    @property
    def verified(self) -> bool:
        return self.verification is not None and self.verification.ok


def summarise(
    request: BackfillRequest,
    results: Sequence[SegmentCounts],
    *,
    complete: bool,
    verification: VerificationResult | None = None,
    throttles: int | None = None,
) -> BackfillSummary:
    """throttles: the run's total when the segments shared one client (their own counts
    overlap then); None sums the segments' counts (one client per segment, as in Lambda)."""
    total = SegmentCounts()
    for result in results:
        total.add(result)
    if throttles is not None:
        total.throttles = throttles
    return BackfillSummary(
        direction=request.direction,
        dry_run=request.dry_run,
        total_segments=request.total_segments,
        max_writes_per_second=request.max_writes_per_second,
        scanned=total.scanned,
        restamped=total.restamped,
        skipped=total.skipped,
        anomalies=total.anomalies,
        would_restamp=total.would_restamp,
        throttles=total.throttles,
        anomaly_keys=total.anomaly_keys,
        complete=complete,
        verification=verification,
    )


# ---- pacing -------------------------------------------------------------------------------


class TokenBucket:
    """Paces writes at `rate` per second and backs off on throttles (AIMD).

    It banks at most `burst_seconds` worth of tokens (at least one): enough that a late wake-up
    or a Scan page does not cost its time in writes (with a single token every overshoot of
    sleep() is lost, measured at 9 % of the cap at 100 writes/s), and little enough that any
    1-second window stays within 5 % of the cap; a backfill has no latency goal that a bigger
    burst would serve. On a throttle the rate halves (at most once per
    `decrease_interval`, so one hot moment that throttles several writes halves it once), holds
    for `hold_seconds`, then grows back linearly to the cap over `recovery_seconds`. It never
    falls below `floor_fraction` of the cap, so a run always makes progress.
    """

    def __init__(
        self,
        rate: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
        floor_fraction: float = 1 / 64,
        hold_seconds: float = 5.0,
        recovery_seconds: float = 10.0,
        decrease_interval: float = 1.0,
        max_sleep: float = 0.25,
        burst_seconds: float = 0.05,
    ) -> None:
        if not rate > 0 or math.isinf(rate):
            raise InvalidInputError(f"rate must be a positive number of writes/s, got {rate!r}")
        self.cap = float(rate)
        self.rate = float(rate)
        self.floor = self.cap * floor_fraction
        self.hold_seconds = hold_seconds
        self.increase_per_second = self.cap / recovery_seconds
        self.decrease_interval = decrease_interval
        self.max_sleep = max_sleep
        self.burst_seconds = burst_seconds
        self.decreases = 0
        self.lowest_rate = self.rate
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 1.0
        self._updated = clock()
        self._hold_until = -math.inf
        self._last_decrease = -math.inf

    def _advance(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        if self.rate < self.cap and now >= self._hold_until:
            grow_from = max(self._hold_until, now - elapsed)
            self.rate = min(self.cap, self.rate + self.increase_per_second * (now - grow_from))
        capacity = max(1.0, self.rate * self.burst_seconds)
        self._tokens = min(capacity, self._tokens + elapsed * self.rate)

    def acquire(self, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Take one token, waiting as long as needed; False if should_stop() turned true first."""
        while True:
            with self._lock:
                self._advance(self._clock())
                # The epsilon absorbs float rounding: 0.9999999999 of a token is a token.
                if self._tokens >= 1.0 - 1e-9:
                    self._tokens = max(0.0, self._tokens - 1.0)
                    return True
                wait = (1.0 - self._tokens) / self.rate
            if should_stop():
                return False
            # Short naps: a stop request (Ctrl-C, SIGTERM) is noticed within max_sleep.
            self._sleep(min(wait, self.max_sleep))

    def on_throttle(self) -> None:
        with self._lock:
            now = self._clock()
            self._advance(now)
            if now - self._last_decrease < self.decrease_interval:
                return
            self._last_decrease = now
            self.rate = max(self.floor, self.rate / 2)
            self._hold_until = now + self.hold_seconds
            self._tokens = min(self._tokens, 0.0)
            self.decreases += 1
            self.lowest_rate = min(self.lowest_rate, self.rate)
        log.warning(
            "backfill throttled: write rate halved to %.3f/s (cap %.3f/s)",
            self.rate,
            self.cap,
            extra={"writesPerSecond": round(self.rate, 3), "cap": self.cap},
        )


def _throttle_count(counter: ThrottleCounter | None) -> int:
    return 0 if counter is None else counter.count


# ---- the segment worker --------------------------------------------------------------------


def _table_key(raw: Mapping[str, Any]) -> Cursor:
    return {name: dict(raw[name]) for name in TABLE_KEY_ATTRIBUTES}


def _plain_key(raw: Mapping[str, Any]) -> TableKey:
    return {name: str(raw[name].get("S", raw[name])) for name in TABLE_KEY_ATTRIBUTES}


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
        self.result = SegmentResult(segment=request.segment)
        self._throttles_at_start = _throttle_count(throttles)
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
                        _table_key(items[position - 1]), interrupted=self._stop_requested()
                    )
                if not self._handle(raw):  # stopped while waiting for a write token
                    resume = _table_key(items[position - 1]) if position else cursor
                    return self._finish(resume, interrupted=self._stop_requested())
                self.result.scanned += 1
                self._progressed = True
                self._report()
            self._progressed = True
            cursor = page.get("LastEvaluatedKey")
            if not cursor:
                return self._finish(None, interrupted=False)

    def _finish(self, cursor: Cursor | None, *, interrupted: bool) -> SegmentResult:
        self.result.cursor = cursor
        self.result.interrupted = interrupted
        self.result.throttles = _throttle_count(self.throttles) - self._throttles_at_start
        self._report()
        log.info(
            "backfill segment %d %s: %d scanned, %d re-stamped, %d skipped, %d anomalies, "
            "%d would re-stamp",
            self.request.segment,
            "interrupted" if interrupted else ("done" if cursor is None else "paused at cursor"),
            self.result.scanned,
            self.result.restamped,
            self.result.skipped,
            self.result.anomalies,
            self.result.would_restamp,
            extra={
                "segment": self.request.segment,
                "direction": self.request.direction.value,
                "dryRun": self.request.dry_run,
                "done": cursor is None and not interrupted,
                "interrupted": interrupted,
                "counts": self.result.to_json(),
            },
        )
        return self.result

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.result)

    def _scan(self, cursor: Cursor | None) -> dict[str, Any]:
        names = {
            "#pk": "PK",
            "#sk": "SK",
            "#entityType": "entityType",
            "#personId": "personId",
            "#gsi4pk": "GSI4PK",
            "#gsi4sk": "GSI4SK",
        }
        scan: dict[str, Any] = {
            "TableName": self.table_name,
            "Segment": self.request.segment,
            "TotalSegments": self.request.total_segments,
            # Only what the decision needs: a row's other attributes are never read, so they
            # can never be written back stale.
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
            # No FilterExpression: it would save no capacity (a Scan is charged for every item
            # it reads, before filtering), and rows it hid could be neither counted nor stepped
            # past by a worker that stops mid-page. Saga rows on the source key are picked
            # out in _handle.
            # Strongly consistent: a row written on the legacy key by a writer still on the old
            # phase just before the Scan passed it is seen. The cost lands on the base table,
            # spread over its partitions, not on the hot index partition.
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
                self.bucket.on_throttle()
                raise SegmentThrottledError(
                    f"segment {self.request.segment}: Scan still throttled after retries "
                    f"({error_code(err)}); the segment stopped, nothing was lost"
                ) from err
            raise
        return response

    def _handle(self, raw: Mapping[str, Any]) -> bool:
        """Deal with one row the Scan returned. False: stopped before writing it."""
        request = self.request
        if raw.get("entityType", {}).get("S") != keys.ENTITY_TYPE:
            return True  # not a saga: never touched
        gsi4pk = raw.get("GSI4PK", {}).get("S")
        if not request.direction.is_source(gsi4pk):
            return True  # already on the target key (or not indexed at all)
        item = deserialize(raw)
        reason = keys.person_anomaly(item)
        if reason is not None:
            self.result.anomalies += 1
            if len(self.result.anomaly_keys) < request.anomaly_key_limit:
                self.result.anomaly_keys.append(_plain_key(raw))
            log.warning(
                "saga row anomaly, left on its key for a human to repair: %s: %s",
                _plain_key(raw),
                reason,
                extra={"key": _plain_key(raw), "reason": reason},
            )
            return True
        target = request.direction.target(item["personId"], request.shard_count)
        if request.dry_run:
            self.result.would_restamp += 1
            return True
        if not self.bucket.acquire(self._stop_requested):
            return False
        self._restamp(raw, target)
        return True

    def _restamp(self, raw: Mapping[str, Any], target: str) -> None:
        names = {"#pk": "PK", "#gsi4pk": "GSI4PK", "#personId": "personId"}
        # The values the Scan returned, as typed attribute values: equality is byte-exact.
        values: dict[str, Any] = {
            ":target": {"S": target},
            ":readGsi4pk": raw["GSI4PK"],
            ":readPersonId": raw["personId"],
        }
        condition = [ROW_STILL_EXISTS, STILL_ON_THE_KEY_READ, STILL_THE_PERSON_READ]
        names["#gsi4sk"] = "GSI4SK"
        if "GSI4SK" in raw:
            values[":readGsi4sk"] = raw["GSI4SK"]
            condition.append(STILL_THE_SORT_KEY_READ)
        else:
            condition.append(SORT_KEY_STILL_ABSENT)
        before = _throttle_count(self.throttles)
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={name: raw[name] for name in TABLE_KEY_ATTRIBUTES},
                UpdateExpression=SET_ONLY_GSI4PK,
                ConditionExpression=" AND ".join(condition),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as err:
            if error_code(err) == "ConditionalCheckFailedException":
                self.result.skipped += 1
                log.info(
                    "skipped %s: moved, changed or deleted since it was read",
                    _plain_key(raw),
                    extra={"key": _plain_key(raw)},
                )
                return
            if is_throttle(err):
                self.bucket.on_throttle()
                raise SegmentThrottledError(
                    f"segment {self.request.segment}: UpdateItem of {_plain_key(raw)} still "
                    f"throttled after retries ({error_code(err)}); the segment stopped, "
                    "nothing was lost: run the backfill again"
                ) from err
            raise
        finally:
            if _throttle_count(self.throttles) > before:
                self.bucket.on_throttle()
        self.result.restamped += 1


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
) -> SegmentResult:
    """Re-stamp one parallel-Scan segment from request.cursor until it is done or must stop.

    remaining_seconds: the Lambda's remaining time (None locally: no deadline); the worker
    returns its cursor once less than safety_margin_seconds remain. stop: set to stop after the
    in-flight write (Ctrl-C, SIGTERM). throttles: the counter attached to `client`
    (attach_throttle_observer); its increments slow the bucket. Returns this invocation's counts
    plus request.totals, and the cursor (None when the segment is done).
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
    )
    own = worker.run()
    own.invocation = SegmentCounts.model_validate(own.model_dump())
    if request.totals is None:
        return own
    combined = SegmentResult(
        segment=own.segment,
        cursor=own.cursor,
        interrupted=own.interrupted,
        invocation=own.invocation,
    )
    combined.add(request.totals, key_limit=request.anomaly_key_limit)
    combined.add(own, key_limit=request.anomaly_key_limit)
    return combined


# ---- verification ---------------------------------------------------------------------------


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
    while True:
        page = client.query(**request)
        rows.extend(page.get("Items", []))
        last = page.get("LastEvaluatedKey")
        if not last:
            return rows
        request["ExclusiveStartKey"] = last


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
            unexpected.append(_plain_key(raw))
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


# ---- the local runner (the CLI without --state-machine-arn) -------------------------------


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

    throttles_before = _throttle_count(throttles)
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
        throttles=_throttle_count(throttles) - throttles_before,
    )
