"""The steps' inputs, in the wire shapes of `wire`: BackfillRequest (the run's: what the CLI
and the state machine's execution input carry), PlanRequest and SegmentPlan (the plan step's),
SegmentRequest (a worker's: one invocation's share of one segment) and VerifyRequest (the
verification's); and how the plan lays the segments out.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from saga_index.index import (
    BACKFILL_SEGMENT_TEMPLATE_FIELDS,
    MAX_CONCURRENT_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    MIN_WRITES_PER_SECOND,
    InvalidInputError,
)
from saga_index.layout_change.backfill.caps import (
    APPLIED_CAP_BUDGET,
    MAX_APPLIED_CAPS,
    MIN_APPLIED_CAPS,
    applied_cap_limit,
)
from saga_index.layout_change.backfill.move import Move
from saga_index.layout_change.backfill.pace_curve import (
    DEFAULT_FLOOR_FRACTION,
    PaceRules,
    paced_rules,
)
from saga_index.layout_change.backfill.wire import (
    ANOMALY_KEY_BUDGET,
    MAX_ANOMALY_KEYS,
    MAX_OPEN_EXAMPLES,
    MAX_OPEN_STATE_MACHINE_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    OPEN_ANOMALY_KEY_BUDGET,
    OPEN_EXAMPLE_BUDGET,
    Cursor,
    Payload,
    RunTicket,
    SegmentCounts,
    SegmentResult,
    check_cursor,
)
from saga_index.layout_change.record import BackfillDirection, BackfillKind

DEFAULT_TOTAL_SEGMENTS = 4
DEFAULT_MAX_WRITES_PER_SECOND = 50.0
# The most read units per second an open-index run's verification Scan may be given (the CLI's
# --scan-rate range).
MAX_VERIFY_READ_UNITS_PER_SECOND = 40_000.0


def segment_share(max_writes_per_second: float, total_segments: int) -> float:
    """One segment's share of a run's TOTAL cap, among the segments running at once."""
    return max_writes_per_second / min(total_segments, MAX_CONCURRENT_SEGMENTS)


# A pace floor: a fraction of the cap, above 0 (a run always makes progress) and at most 1.
PaceFloor = Annotated[float, Field(strict=True, gt=0, le=1)]


class SegmentRequest(Payload):
    """The worker's input: one invocation's share of one parallel-Scan segment."""

    run: RunTicket
    segment: Annotated[int, Field(strict=True, ge=0)]
    total_segments: Annotated[int, Field(strict=True, ge=1, le=MAX_TOTAL_SEGMENTS)]
    cursor: Cursor | None = None
    # This segment's share of the run's own cap (the record's throttle, when set, replaces it).
    max_writes_per_second: Annotated[float, Field(strict=True, gt=0, le=MAX_WRITES_PER_SECOND)]
    # The run's own TOTAL cap, the unit its report names caps in (None: the share times the
    # segments running at once).
    run_max_writes_per_second: (
        Annotated[float, Field(strict=True, gt=0, le=MAX_WRITES_PER_SECOND)] | None
    ) = None
    dry_run: Annotated[bool, Field(strict=True)]
    # The segment's running totals from the previous invocations (the state machine's loop
    # hands the last result back in), so the final result is the whole segment's.
    totals: SegmentCounts | None = None
    anomaly_key_limit: Annotated[int, Field(strict=True, ge=0, le=MAX_ANOMALY_KEYS)] = (
        MAX_ANOMALY_KEYS
    )
    # How many applied caps the result carries (caps.applied_cap_limit).
    applied_cap_limit: Annotated[
        int, Field(strict=True, ge=MIN_APPLIED_CAPS, le=MAX_APPLIED_CAPS)
    ] = MAX_APPLIED_CAPS
    pace_floor: PaceFloor = DEFAULT_FLOOR_FRACTION
    # How many example rows an open-index run's result carries (the run's report lists them).
    open_example_limit: Annotated[int, Field(strict=True, ge=0, le=MAX_OPEN_EXAMPLES)] = (
        MAX_OPEN_EXAMPLES
    )

    def pace_rules(self) -> PaceRules:
        return paced_rules(self.pace_floor)

    @field_validator("cursor")
    @classmethod
    def _cursor_shape(cls, value: Cursor | None) -> Cursor | None:
        return check_cursor(value)

    @model_validator(mode="after")
    def _consistent(self) -> SegmentRequest:
        if self.segment >= self.total_segments:
            raise ValueError(
                f"segment must be less than totalSegments ({self.total_segments}), "
                f"got {self.segment}"
            )
        if not self.dry_run and self.run.lease_token is None:
            raise ValueError("a run that writes needs run.leaseToken (the lease it holds)")
        return self

    @property
    def move(self) -> Move:
        return self.run.move()

    def run_cap(self) -> float:
        """The run's own total cap (what the report calls the cap when no throttle is set)."""
        if self.run_max_writes_per_second is not None:
            return self.run_max_writes_per_second
        running = min(self.total_segments, MAX_CONCURRENT_SEGMENTS)
        return round(self.max_writes_per_second * running, 6)


