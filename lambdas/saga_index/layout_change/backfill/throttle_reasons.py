"""What DynamoDB's throttling answers ask the backfill's pace to do (pacer.Pacer answers them).

DynamoDB's ThrottlingReasons name Table|Index, Read|Write and one of four limits, each its answer:

  KeyRangeThroughputExceeded     one partition key is past its ceiling (the hot legacy GSI key,
                                 a sweep or list page sharing it): slow the segment whose
                                 request hit it and those slowed on a key range before (every
                                 re-stamp deletes from the legacy key); a segment not slowed
                                 paces as the slowed ones do, and slows from that rate when
                                 its own request is refused; the run's rate stays
  ProvisionedThroughputExceeded  the table's or an index's capacity: slow the whole run
  AccountLimitExceeded           the account's per-table quota or the table's on-demand
  MaxOnDemandThroughputExceeded  maximum: pausing is the only pace that does not take capacity
                                 from the application; paused for `pause_seconds`, resumed at half
                                 the rate, reported (progress, status, PacePausedSeconds metric)
A plain request's throttle with no reason (an older server's) slows the run.

A fenced re-stamp is a TransactWriteItems (fence.py). DynamoDB cancels one it has no capacity for
("insufficient provisioned capacity": TransactionCanceledException) and lists no ThrottlingReasons,
only a code per item in CancellationReasons, in the order of the items. The pacer reads those codes
(reasons_of names them TransactionItem + the code; the names are the pacer's, not DynamoDB's):

  ThrottlingError                the item's write exceeds the current capacity of its table or
                                 index (an on-demand one: DynamoDB's message says it is scaling,
                                 and to look for a hot key if throttles persist). Taken as a
                                 key-range throttle of the segment that sent it: it is about the
                                 key that item's write hits (a re-stamp's: the legacy GSI key it
                                 deletes from). If the limit is really the table's or the
                                 index's, every segment meets it and each slows by its own, and
                                 the segments not yet slowed pace as the slowed ones do: the run
                                 slows as a whole all the same
  ProvisionedThroughputExceeded  the table's or an index's provisioned capacity: slow the run
A cancelled transaction's throttle under another code names no reason: it slows the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final


class Scope(StrEnum):
    """What a throttle asks the pace to do."""

    SEGMENT = "key-range"  # slow the segment that hit the key
    RUN = "table-or-index-limit"  # slow the whole run
    PAUSE = "account-or-on-demand-maximum"  # stop writing for a while


# A cancelled transaction's item codes (CancellationReasons) that mean it was throttled, each
# named by reasons_of TRANSACTION_ITEM + the code (DynamoDB's TransactionCanceledException).
TRANSACTION_ITEM: Final = "TransactionItem"
TRANSACTION_ITEM_THROTTLED: Final = TRANSACTION_ITEM + "ThrottlingError"
TRANSACTION_ITEM_THROTTLE_CODES: Final = frozenset(
    {"ThrottlingError", "ProvisionedThroughputExceeded"}
)

_LIMITS: Final[Mapping[str, Scope]] = {
    "KeyRangeThroughputExceeded": Scope.SEGMENT,
    # A cancelled transaction's item, throttled: the key its write hits (module docstring).
    TRANSACTION_ITEM_THROTTLED: Scope.SEGMENT,
    "ProvisionedThroughputExceeded": Scope.RUN,
    "AccountLimitExceeded": Scope.PAUSE,
    "MaxOnDemandThroughputExceeded": Scope.PAUSE,
}
UNKNOWN_REASON: Final = "unknown"


def scope_of(reason: str) -> Scope:
    """The answer a ThrottlingReason's `reason` asks for (an unknown one: slow the run)."""
    for limit, scope in _LIMITS.items():
        if reason.endswith(limit):
            return scope
    return Scope.RUN


def reasons_of(response: Mapping[str, Any] | None) -> list[str]:
    """The `reason` of every ThrottlingReason in a parsed error response. The service model
    spells the list ThrottlingReasons on ProvisionedThroughputExceededException and
    throttlingReasons on ThrottlingException. A cancelled transaction (TransactionCanceledException)
    lists none: each of its items cancelled by a throttle (CancellationReasons' Code ThrottlingError
    or ProvisionedThroughputExceeded) is named TRANSACTION_ITEM + its code."""
    if not response:
        return []
    cancelled = response.get("CancellationReasons")
    if cancelled:
        codes = [str(item.get("Code")) for item in cancelled if isinstance(item, Mapping)]
        throttled = [code for code in codes if code in TRANSACTION_ITEM_THROTTLE_CODES]
        return [TRANSACTION_ITEM + code for code in throttled]
    listed = response.get("ThrottlingReasons") or response.get("throttlingReasons") or []
    return [str(item.get("reason", UNKNOWN_REASON)) for item in listed if isinstance(item, Mapping)]
