"""The wire shapes of a backfill run: every payload the state machine, the handlers and the CLI
hand each other, in camelCase JSON (the Step Functions and CLI contracts), within Step
Functions' 256 KB state.

  the model     Payload: camelCase in JSON, snake_case in Python, nothing unknown accepted;
                a table key, a Scan cursor, a layout
  the budget    the limits that keep every payload inside the state at 1,000 segments
  the ticket    RunTicket: the move and the lease every step of one run carries
  the results   SegmentCounts and SegmentResult: what a segment did (the worker's output)

The steps' inputs built from these (BackfillRequest, PlanRequest and SegmentPlan, SegmentRequest,
VerifyRequest) are `inputs`.

Two neighbours stay apart on purpose: `summary` is the run's report to whoever started it (the
CLI's --json object and the execution's output), which no step reads back; `caps` is the pure
arithmetic of the write caps a run applied (how many a result carries, how a segment's grow,
how the segments' merge), with no model of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from saga_index.index import (
    METRIC_ANOMALIES,
    METRIC_PACE_PAUSES,
    METRIC_RESTAMPED,
    METRIC_SCANNED,
    METRIC_SKIPPED,
    METRIC_THROTTLES,
    METRIC_WOULD_RESTAMP,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    InvalidInputError,
    Layout,
    LayoutKind,
)
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.record import (
    BackfillDirection,
    BackfillKind,
    OpenIndex,
    OpenIndexState,
    format_time,
    utc_now,
)

# The table's key schema (infra/table.py): the cursor is a key of this shape.
TABLE_KEY_ATTRIBUTES = (TABLE_PARTITION_KEY, TABLE_SORT_KEY)


class Payload(BaseModel):
    """A payload's model: camelCase in JSON, snake_case in Python, nothing unknown accepted."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


TableKey = dict[str, str]
Cursor = dict[str, dict[str, str]]


def cursor_of(raw: Mapping[str, Any]) -> Cursor:
    """The table key of a row the Scan returned, as a cursor (ExclusiveStartKey) to resume at."""
    return {name: dict(raw[name]) for name in TABLE_KEY_ATTRIBUTES}


def plain_key(raw: Mapping[str, Any]) -> TableKey:
    """The table key of a row read in the wire shape, as plain strings (what reports carry)."""
    return {name: str(raw[name].get("S", raw[name])) for name in TABLE_KEY_ATTRIBUTES}


def check_cursor(value: Cursor | None) -> Cursor | None:
    """A cursor as a payload carries it (the segment's ExclusiveStartKey), or ValueError."""
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


class LayoutSpec(Payload):
    """A layout in a payload: {"kind": "legacy"} or {"kind": "sharded", "shardCount": N}."""

    kind: LayoutKind
    shard_count: int | None = None

    @model_validator(mode="after")
    def _valid(self) -> LayoutSpec:
        try:
            self.layout()
        except InvalidInputError as err:
            raise ValueError(str(err)) from None
        return self

    @classmethod
    def of(cls, layout: Layout) -> LayoutSpec:
        return cls(kind=layout.kind, shard_count=layout.shard_count)

    def layout(self) -> Layout:
        return Layout(self.kind, self.shard_count)


# --- The size budget: every payload within Step Functions' 256 KB state

# DynamoDB's parallel Scan accepts far more segments; 1,000 is where more parallelism stops
# meaning anything here (the write cap, not the scan, bounds the run) and where one inline Step
# Functions Map can still carry every segment's result in its 256 KB state.
MAX_TOTAL_SEGMENTS = 1000
MAX_ANOMALY_KEYS = 100
# In the state machine the whole run carries at most this many anomaly keys across its
# segments, so the Map's output (one result per segment, ~150 bytes of counts plus ~85 bytes per
# key) stays below Step Functions' 256 KB state limit even at 1,000 segments. Past 400 segments
# no keys travel (each is still logged by the worker that found it, and counted).
ANOMALY_KEY_BUDGET = 400
# An open-index run's results also carry its open counts (wire.OpenCounts, ~90 bytes each) and
# a few example rows, so in the state machine its budgets are smaller and its segments fewer:
# at most OPEN_ANOMALY_KEY_BUDGET keys and OPEN_EXAMPLE_BUDGET examples over the run, at most
# MAX_OPEN_STATE_MACHINE_SEGMENTS segments (a local run keeps its results in memory: up to
# MAX_TOTAL_SEGMENTS). tests/unit/test_backfill_models.py sizes the Map state of both kinds.
OPEN_ANOMALY_KEY_BUDGET = 300
OPEN_EXAMPLE_BUDGET = 20
MAX_OPEN_STATE_MACHINE_SEGMENTS = 500
# Every anomaly key carries its row's reason, at most this long: the budget's 400 keys, each
# under 300 bytes of JSON, stay inside the Map state's (tests/unit/test_backfill_models.py).
ANOMALY_REASON = "reason"
MAX_ANOMALY_REASON_CHARS = 150


