"""The sweeps' thresholds, with their defaults: one policy per rule, validated on construction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from saga_index.index import OPEN_STATES, InvalidInputError

DEFAULT_HEARTBEAT_THRESHOLD = timedelta(minutes=30)
DEFAULT_MAX_PREPARE_ATTEMPTS = 3
DEFAULT_PREPARE_BACKOFF = timedelta(minutes=10)
# A pending claim older than this is re-published: the sweep function's timeout is 3 minutes
# (infra/sweeps.py), so the run that claimed it has ended by then; 2 more cover clock skew
# between execution environments.
DEFAULT_PUBLISH_TIMEOUT = timedelta(minutes=5)
DEFAULT_STUCK_THRESHOLD = timedelta(hours=24)


def _positive(name: str, value: timedelta) -> timedelta:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidInputError(f"{name} must be a positive duration, got {value!r}")
    return value


@dataclass(frozen=True)
class HealthPolicy:
    threshold: timedelta = DEFAULT_HEARTBEAT_THRESHOLD

    def __post_init__(self) -> None:
        _positive("workflow heartbeat threshold", self.threshold)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = DEFAULT_MAX_PREPARE_ATTEMPTS
    base_backoff: timedelta = DEFAULT_PREPARE_BACKOFF
    publish_timeout: timedelta = DEFAULT_PUBLISH_TIMEOUT

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise InvalidInputError(
                f"max prepare attempts must be an integer, got {self.max_attempts!r}"
            )
        if not 1 <= self.max_attempts <= 20:
            raise InvalidInputError(
                f"max prepare attempts must be from 1 to 20, got {self.max_attempts}"
            )
        _positive("prepare retry backoff", self.base_backoff)
        _positive("claim publish timeout", self.publish_timeout)

    def backoff(self, attempts: int) -> timedelta:
        """How long after the last attempt the next one is due: base x 2^attempts."""
        return self.base_backoff * (2**attempts)


@dataclass(frozen=True)
class StuckPolicy:
    default_threshold: timedelta = DEFAULT_STUCK_THRESHOLD
    per_state: Mapping[str, timedelta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _positive("stuck-saga threshold", self.default_threshold)
        unknown = sorted(set(self.per_state) - set(OPEN_STATES))
        if unknown:
            raise InvalidInputError(
                f"stuck-saga thresholds name states that are not open states: {unknown}; "
                f"open states are {', '.join(OPEN_STATES)}"
            )
        for state, threshold in self.per_state.items():
            _positive(f"stuck-saga threshold for {state}", threshold)

    def threshold_for(self, state: str) -> timedelta:
        return self.per_state.get(state, self.default_threshold)
