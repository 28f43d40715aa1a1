"""One seed, one thread at a time: the real code runs in threads that park at every DynamoDB
call, and the scheduler lets exactly one of them run to its next call.

Why threads that park, not re-written processes: the code under test (the provider, the writer,
the repository, the backfill's segment loop, the lease keeper's heartbeat loop) is ordinary
blocking code. Each simulated process runs it on its own thread; the table's botocore hook parks
the calling thread before every request (`Task.park`) and the scheduler resumes one parked task
per step. Nothing runs between steps, so the order of every request, and so every answer, is a
function of the seed alone. A pause is a task the scheduler does not resume for a while (its
in-memory state, and any decision it made before the pause, intact); a crash raises `Crashed` in
the parked thread, so the process makes no further request, not even a clean-up.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.sim.clock import VirtualTime

# A task that does not park again within this many real seconds is a bug in the harness (or a
# real wait in the code under test that bypasses the simulated clock): fail loudly.
PARK_TIMEOUT_SECONDS = 20.0


_BY_THREAD: dict[int, Task] = {}


class Crashed(BaseException):
    """Raised in a crashed task's thread at its next park: it unwinds without a request."""


class HarnessError(AssertionError):
    """The simulation itself went wrong (a task did not park, a task raised a bug)."""


@dataclass
class Task:
    """One thread of a simulated process."""

    name: str
    body: Callable[[], None]
    time: VirtualTime
    label: str = "start"
    wake_at: float = 0.0
    done: bool = False
    killed: bool = False
    error: str | None = None
    _go: threading.Event = field(default_factory=threading.Event, repr=False)
    _back: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name=f"sim-{self.name}", daemon=True)
        self._thread.start()
        self._wait_back()

    @staticmethod
    def current() -> Task | None:
        """The task whose thread is calling (None: the scheduler's own thread)."""
        return _BY_THREAD.get(threading.get_ident())

    def _main(self) -> None:
        _BY_THREAD[threading.get_ident()] = self
        try:
            self.park("start")
            self.body()
        except Crashed:
            pass
        except BaseException:  # noqa: BLE001 - a bug in the code under test: reported by run()
            self.error = traceback.format_exc()
        finally:
            _BY_THREAD.pop(threading.get_ident(), None)
            self.done = True
            self.label = "done"
            self._back.set()

    # ---- called on the task's own thread ---------------------------------------------------

    def park(self, label: str, wake_at: float | None = None) -> None:
        """Hand the turn back; return when the scheduler resumes this task."""
        if self.killed:
            raise Crashed(self.name)
        self.label = label
        self.wake_at = self.time.now if wake_at is None else wake_at
        self._back.set()
        self._go.wait()
        self._go.clear()
        if self.killed:
            raise Crashed(self.name)

    def sleep(self, seconds: float) -> None:
        self.park(f"sleep {seconds:.2f}s", self.time.now + max(0.0, seconds))

    # ---- called by the scheduler -----------------------------------------------------------

    def resume(self) -> None:
        self._back.clear()
        self._go.set()
        self._wait_back()

    def kill(self) -> None:
        """Crash: the thread unwinds at its park without another request."""
        if self.done:
            return
        self.killed = True
        self.resume()
        if self._thread is not None:
            self._thread.join(PARK_TIMEOUT_SECONDS)

    def _wait_back(self) -> None:
        if not self._back.wait(PARK_TIMEOUT_SECONDS):
            frame = None
            if self._thread is not None and self._thread.ident is not None:
                frame = sys._current_frames().get(self._thread.ident)
            where = "".join(traceback.format_stack(frame)) if frame is not None else "?"
            raise HarnessError(
                f"task {self.name} did not park within {PARK_TIMEOUT_SECONDS} s; it is at:\n{where}"
            )
