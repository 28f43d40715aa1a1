"""Retrying a write DynamoDB refused for a moment: the one helper every control-record write
goes through (docs/control-contract.md, "The fence": "Control writes retry").

DynamoDB refuses a write without applying it when it conflicts with an ongoing transaction
(TransactionConflictException) or when the key or the account is past its throughput
(ThrottlingException, ProvisionedThroughputExceededException, RequestLimitExceeded). Both say
"not now", so the same request may simply be sent again: that is safe even for a conditional
write, because the refused attempt changed nothing. botocore retries throttles itself (its
standard mode) but not TransactionConflictException, and gives up after its own budget; this
helper puts a bounded exponential back-off with full jitter around the whole call, then raises
the domain's RetryLaterError (the CLI's exit 5, with retryAt) naming what it was writing and
how many attempts it made.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

from botocore.exceptions import ClientError

from saga_index.index import RetryLaterError
from saga_index.store.dynamo.client import THROTTLE_CODES, error_code

T = TypeVar("T")

# What DynamoDB answers for a write it refused for now and did not apply.
TRANSIENT_WRITE_CODES: Final = frozenset(
    {"TransactionConflictException", "RequestLimitExceeded", *THROTTLE_CODES}
)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to try: `attempts` in all, the n-th wait drawn uniformly from
    [0, min(max_delay, base_delay * 2**n)] (full jitter: writers that collided once do not
    collide again in step)."""

    attempts: int = 6
    base_delay: float = 0.05
    max_delay: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError(f"an impossible retry policy: {self}")

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """The wait after failed attempt number `attempt` (0-based)."""
        return rng() * min(self.max_delay, self.base_delay * 2**attempt)


DEFAULT_POLICY: Final = RetryPolicy()


def is_transient_write_refusal(err: BaseException) -> bool:
    """A write DynamoDB refused for now, without applying it."""
    return isinstance(err, ClientError) and error_code(err) in TRANSIENT_WRITE_CODES


def retry_transient(
    call: Callable[[], T],
    *,
    what: str,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], object] = time.sleep,
    rng: Callable[[], float] = random.random,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> T:
    """`call()`, sent again after a transient refusal (TRANSIENT_WRITE_CODES) with back-off,
    at most `policy.attempts` times in all. Any other error propagates at once. When every
    attempt was refused: RetryLaterError naming `what` (e.g. "the control record's STATE
    item") and the attempts, chained to the last refusal. It says "nothing was written" only
    when that is known: when no refused call had been resent by botocore (a refusal answers a
    request DynamoDB did not apply, but a resend means an earlier request of that call got an
    error or no answer at all, and a request whose answer was lost may have landed).
    `RetryLaterError.outcome_known` tells the two apart; a caller that can read the item back
    does so before it reports."""
    resent = False
    for attempt in range(policy.attempts):
        try:
            return call()
        except ClientError as err:
            if not is_transient_write_refusal(err):
                raise
            resent = resent or botocore_resent(err)
            if attempt + 1 < policy.attempts:
                sleep(policy.delay(attempt, rng))
                continue
            wait = policy.max_delay
            outcome = (
                "a request of it was resent by botocore after an error or no answer, so one "
                "whose answer was lost may have landed: what is stored is not known here"
                if resent
                else "nothing was written"
            )
            raise RetryLaterError(
                f"{what} stayed contended: {policy.attempts} attempts were refused "
                f"({error_code(err)}); {outcome}; try again in a few seconds",
                retry_at=now() + timedelta(seconds=wait),
                outcome_known=not resent,
            ) from err
    raise AssertionError("unreachable: the loop returns or raises")


def botocore_resent(err: ClientError) -> bool:
    """Whether botocore sent the request more than once before this answer (its retry mode
    resends after throttles, and after timeouts and dropped connections alike)."""
    meta = err.response.get("ResponseMetadata") or {}
    return int(meta.get("RetryAttempts") or 0) > 0
