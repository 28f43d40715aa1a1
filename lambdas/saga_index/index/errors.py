"""Domain errors. Each names the problem so operators and callers can act on it."""

from __future__ import annotations

from datetime import datetime


class SagaIndexError(Exception):
    """Base class of every error this library raises on purpose."""


class RetryLaterError(SagaIndexError):
    """Not yet: the same call may succeed later, unchanged (a state younger than its
    effectiveAt, a lease a live run holds, a write that lost a transient conflict). `retry_at`
    is the earliest time it can succeed, when one is known (the CLI's exit 5 and `retryAt`).
    `outcome_known`: False when a write given up on may have landed (a request of it got no
    answer before the refusals): the caller reads back before it says what is stored."""

    def __init__(
        self, message: str, *, retry_at: datetime | None = None, outcome_known: bool = True
    ) -> None:
        super().__init__(message)
        self.retry_at = retry_at
        self.outcome_known = outcome_known


class InvalidInputError(SagaIndexError, ValueError):
    """An input violates the contract (shard count, personId, key shape, state...)."""


class InvalidShardCountError(InvalidInputError):
    """The shard count is not a power of two between 1 and 1024."""


class InvalidPersonIdError(InvalidInputError):
    """A personId is empty, not a string, or too long for DynamoDB's key limit."""


class InvalidKeyError(InvalidInputError):
    """A GSI4PK / GSI4SK value does not parse under the key contract."""


class EnumerationError(SagaIndexError):
    """A fan-out read could not read every partition: no partial list is returned."""

    def __init__(self, failures: dict[str, BaseException]) -> None:
        self.failures = dict(sorted(failures.items()))
        detail = "; ".join(
            f"{partition}: {type(err).__name__}: {err}" for partition, err in self.failures.items()
        )
        super().__init__(
            f"could not enumerate {len(self.failures)} partition(s) after retries, "
            f"no partial result returned: {detail}"
        )

    @property
    def partitions(self) -> list[str]:
        return list(self.failures)


class SagaAlreadyExistsError(SagaIndexError):
    """Create refused: a saga with this id already exists."""


class SagaConflictError(SagaIndexError):
    """A conditional transition failed: the saga is missing or not in the expected state."""
