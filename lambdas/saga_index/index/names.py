"""Every name that more than one layer spells: ONE home, no dependencies.

infra (what it deploys and wires), the handlers (what they read and publish), the CLI, devkit and
bench all import these constants, so a renamed environment variable, metric or job cannot leave
one side behind. This module imports nothing from the project and nothing outside the standard
library: infra may import it without pulling in boto3 or the domain code.
"""

from __future__ import annotations

from typing import Final

# ---- the index -------------------------------------------------------------------------------
INDEX_NAME: Final = "renewal-saga-person-index"
TABLE_PARTITION_KEY: Final = "PK"
TABLE_SORT_KEY: Final = "SK"

# ---- environment variables (infra sets them, handlers and the CLI read them) -----------------
ENV_TABLE: Final = "SAGA_TABLE_NAME"
ENV_INDEX: Final = "SAGA_INDEX_NAME"
# Retired: the migration state lives in the control record (control/), never in an environment.
# Kept only so tests can prove that no function carries them and that nothing reads them.
RETIRED_ENV_PHASE: Final = "SAGA_INDEX_PHASE"
RETIRED_ENV_SHARDS: Final = "SAGA_INDEX_SHARDS"
ENV_MAX_ATTEMPTS: Final = "SAGA_INDEX_MAX_ATTEMPTS"
ENV_LOG_LEVEL: Final = "SAGA_INDEX_LOG_LEVEL"
ENV_EVENT_BUS: Final = "EVENT_BUS_NAME"
ENV_BACKFILL_SAFETY_MARGIN: Final = "BACKFILL_SAFETY_MARGIN_SECONDS"
ENV_DRIFT_SCAN_EVERY: Final = "DRIFT_SCAN_EVERY"
ENV_DRIFT_PERIOD_MINUTES: Final = "DRIFT_GUARD_PERIOD_MINUTES"
ENV_DRIFT_SCAN_SEGMENTS: Final = "DRIFT_SCAN_SEGMENTS"
ENV_DRIFT_SCAN_RATE: Final = "DRIFT_SCAN_READ_UNITS_PER_SECOND"
ENV_DRIFT_KEY_READ_UNITS: Final = "DRIFT_INDEX_READ_UNITS_PER_KEY"
ENV_DRIFT_OPEN_RECHECK_SECONDS: Final = "DRIFT_OPEN_INDEX_RECHECK_SECONDS"
ENV_HEARTBEAT_THRESHOLD: Final = "WORKFLOW_HEARTBEAT_THRESHOLD_MINUTES"
ENV_PREPARE_MAX_ATTEMPTS: Final = "PREPARE_RETRY_MAX_ATTEMPTS"
ENV_PREPARE_BACKOFF: Final = "PREPARE_RETRY_BACKOFF_MINUTES"
ENV_STUCK_THRESHOLD: Final = "STUCK_SAGA_THRESHOLD_MINUTES"
ENV_STUCK_STATE_THRESHOLDS: Final = "STUCK_SAGA_STATE_THRESHOLDS_MINUTES"
# Powertools' own variables, set by infra on every function.
ENV_POWERTOOLS_SERVICE: Final = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
ENV_POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"

# ---- Powertools service names: one per function (also the schedule's job name) ---------------
SERVICE_DRIFT_GUARD: Final = "drift-guard"
SERVICE_BACKFILL_PLAN: Final = "backfill-plan"
SERVICE_BACKFILL_WORKER: Final = "backfill-worker"
SERVICE_BACKFILL_VERIFY: Final = "backfill-verify"

# ---- the scheduled jobs' names (job name = schedule name = Powertools service) ---------------
# What each job is, when it runs and which are sweeps: saga_index.index.jobs.
JOB_WORKFLOW_HEALTH_SWEEP: Final = "workflow-health-sweep"
JOB_RETRY_FAILED_PREPARE: Final = "retry-failed-prepare"
JOB_STUCK_SAGA_SWEEP: Final = "stuck-saga-sweep"
JOB_AGENT_METRICS_SNAPSHOT: Final = "agent-metrics-snapshot"
JOB_DRIFT_GUARD: Final = SERVICE_DRIFT_GUARD