def anomaly_key(raw: Mapping[str, Any], reason: str) -> TableKey:
    """An anomaly row as the reports list it: its table key and why its personId is unusable
    (keys.person_anomaly), in ASCII (other characters escaped) and cut to
    MAX_ANOMALY_REASON_CHARS, so the keys stay within the state machine's budget however the
    JSON is encoded (a reason may quote a GSI4SK of up to 1,024 bytes)."""
    reason = reason.encode("ascii", "backslashreplace").decode("ascii")
    if len(reason) > MAX_ANOMALY_REASON_CHARS:
        reason = reason[: MAX_ANOMALY_REASON_CHARS - 3] + "..."
    return {**plain_key(raw), ANOMALY_REASON: reason}


# --- The run's ticket: what every step of one run carries


class RunTicket(Payload):
    """What every step of one run carries: the move the control record named when the run
    started, and the lease it holds (none for a dry run, which writes nothing)."""

    direction: BackfillDirection
    source: LayoutSpec
    target: LayoutSpec
    # The record's version the run started under: the lease's heartbeat fails once it moves on.
    state_version: Annotated[int, Field(strict=True, ge=0)]
    holder: str = Field(min_length=1)
    lease_token: str | None = None
    # The lease's fencing epoch: every re-stamp is conditional on the run's fence slot still
    # holding it (backfill.fence). None without a lease, and on a ticket planned before epochs.
    lease_epoch: Annotated[int, Field(strict=True, ge=0)] | None = None
    # UTC ISO-8601 with milliseconds (record.times.format_time): the completion's startedAt.
    started_at: str
    # What the run changes (record BackfillKind): the layout's GSI4PK, or the open index's
    # OpenSagaPK (then source = target = the layout it leaves alone, and `openShardCount` is
    # the open index's N the stamps are computed with).
    kind: BackfillKind = BackfillKind.LAYOUT
    open_shard_count: Annotated[int, Field(strict=True, ge=1)] | None = None

    @model_validator(mode="after")
    def _kind_consistent(self) -> RunTicket:
        if (self.kind is BackfillKind.OPEN_INDEX) != (self.open_shard_count is not None):
            raise ValueError("openShardCount is set exactly when kind is open-index")
        return self

    @model_serializer(mode="wrap")
    def _layout_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A layout run's ticket is the payload it was before runs had kinds.
        data: dict[str, Any] = handler(self)
        if self.kind is BackfillKind.LAYOUT:
            for name in ("kind", "openShardCount", "open_shard_count"):
                data.pop(name, None)
        return data

    def open_index(self) -> OpenIndex:
        """The open index an open-index run stamps (adding: its N), for the row rule."""
        if self.open_shard_count is None:
            raise InvalidInputError("a layout run's ticket names no open index")
        return OpenIndex(OpenIndexState.ADDING, self.open_shard_count)

    @classmethod
    def of(
        cls,
        move: Move,
        *,
        state_version: int,
        holder: str,
        lease_token: str | None,
        started_at: str,
        lease_epoch: int | None = None,
        open_shard_count: int | None = None,
    ) -> RunTicket:
        return cls(
            kind=BackfillKind.LAYOUT if open_shard_count is None else BackfillKind.OPEN_INDEX,
            open_shard_count=open_shard_count,
            direction=move.direction,
            source=LayoutSpec.of(move.source),
            target=LayoutSpec.of(move.target),
            state_version=state_version,
            holder=holder,
            lease_token=lease_token,
            lease_epoch=lease_epoch,
            started_at=started_at,
        )

    @classmethod
    def unleased(cls, move: Move, *, holder: str = "unleased") -> RunTicket:
        """A ticket for a run outside the control record (benchmarks, tests of the runner):
        no lease is held and nothing checks the record, so only use it on a table no one else
        is migrating."""
        return cls.of(
            move,
            state_version=0,
            holder=holder,
            lease_token=UNLEASED_TOKEN,
            started_at=format_time(utc_now()),
        )

    def move(self) -> Move:
        return Move(self.direction, self.source.layout(), self.target.layout())


