"""The size budget of the backfill's payloads: every one stays within Step Functions' 256 KB
state, even at the largest number of segments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from saga_index.layout_change.backfill.payload import TableKey, plain_key

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


# The write caps a Lambda segment applied (layout_change.backfill.caps) travel in its result too,
# so the run's report can say what it ran at: at most MAX_APPLIED_CAPS per segment, and the
# whole run at most APPLIED_CAP_BUDGET across its segments (2 each at 1,000 segments: the
# first and the latest), each rounded to APPLIED_CAP_DECIMALS (a handful of bytes).
MAX_APPLIED_CAPS = 16
MIN_APPLIED_CAPS = 2
APPLIED_CAP_BUDGET = 2000
APPLIED_CAP_DECIMALS = 3