# ---- metrics ---------------------------------------------------------------------------------
METRICS_NAMESPACE: Final = "RenewalSagaIndex"
DYNAMODB_NAMESPACE: Final = "AWS/DynamoDB"
DIMENSION_SERVICE: Final = "service"
DIMENSION_TABLE: Final = "TableName"
DIMENSION_INDEX: Final = "IndexName"
DIMENSION_SHARD: Final = "Shard"
DIMENSION_STATE: Final = "State"
# DynamoDB's own dimension names (AWS/DynamoDB namespace).
DYNAMODB_DIMENSION_TABLE: Final = "TableName"
DYNAMODB_DIMENSION_INDEX: Final = "GlobalSecondaryIndexName"

# The drift guard's metrics.
METRIC_LEGACY_ROWS: Final = "LegacyRows"
METRIC_SHARDED_ROWS: Final = "ShardedRows"
METRIC_MISROUTED_ROWS: Final = "MisroutedRows"
METRIC_ANOMALOUS_ROWS: Final = "AnomalousRows"
METRIC_ROWS_PER_SHARD: Final = "RowsPerShard"
METRIC_SHARD_SKEW: Final = "ShardSkew"
METRIC_UNINDEXED_ROWS: Final = "UnindexedRows"
METRIC_STRAY_ROWS: Final = "StrayRows"
METRIC_SCANNED_SAGA_ROWS: Final = "ScannedSagaRows"
# The open-saga index against the base table (scanning runs, while it is `open`, or `adding`
# once its writers' switch settled; 0 in other states): open sagas it does not hold under their
# person's key (in `open` the sweeps miss them; in `adding` a stamp that is wrong), and entries
# or stamps it must not have (closed sagas). Both page.
METRIC_OPEN_INDEX_MISSING_ROWS: Final = "OpenIndexMissingRows"
METRIC_OPEN_INDEX_STRAY_ROWS: Final = "OpenIndexStrayRows"
# In `adding`: open sagas that carry no OpenSagaPK yet, the open-index backfill's work left
# (expected until it has run: it does not page); 0 in other states.
METRIC_OPEN_INDEX_UNSTAMPED_ROWS: Final = "OpenIndexUnstampedRows"

# The backfill worker's metrics (this invocation's own counts, never the carried totals).
METRIC_SCANNED: Final = "Scanned"
METRIC_RESTAMPED: Final = "Restamped"
METRIC_SKIPPED: Final = "Skipped"
METRIC_ANOMALIES: Final = "Anomalies"
METRIC_WOULD_RESTAMP: Final = "WouldRestamp"
METRIC_THROTTLES: Final = "Throttles"
# Times the pacer paused the run on an account limit or an on-demand maximum (it pages).
METRIC_PACE_PAUSES: Final = "PacePauses"
BACKFILL_WORKER_METRICS: Final[tuple[str, ...]] = (
    METRIC_SCANNED,
    METRIC_RESTAMPED,
    METRIC_SKIPPED,
    METRIC_ANOMALIES,
    METRIC_WOULD_RESTAMP,
    METRIC_THROTTLES,
    METRIC_PACE_PAUSES,
)

# The sweeps' metrics.
METRIC_SWEEP_DURATION: Final = "SweepDuration"
METRIC_SAGAS_READ: Final = "SagasRead"
METRIC_SAGAS_SKIPPED_CHANGED: Final = "SagasSkippedChanged"
METRIC_SAGAS_UNEVALUABLE: Final = "SagasUnevaluable"
METRIC_OPEN_SAGAS: Final = "OpenSagas"
METRIC_OLDEST_OPEN_SAGA_AGE: Final = "OldestOpenSagaAgeSeconds"

