"""The four periodic sweeps over open sagas, and what each finds.

The rules are pure functions of (open sagas, now, policy): no I/O and no clock of their own, so
the same inputs give the same findings and every boundary can be tested exactly. "Older than a
threshold" is strict everywhere: a saga exactly at the threshold is not yet a finding.

rows.py      the row attributes the sweeps read and write, and which rows are open
findings.py  what a rule returns: findings, and the rows it could not evaluate
policies.py  the thresholds, with their defaults
clock.py     the injected "now", the rows' timestamps, ages
health.py    workflow-health-sweep: a stale workflow heartbeat
stuck.py     stuck-saga-sweep: no update for too long in a state
retry.py     retry-failed-prepare: retries due, and retries used up
outbox.py    retry-failed-prepare: claims whose event must be published again
snapshot.py  agent-metrics-snapshot: open sagas by state, and the oldest's age
claims.py    the retry sweep's conditional UpdateItems (claim a retry, record exhaustion once)
events.py    the EventBridge publisher (batches of 10, failed entries retried, loud on failure)
runner.py    one domain function per sweep: read every open saga, apply the rule, act
"""

from saga_index.sweeps import runner
from saga_index.sweeps.claims import RetryClaims
from saga_index.sweeps.events import EventPublisher, make_events_client
from saga_index.sweeps.policies import (
    DEFAULT_HEARTBEAT_THRESHOLD,
    DEFAULT_MAX_PREPARE_ATTEMPTS,
    DEFAULT_PREPARE_BACKOFF,
    DEFAULT_STUCK_THRESHOLD,
    HealthPolicy,
    RetryPolicy,
    StuckPolicy,
)

__all__ = [
    "DEFAULT_HEARTBEAT_THRESHOLD",
    "DEFAULT_MAX_PREPARE_ATTEMPTS",
    "DEFAULT_PREPARE_BACKOFF",
    "DEFAULT_STUCK_THRESHOLD",
    "EventPublisher",
    "HealthPolicy",
    "RetryClaims",
    "RetryPolicy",
    "StuckPolicy",
    "make_events_client",
    "runner",
]
