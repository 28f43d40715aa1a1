"""What a command waits for, on a terminal: an AWS call that has not answered after
SHOW_AFTER_SECONDS (a slow service, an endpoint where nothing listens and botocore retries)
is named on stderr, with a spinner and how long it has waited, until it answers.

Every client the CLI builds is watched (failures.mark_client registers `watch_client`): the
call's service, endpoint and operation come from botocore's before-call / after-call events, so
no command has to say what it waits for. Nothing shows when stderr is not a terminal (a pipe,
a log file, tests), nor while a progress display (progress.LiveProgress) owns the terminal:
its bar already says what runs. stdout is never written.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from rich.console import Console
from rich.status import Status

# A call that answers within this many seconds is never shown: only a wait a person notices.
SHOW_AFTER_SECONDS: Final = 2.0
_TICK_SECONDS: Final = 0.25


@dataclass(frozen=True)
class _Call:
    service: str
    endpoint: str | None
    operation: str
    started: float

    def words(self, now: float) -> str:
        where = f" at {self.endpoint}" if self.endpoint else ""
        return (
            f"waiting for {self.service}{where} ({self.operation}): {now - self.started:.0f} s "
            "(Ctrl-C to stop)"
        )


class CallWatch:
    """The calls in flight (one per thread) and the status line of the oldest that has waited
    long enough. `console` and `clock` are injectable for tests."""

    def __init__(
        self,
        console: Console | None = None,
        *,
        show_after: float = SHOW_AFTER_SECONDS,
        clock: Any = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.show_after = show_after
        self.clock = clock
        self._lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._status: Status | None = None
        self._thread: threading.Thread | None = None
        # Set while a progress display owns the terminal.
        self.suppressed = 0

    @property
    def enabled(self) -> bool:
        return self.console.is_terminal

    def begin(self, service: str, endpoint: str | None, operation: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._calls[threading.get_ident()] = _Call(service, endpoint, operation, self.clock())
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="saga-index-waiting", daemon=True
                )
                self._thread.start()

    def end(self) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._calls.pop(threading.get_ident(), None)

    def text(self) -> str | None:
        """The status line now: the oldest call in flight past `show_after`, or None."""
        with self._lock:
            now = self.clock()
            waiting = [c for c in self._calls.values() if now - c.started >= self.show_after]
            if not waiting or self.suppressed:
                return None
            return min(waiting, key=lambda c: c.started).words(now)

    def _run(self) -> None:
        while True:
            text = self.text()
            if text is None and self._status is not None:
                self._status.stop()
                self._status = None
            elif text is not None:
                if self._status is None:
                    self._status = Status(text, console=self.console)
                    self._status.start()
                else:
                    self._status.update(text)
            with self._lock:
                if not self._calls and self._status is None:
                    self._thread = None
                    return
            time.sleep(_TICK_SECONDS)


WATCH = CallWatch()


def watch_client(client: Any, service: str, endpoint: str | None) -> None:
    """Name `client`'s calls on the terminal while they wait (module docstring)."""

    def before_call(model: Any, **_: Any) -> None:
        WATCH.begin(service, endpoint, model.name)

    def after_call(**_: Any) -> None:
        WATCH.end()

    client.meta.events.register("before-call.*", before_call)
    client.meta.events.register("after-call.*", after_call)
    client.meta.events.register("after-call-error.*", after_call)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No waiting line while the block runs: a progress display owns the terminal."""
    with WATCH._lock:
        WATCH.suppressed += 1
    try:
        yield
    finally:
        with WATCH._lock:
            WATCH.suppressed -= 1


@contextlib.contextmanager
def doing(what: str, console: Console | None = None) -> Iterator[None]:
    """On a terminal, a spinner naming `what` while the block runs (many quick calls that add
    up to a wait: a count over every shard key); nothing elsewhere."""
    console = console or WATCH.console
    if not console.is_terminal:
        yield
        return
    with quiet(), console.status(what):
        yield