class BackfillRequest(Payload):
    """The state machine's input, and what the CLI builds from its options. No layouts: the
    run's source and target are the control record's."""

    direction: BackfillDirection
    total_segments: Annotated[int, Field(strict=True, ge=1, le=MAX_TOTAL_SEGMENTS)] = (
        DEFAULT_TOTAL_SEGMENTS
    )
    # The TOTAL cap, over all segments. A floor, so a typo (1e-300) is refused instead of
    # starting a run that would never write.
    max_writes_per_second: Annotated[
        float, Field(strict=True, ge=MIN_WRITES_PER_SECOND, le=MAX_WRITES_PER_SECOND)
    ] = DEFAULT_MAX_WRITES_PER_SECOND
    # Required: whoever starts a run against the production table says whether it writes.
    dry_run: Annotated[bool, Field(strict=True)]
    # The least pace the pacer falls to, as a fraction of the cap (pacer.PaceRules).
    pace_floor: PaceFloor = DEFAULT_FLOOR_FRACTION
    # What the run changes: the layout's GSI4PK (the default), or the open index's OpenSagaPK.
    kind: BackfillKind = BackfillKind.LAYOUT
    # An open-index run only: the read units per second its verification's consistent Scan of
    # the base table may use (None: open_readback's default). A layout run's verification
    # queries the source keys and scans nothing.
    verify_read_units_per_second: (
        Annotated[float, Field(strict=True, ge=1, le=MAX_VERIFY_READ_UNITS_PER_SECOND)] | None
    ) = None

    @model_validator(mode="after")
    def _verify_rate_of_open_runs(self) -> BackfillRequest:
        if self.verify_read_units_per_second is not None and self.kind is BackfillKind.LAYOUT:
            raise ValueError(
                "verifyReadUnitsPerSecond is an open-index run's (its verification scans the "
                "table); a layout run's verification scans nothing"
            )
        return self

    @model_serializer(mode="wrap")
    def _layout_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A layout run's request is the execution input it was before runs had kinds.
        data: dict[str, Any] = handler(self)
        if self.kind is BackfillKind.LAYOUT:
            data.pop("kind", None)
        for name in ("verifyReadUnitsPerSecond", "verify_read_units_per_second"):
            if name in data and data[name] is None:
                del data[name]
        return data

    def pace_rules(self) -> PaceRules:
        return paced_rules(self.pace_floor)

    def per_segment_writes_per_second(self) -> float:
        return segment_share(self.max_writes_per_second, self.total_segments)

    def anomaly_key_limit(self, budget: int | None) -> int:
        if budget is None:
            return MAX_ANOMALY_KEYS
        return min(MAX_ANOMALY_KEYS, budget // self.total_segments)

    def segment_requests(
        self,
        run: RunTicket,
        anomaly_key_budget: int | None = None,
        applied_cap_budget: int | None = None,
        open_example_budget: int | None = None,
    ) -> list[SegmentRequest]:
        """Every segment's first request. The budgets bound what the results carry (the state
        machine's; None: no bound, as in a local run)."""
        if run.direction is not self.direction:
            raise InvalidInputError(
                f"the run's ticket is {run.direction.value}, the request {self.direction.value}"
            )
        if run.kind is not self.kind:
            raise InvalidInputError(
                f"the run's ticket is a {run.kind.value} run, the request {self.kind.value}"
            )
        rate = self.per_segment_writes_per_second()
        return [
            SegmentRequest(
                run=run,
                segment=segment,
                total_segments=self.total_segments,
                max_writes_per_second=rate,
                run_max_writes_per_second=self.max_writes_per_second,
                dry_run=self.dry_run,
                anomaly_key_limit=self.anomaly_key_limit(anomaly_key_budget),
                applied_cap_limit=applied_cap_limit(self.total_segments, applied_cap_budget),
                pace_floor=self.pace_floor,
                open_example_limit=(
                    MAX_OPEN_EXAMPLES
                    if open_example_budget is None
                    else min(MAX_OPEN_EXAMPLES, open_example_budget // self.total_segments)
                ),
            )
            for segment in range(self.total_segments)
        ]


class PlanRequest(Payload):
    """The plan step's input: the state machine's input, and who runs it (the execution)."""

    request: BackfillRequest
    holder: str = Field(min_length=1)


class SegmentPlan(Payload):
    """The plan step's output: the Map iterates `segments` and builds each worker input from
    `template`, `run` and the segment number (so the state stays small at 1,000 segments)."""

    request: BackfillRequest
    run: RunTicket
    segments: list[int]
    template: dict[str, Any]


def check_state_machine_segments(request: BackfillRequest) -> None:
    """InvalidInputError when the state machine cannot carry the run's results: an open-index
    run of more than MAX_OPEN_STATE_MACHINE_SEGMENTS segments (wire.py, the size budget)."""
    if (
        request.kind is BackfillKind.OPEN_INDEX
        and request.total_segments > MAX_OPEN_STATE_MACHINE_SEGMENTS
    ):
        raise InvalidInputError(
            f"an open-index run in the state machine takes at most "
            f"{MAX_OPEN_STATE_MACHINE_SEGMENTS} segments (its results must fit Step Functions' "
            f"256 KB state), got {request.total_segments}; nothing written"
        )


def plan_segments(request: BackfillRequest, run: RunTicket) -> SegmentPlan:
    """Lay out the segments of a run the record (and its lease) allowed, within the state
    machine's budgets (those of the run's kind). The template holds every SegmentRequest field
    the segments share (names.BACKFILL_SEGMENT_TEMPLATE_FIELDS, which the state machine copies
    into each worker input)."""
    check_state_machine_segments(request)
    opens = request.kind is BackfillKind.OPEN_INDEX
    first = request.segment_requests(
        run,
        OPEN_ANOMALY_KEY_BUDGET if opens else ANOMALY_KEY_BUDGET,
        APPLIED_CAP_BUDGET,
        OPEN_EXAMPLE_BUDGET,
    )[0].to_json()
    template = {field: first[field] for field in BACKFILL_SEGMENT_TEMPLATE_FIELDS}
    return SegmentPlan(
        request=request, run=run, segments=list(range(request.total_segments)), template=template
    )


class VerifyRequest(Payload):
    """The verification step's input: the run's request and ticket, and every segment's last
    result (the Map's output)."""

    request: BackfillRequest
    run: RunTicket
    segments: list[SegmentResult]