# The sweeps' findings: each is an EventBridge detail-type and a metric name.
FINDING_WORKFLOW_UNHEALTHY: Final = "SagaWorkflowUnhealthy"
FINDING_PREPARE_RETRY_REQUESTED: Final = "SagaPrepareRetryRequested"
FINDING_PREPARE_RETRIES_EXHAUSTED: Final = "SagaPrepareRetriesExhausted"
FINDING_STUCK: Final = "SagaStuck"

# DynamoDB's own metrics (AWS/DynamoDB) that the watch reads and the alarms and dashboard show.
# Per-index throttle metrics (dimensions table + index). The first four are the alarm's: every
# read or write throttle of the index, and the hot-partition (key range) ones.
ALARM_THROTTLE_METRICS: Final[tuple[str, ...]] = (
    "ReadThrottleEvents",
    "WriteThrottleEvents",
    "ReadKeyRangeThroughputThrottleEvents",
    "WriteKeyRangeThroughputThrottleEvents",
)
INDEX_THROTTLE_METRICS: Final[tuple[str, ...]] = (
    *ALARM_THROTTLE_METRICS,
    "ReadProvisionedThroughputThrottleEvents",
    "WriteProvisionedThroughputThrottleEvents",
    "ReadMaxOnDemandThroughputThrottleEvents",
    "WriteMaxOnDemandThroughputThrottleEvents",
    "ReadAccountLimitThrottleEvents",
)
# Table-level throttles, per operation (dimensions table + Operation), shown for context.
TABLE_THROTTLED_REQUESTS: Final = "ThrottledRequests"
DYNAMODB_DIMENSION_OPERATION: Final = "Operation"
CONTEXT_OPERATIONS: Final[tuple[str, ...]] = ("Query", "PutItem", "UpdateItem", "DeleteItem")

# ---- the index's key attributes --------------------------------------------------------------
INDEX_PARTITION_KEY: Final = "GSI4PK"
INDEX_SORT_KEY: Final = "GSI4SK"

# ---- the sparse open-saga index ----------------------------------------------------------------
# A second GSI beside GSI4 whose partition key only open sagas carry: DynamoDB leaves an item out
# of an index when it lacks the key's attribute, so an enumeration of it costs the open sagas, not
# the history. Its partition key is spread by the same shard hash as GSI4's ("RenewalSagaOpen#"
# + shard(personId, N), N the open index's own shard count in the control record); its sort key is
# GSI4's, so the sweeps read it in the order they read GSI4. Single-attribute keys, so that every
# engine the project runs on (dynalite, moto) serves it (docs/data-model.md).
OPEN_INDEX_NAME: Final = "renewal-saga-open-index"
OPEN_INDEX_PARTITION_KEY: Final = "OpenSagaPK"
OPEN_INDEX_SORT_KEY: Final = INDEX_SORT_KEY
OPEN_INDEX_KEY_PREFIX: Final = "RenewalSagaOpen#"

# ---- limits both the deployment and the code obey --------------------------------------------
# The backfill runs at most this many segments at once (the state machine's Map MaxConcurrency and
# the local thread pool): each segment's share of the write cap is total / min(segments, this).
MAX_CONCURRENT_SEGMENTS: Final = 16
# The fields of a backfill worker's input that every segment of a run shares (camelCase JSON):
# the plan step's `template`, which the state machine copies into each worker input and each
# next invocation's (the rest: segment, run, cursor, totals).
BACKFILL_SEGMENT_TEMPLATE_FIELDS: Final[tuple[str, ...]] = (
    "totalSegments",
    "maxWritesPerSecond",
    "runMaxWritesPerSecond",
    "dryRun",
    "anomalyKeyLimit",
    "appliedCapLimit",
    "paceFloor",
    "openExampleLimit",
)
# The error the backfill worker raises when DynamoDB keeps throttling; the state machine retries
# it by this name (the exception's class name).
BACKFILL_THROTTLED_ERROR: Final = "SegmentThrottledError"
# CloudWatch caps an alarm's period x evaluation periods at one day; the unindexed-rows alarm's
# period is two drift scan intervals, so K x 5 min x 2 <= 24 h.
MAX_SCAN_EVERY: Final = 144

