"""The state every process follows: a strongly consistent read, cached for at most T seconds
(docs/control-contract.md, "The cache").

Not a read per request: a sweep's 16 queries share one read. When the record cannot be read
(a client error, or an item that does not parse) the last good state is served for at most
`stale_grace_seconds` more, then reads fail loudly: a process never follows a state older than
T + grace, which is what effectiveAt counts on. After a failed read the next is not tried for
`retry_after_seconds` (1 s): meanwhile calls are answered from the last good state, or fail,
as that read's failure was, so a failing record is not re-read by every request.

The routing is built on every call from the cached state and this process's wall clock, so a
cached state switches its writers to the target at effectiveAt without a re-read.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from botocore.exceptions import BotoCoreError, ClientError

from saga_index.layout_change.record.errors import (
    ControlRecordInvalidError,
    ControlRecordUnavailableError,
)
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState, RecordCondition
from saga_index.layout_change.record.timing import (
    DEFAULT_TIMING,
    ControlTiming,
    MonotonicClock,
    WallClock,
    utc_now,
)

log = logging.getLogger(__name__)


class StateReader(Protocol):
    """Reads the record (ControlStore; a fake in unit tests)."""

    def read(self) -> ControlState: ...


class StateSource(Protocol):
    """What readers and writers need: the current state and its routing."""

    def state(self) -> ControlState: ...

    def routing(self) -> Routing: ...


class ControlProvider:
    """The cached view of one table's record. Thread-safe: one refresh at a time."""

    def __init__(
        self,
        store: StateReader,
        *,
        timing: ControlTiming = DEFAULT_TIMING,
        clock: MonotonicClock = time.monotonic,
        wall_clock: WallClock = utc_now,
    ) -> None:
        self.store = store
        self.timing = timing
        self._clock = clock  # the cache's age: immune to wall-clock steps
        self._wall_clock = wall_clock  # the writers' switch at effectiveAt (a UTC datetime)
        self._lock = threading.Lock()
        self._state: ControlState | None = None
        self._read_at = 0.0
        # The last failed read, since the last good one: when (this clock) and why (what a call
        # is answered with until the next attempt is due).
        self._failure: tuple[float, Exception] | None = None

    def state(self) -> ControlState:
        """The state, read at most T seconds ago (re-read when older, and no sooner than
        retry_after_seconds after a failed read)."""
        with self._lock:
            if self._state is not None and self._age() < self.timing.cache_seconds:
                return self._state
            if self._failure is not None:
                failed_at, err = self._failure
                if self._clock() - failed_at < self.timing.retry_after_seconds:
                    return self._serve_stale(err)
            return self._refresh_locked()

    def routing(self) -> Routing:
        """The routing of the served state at this process's wall clock now."""
        return routing_for(self.state(), self._wall_clock())

    def refresh(self) -> ControlState:
        """Read the record now, whatever the cache holds or the last failure (a worker between
        invocations)."""
        with self._lock:
            return self._refresh_locked()

    @property
    def age_seconds(self) -> float | None:
        """Seconds since the served state was read; None before the first read."""
        with self._lock:
            return None if self._state is None else self._age()

    def _age(self) -> float:
        return self._clock() - self._read_at

    def _refresh_locked(self) -> ControlState:
        try:
            state = self.store.read()
        except (ClientError, BotoCoreError, ControlRecordInvalidError) as err:
            self._failure = (self._clock(), err)
            return self._serve_stale(err)
        self._failure = None
        if state.condition is RecordCondition.MISSING:
            log.error(
                "control record missing: history ends at version %d; routing over every layout "
                "it names",
                state.version,
                extra={"version": state.version, "condition": state.condition.value},
            )
        self._state = state
        self._read_at = self._clock()
        return state

    def _serve_stale(self, err: Exception) -> ControlState:
        detail = f"{type(err).__name__}: {err}"
        if self._state is not None and self._age() < self.timing.max_served_age:
            log.warning(
                "control record unreadable, serving the state read %.1f s ago: %s",
                self._age(),
                detail,
                extra={"ageSeconds": self._age(), "error": detail},
            )
            return self._state
        if self._state is None:
            raise ControlRecordUnavailableError(
                f"the control record could not be read and no state was read before: {detail}"
            ) from err
        raise ControlRecordUnavailableError(
            f"the control record could not be read and the last good state is "
            f"{self._age():.1f} s old (limit {self.timing.max_served_age:.0f} s): {detail}"
        ) from err


class FixedStateSource:
    """A state that never changes: tests, and the CLI's read-only --phase/--shards overrides
    (the record's state, with the routing a reader in the named phase would follow:
    `Routing.between(*layouts_for_phase(phase, n))`)."""

    def __init__(
        self,
        state: ControlState,
        routing: Routing | None = None,
        *,
        wall_clock: WallClock = utc_now,
    ) -> None:
        self._state = state
        self._routing = routing
        self._wall_clock = wall_clock

    def state(self) -> ControlState:
        return self._state

    def routing(self) -> Routing:
        """The routing given, else the state's at the wall clock now (writers switch at its
        effectiveAt, as with ControlProvider)."""
        if self._routing is not None:
            return self._routing
        return routing_for(self._state, self._wall_clock())
