"""What the sweeps read and write on a saga row: its attribute names and which rows are open.

The renewal workflow owns state, updatedAt, openedAt and workflowHeartbeatAt; the retry sweep's
conditional claims (claims.py) own the prepare* bookkeeping and the claim's outbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from saga_index.index import OPEN_STATES

PREPARE_FAILED = "PREPARE_FAILED"

# Attributes the rules read (owned by the renewal workflow, except the retry bookkeeping below).
UPDATED_AT = "updatedAt"
OPENED_AT = "openedAt"
WORKFLOW_HEARTBEAT_AT = "workflowHeartbeatAt"
# Retry bookkeeping, written only by the retry sweep's conditional claims (claims.py).
PREPARE_ATTEMPTS = "prepareAttempts"
LAST_PREPARE_RETRY_AT = "lastPrepareRetryAt"
PREPARE_RETRIES_EXHAUSTED_AT = "prepareRetriesExhaustedAt"
# The claim's outbox, on the saga row beside the count it claimed (claims.py): the token of the
# run that claimed, when it claimed (its wall clock), the event to publish, and when PutEvents
# accepted that event. A claim without the last is pending.
PREPARE_CLAIM_TOKEN = "prepareClaimToken"  # noqa: S105 (an attribute name)
PREPARE_CLAIMED_AT = "prepareClaimedAt"
PREPARE_CLAIM_EVENT = "prepareClaimEvent"
PREPARE_CLAIM_PUBLISHED_AT = "prepareClaimPublishedAt"


def open_sagas(sagas: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    """The rows in an open state."""
    # The repository already filters on open states; a pure rule does not rely on its caller.
    return (s for s in sagas if s.get("state") in OPEN_STATES)