# ---- the handlers' runtime -------------------------------------------------------------------
# Set by Lambda itself in every execution environment (never by infra).
ENV_LAMBDA_FUNCTION_NAME: Final = "AWS_LAMBDA_FUNCTION_NAME"
# The backfill verifier's metrics.
METRIC_SOURCE_KEY_ROWS: Final = "SourceKeyRows"
METRIC_UNEXPECTED_SOURCE_KEY_ROWS: Final = "UnexpectedSourceKeyRows"
# The drift guard's "wrong now" metrics, judged against the control record's current state; each
# pages whenever it is above 0, in every state (MisroutedRows, UnindexedRows and StrayRows above
# are the others). ControlRecordMissing is 1 when the STATE item is gone but history exists.
METRIC_UNEXPECTED_LEGACY_ROWS: Final = "UnexpectedLegacyRows"
METRIC_UNEXPECTED_SHARDED_ROWS: Final = "UnexpectedShardedRows"
METRIC_CONTROL_RECORD_MISSING: Final = "ControlRecordMissing"

# ---- the control record (docs/control-contract.md) -------------------------------------------
# The partition key of every control item (STATE, HISTORY#..., EVENT#...): the handlers read it,
# infra grants access to exactly this partition (an IAM dynamodb:LeadingKeys condition).
CONTROL_PK: Final = "RSAGA_INDEX#CONTROL"
# The backfill's fence slots (docs/control-contract.md, "The fence"): PK = this prefix + the
# slot's number, each slot on its own partition key (never the control partition, never in the
# index). infra grants the re-stamping functions a ConditionCheck on exactly these keys.
FENCE_PK_PREFIX: Final = "RSAGA_INDEX#FENCE#"
# The drift guard's read cursor (docs/control-contract.md, "The drift cursor"): one item on its
# own partition key, so infra grants the guard GetItem + PutItem on exactly this key and nothing
# of the control partition; its PK does not start with "RSAGA#", so no saga read sees it.
DRIFT_CURSOR_PK: Final = "RSAGA_INDEX#DRIFT#CURSOR"
DRIFT_CURSOR_SK: Final = "CURSOR"
# The drift guard's read progress: DriftReadIncomplete is 1 on a run whose read of the index
# has not reached every key's end (0 on a run that published a verdict), DriftReadPercent how
# much of the read is done (of the last complete read's read units).
METRIC_DRIFT_READ_INCOMPLETE: Final = "DriftReadIncomplete"
METRIC_DRIFT_READ_PERCENT: Final = "DriftReadPercent"

# ---- the deployed stack ----------------------------------------------------------------------
# The stack names its alarms "<stack>-<Name>" (infra/observability/alarms.py): `saga-index status
# --alarms` lists the alarms whose names start with STACK_NAME + "-".
STACK_NAME: Final = "RenewalSagaIndex"
# The construct that builds every function (infra/stack.py): the functions' logical IDs start
# with it (`FunctionsDriftGuard576FAF98`), which is how `saga-index preflight` tells them apart.
FUNCTIONS_CONSTRUCT: Final = "Functions"
# The stack output naming the table (`saga-index preflight` checks it against --table).
OUTPUT_TABLE_NAME: Final = "TableName"

# ---- the backfill's write cap ----------------------------------------------------------------
# One partition serves at most 1,000 WCU/s and every re-stamp writes to a hot index partition
# (the legacy one, forward): a cap above that could never be honoured, only throttled. The run's
# own cap and the runtime throttle in the control record (`backfill throttle`) both obey it.
MAX_WRITES_PER_SECOND: Final = 1000.0
# The floor of a cap the operator CLI accepts: below it one token takes minutes per segment and a
# run looks hung (1e-300 is a float click would otherwise accept).
MIN_WRITES_PER_SECOND: Final = 0.1

# retry-failed-prepare: pending claims past the publish timeout, whose events went out again.
METRIC_SAGA_EVENTS_REPUBLISHED: Final = "SagaEventsRepublished"
