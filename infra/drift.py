"""The drift guard: its function, its schedule (the "drift-guard" row of the job spec,
saga_index.index.jobs), and exactly the permissions its checks need.

Least privilege:
  - dynamodb:Query on the saga INDEX (the legacy COUNT query and the N shard reads, each key
    paced to at most `index_read_units_per_key` in any second: docs/observability.md, "Its pace");
  - dynamodb:Query on the open-saga INDEX (its N keys, paced alike: the comparison with the base
    table a scanning run makes while the record's open index is `open`);
  - dynamodb:Scan on the TABLE (the every-K-th-run scan for rows missing from the index), only
    with a projection (dynamodb:Select = SPECIFIC_ATTRIBUTES) of DRIFT_SCAN_ATTRIBUTES
    (dynamodb:Attributes): the scan never reads whole items, nor any attribute the checks do
    not judge;
  - dynamodb:GetItem on saga rows only (dynamodb:LeadingKeys like "RSAGA#*"), projecting only
    OPEN_RECHECK_ATTRIBUTES: the consistent re-read of a row the open index got wrong on the
    first read, after the GSI's lag;
  - dynamodb:GetItem + dynamodb:PutItem of the drift cursor item only (dynamodb:LeadingKeys =
    DRIFT_CURSOR_PK, its own partition key: nothing of the control partition or the fence
    slots): where a read that does not fit one run stopped, so the next run resumes it.
It runs at most once at a time (reserved concurrency 1). Metrics leave through the function's
log (EMF), so no cloudwatch:PutMetricData. Besides these, the role carries only what
SagaFunctions gives every function (writing its own log group, X-Ray, and reading the control
record, which the guard judges "wrong now" against).
"""

from __future__ import annotations

import aws_cdk as cdk
from constructs import Construct

from infra.functions import SagaFunctions
from infra.schedules import ScheduledInvocation
from saga_index.index.jobs import DRIFT_GUARD
from saga_index.index.names import (
    ENV_DRIFT_KEY_READ_UNITS,
    ENV_DRIFT_PERIOD_MINUTES,
    ENV_DRIFT_SCAN_EVERY,
    ENV_DRIFT_SCAN_RATE,
    ENV_DRIFT_SCAN_SEGMENTS,
    INDEX_PARTITION_KEY,
    INDEX_SORT_KEY,
    MAX_SCAN_EVERY,
    OPEN_INDEX_PARTITION_KEY,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
)

# What the scan projects and filters on: the attributes the checks judge of a row
# (layout_change/checks/drift: judge() and RowRef; the open index's rule: a saga's state and its
# OpenSagaPK). tests/infra runs the checker's scan and holds each request it sends to the grant.
DRIFT_SCAN_ATTRIBUTES = (
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    "sagaId",
    "personId",
    INDEX_PARTITION_KEY,
    INDEX_SORT_KEY,
    "state",
    OPEN_INDEX_PARTITION_KEY,
)
# What the re-read of a row the open index got wrong names (checks/open_index.py's
# _RECHECK_ATTRIBUTES, and the key: AWS counts it as named; tests/infra holds each GetItem the
# checker sends to the grant).
OPEN_RECHECK_ATTRIBUTES = (
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    "personId",
    "state",
    OPEN_INDEX_PARTITION_KEY,
)
# With the 5-minute schedule: one base-table scan an hour.
SCAN_EVERY = 12
# Read units on any one index key in any second: 10 % of a partition's 3,000.
INDEX_READ_UNITS_PER_KEY = 300


class DriftGuard(Construct):
    """`.function`, `.schedule`, `.job`, and `.scan_every` (K) for the alarms."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: SagaFunctions,
        scan_every: int = SCAN_EVERY,
        scan_segments: int = 4,
        scan_read_units_per_second: int = 400,
        index_read_units_per_key: int = INDEX_READ_UNITS_PER_KEY,
    ) -> None:
        super().__init__(scope, construct_id)
        self.job = DRIFT_GUARD
        self.scan_every = _validate_scan_every(scan_every)
        self.index_read_units_per_key = _validate_key_read_units(index_read_units_per_key)
        # A run must end before the next one starts: the period is 5 minutes, the timeout 4,
        # of which the paced index reads may use all but the handler's safety margin (220 s).
        timeout = cdk.Duration.minutes(max(1, self.job.period_minutes - 1))
        self.timeout = timeout
        self.function = functions.function(
            self.job.construct_id,
            handler=self.job.handler,
            description=f"{self.job.name}: {self.job.description}",
            service=self.job.name,
            timeout=timeout,
            memory_size=512,
            reserved_concurrent_executions=1,
            environment={
                ENV_DRIFT_SCAN_EVERY: str(self.scan_every),
                ENV_DRIFT_PERIOD_MINUTES: str(self.job.period_minutes),
                ENV_DRIFT_SCAN_SEGMENTS: str(scan_segments),
                ENV_DRIFT_SCAN_RATE: str(scan_read_units_per_second),
                ENV_DRIFT_KEY_READ_UNITS: str(self.index_read_units_per_key),
            },
        )
        table = functions.table
        table.grant_index_query(self.function)
        table.grant_open_index_query(self.function)
        table.grant_projected_scan(self.function, attributes=DRIFT_SCAN_ATTRIBUTES)
        table.grant_saga_row_read(self.function, attributes=OPEN_RECHECK_ATTRIBUTES)
        table.grant_drift_cursor(self.function)
        self.schedule = ScheduledInvocation(
            self, "Schedule", job_name=self.job.name, function=self.function
        )

    @property
    def scan_interval(self) -> cdk.Duration:
        """Time between two base-table scans (K runs of the schedule)."""
        return cdk.Duration.minutes(self.job.period_minutes * self.scan_every)


def _validate_scan_every(value: object) -> int:
    # The handler enforces the same bound on what it reads; failing here stops synth instead.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SCAN_EVERY:
        raise ValueError(
            f"scan-every K must be an integer from 1 to {MAX_SCAN_EVERY}, got {value!r}"
        )
    return value


def _validate_key_read_units(value: object) -> int:
    # The handler's bounds (KeyReadPace, saga_index.store.dynamo.key_pace): above one 1 MB
    # page's 128 read units, at most a partition's 3,000 per second.
    if isinstance(value, bool) or not isinstance(value, int) or not 128 < value <= 3000:
        raise ValueError(
            f"index read units per key must be an integer above 128 and at most 3000, got {value!r}"
        )
    return value