UNLEASED_TOKEN = "unleased"  # noqa: S105 (a marker, not a secret)


# --- What a segment did: its counts, and the worker's result


# An open-index run's report lists this many of the rows it wrote (or would write), as examples.
MAX_OPEN_EXAMPLES = 5


class OpenCounts(Payload):
    """What only an open-index run counts: of its writes (`restamped`, `wouldRestamp`), the
    removals of OpenSagaPK, and the first rows it wrote ({PK, SK, change: stamp | remove})."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=False
    )

    saga_rows: int = Field(default=0, ge=0)  # of the rows scanned, the saga rows
    removed: int = Field(default=0, ge=0)
    would_remove: int = Field(default=0, ge=0)
    examples: list[TableKey] = Field(default_factory=list)

    def add(self, other: OpenCounts, *, example_limit: int = MAX_OPEN_EXAMPLES) -> None:
        self.saga_rows += other.saga_rows
        self.removed += other.removed
        self.would_remove += other.would_remove
        room = max(0, example_limit - len(self.examples))
        self.examples.extend(other.examples[:room])


class SegmentCounts(Payload):
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
    # Times the pacer paused on an account limit or an on-demand maximum: this invocation's
    # metric, never carried in the state (1,000 results must fit it).
    pace_pauses: int = Field(default=0, ge=0, exclude=True)
    anomaly_keys: list[TableKey] = Field(default_factory=list)
    # The run's total write cap, each time this segment's lease keeper changed it, in order
    # (caps.extend_caps: first and latest within the budget). Empty for a dry run (no lease,
    # no control record followed) and in a local run, whose one keeper reports the run's.
    applied_caps: list[float] = Field(default_factory=list)
    # Step Functions: the pace this segment's last invocation ended at, with its memory
    # (pacer.Pacer.snapshot), for the next invocation to go on from. Not added up.
    pace: dict[str, float | str | None] | None = None
    # An open-index run's own counts (None in a layout run, and then not in the JSON).
    open: OpenCounts | None = None

    @model_serializer(mode="wrap")
    def _without_an_empty_pace(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A finished segment's result carries no pace, not even a null: the Map's output of
        # 1,000 results must fit the state. A layout run's carries no open counts either.
        data: dict[str, Any] = handler(self)
        for name in ("pace", "open"):
            if data.get(name, False) is None:
                del data[name]
        return data

    @property
    def handled(self) -> int:
        """Source-key rows dealt with, one way or another (drives the progress bar)."""
        return self.restamped + self.skipped + self.anomalies + self.would_restamp

    def metric_values(self) -> dict[str, int]:
        """These counts by worker metric name, in names.BACKFILL_WORKER_METRICS' order."""
        return {
            METRIC_SCANNED: self.scanned,
            METRIC_RESTAMPED: self.restamped,
            METRIC_SKIPPED: self.skipped,
            METRIC_ANOMALIES: self.anomalies,
            METRIC_WOULD_RESTAMP: self.would_restamp,
            METRIC_THROTTLES: self.throttles,
            METRIC_PACE_PAUSES: self.pace_pauses,
        }

    def add(
        self,
        other: SegmentCounts,
        *,
        key_limit: int = MAX_ANOMALY_KEYS,
        example_limit: int = MAX_OPEN_EXAMPLES,
    ) -> None:
        """Add `other`'s counts, anomaly keys and open examples, up to their limits (not its
        caps: how caps add up depends on whether the two ran one after the other or side by
        side; caps.py has both)."""
        self.scanned += other.scanned
        self.restamped += other.restamped
        self.skipped += other.skipped
        self.anomalies += other.anomalies
        self.would_restamp += other.would_restamp
        self.throttles += other.throttles
        self.pace_pauses += other.pace_pauses
        room = max(0, key_limit - len(self.anomaly_keys))
        self.anomaly_keys.extend(other.anomaly_keys[:room])
        if other.open is not None:
            if self.open is None:
                self.open = OpenCounts()
            self.open.add(other.open, example_limit=example_limit)


class SegmentResult(SegmentCounts):
    """The worker's output: counts, the cursor to resume from, and whether the segment's Scan
    reached its end (`done`; a paused worker can return with no cursor yet and not be done)."""

    segment: int
    cursor: Cursor | None = None
    done: bool = False
    # Local runner only: the stop event ended the run; the cursor is where it stopped.
    interrupted: bool = Field(default=False, exclude=True)
    # This invocation's own counts, without the totals handed in (what its metrics publish).
    invocation: SegmentCounts | None = Field(default=None, exclude=True)
