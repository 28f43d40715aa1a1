"""How a long `saga-index` run shows its progress, on stderr only (stdout carries data).

On a terminal (stderr), a live rich bar per step; otherwise (a pipe, a log file, CI) one log
line per step every PROGRESS_LOG_SECONDS, at the first update after the interval has passed
(a log file has no use for a redrawn bar), and one when a step ends.

A step counts `completed` of `total` in a unit (rows, partitions, reads, segments). Its rate is
the average since the step started (completed / elapsed seconds); its ETA is what is left at
that rate, given only when there is a total: without one a step shows its count and rate alone,
and a count that has passed an approximate total (`approximate=True`, e.g. DescribeTable's
ItemCount) has no ETA either.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from saga_index_cli import waiting

log = logging.getLogger("saga_index.cli.progress")

# Non-terminal progress: one log line per step this often, in seconds.
PROGRESS_LOG_SECONDS = 10.0
# The bar's width on a terminal, in cells: what the line leaves it, within these bounds.
BAR_MIN_CELLS, BAR_MAX_CELLS = 20, 40


def format_seconds(seconds: float, *, round_up: bool = False) -> str:
    """`H:MM:SS` in whole seconds, rounded down (time spent), or up (an ETA: it never promises
    less than is left)."""
    whole = max(0, int(-(-seconds // 1) if round_up else seconds // 1))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@dataclass(frozen=True)
class StepReading:
    """Where a step stands at one moment."""

    label: str
    unit: str
    completed: int
    total: int | None
    approximate: bool
    elapsed: float
    detail: str = ""
    # Paused by the operator: the step shows "paused", not a rate or an ETA it does not make.
    paused: bool = False

    @property
    def rate(self) -> float:
        """`unit` per second, averaged since the step started (0.0 before any time passed)."""
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the average rate; None without a total, before any progress, or
        once the count has passed an approximate total."""
        if self.total is None or self.rate <= 0:
            return None
        remaining = self.total - self.completed
        if remaining < 0:
            return None if self.approximate else 0.0
        return remaining / self.rate

    def count_text(self) -> str:
        if self.total is None:
            return f"{self.completed:,} {self.unit}"
        about = "~" if self.approximate else ""
        share = f" ({100 * self.completed / self.total:.1f} %)" if self.total else ""
        return f"{self.completed:,} of {about}{self.total:,} {self.unit}{share}"

    def rate_text(self) -> str:
        if self.paused:
            return "paused"
        return f"{self.rate:,.1f} {self.unit}/s"

    def eta_text(self) -> str:
        """`ETA H:MM:SS`, `ETA unknown` (a total, but no rate yet or passed), or "" (no total)."""
        if self.total is None:
            return ""
        if self.paused:
            return "ETA paused"
        eta = self.eta_seconds
        return "ETA unknown" if eta is None else f"ETA {format_seconds(eta, round_up=True)}"

    def describe(self) -> str:
        """The step as one log line."""
        parts = [self.count_text(), self.rate_text()]
        if self.eta_text():
            parts.append(self.eta_text())
        if self.detail:
            parts.append(self.detail)
        return f"{self.label}: " + ", ".join(parts)

    def describe_end(self) -> str:
        return (
            f"{self.label}: done, {self.completed:,} {self.unit} in "
            f"{format_seconds(self.elapsed)} ({self.rate_text()})"
            + (f", {self.detail}" if self.detail else "")
        )


class ProgressStep:
    """One counter of a LiveProgress (a bar on a terminal). Thread-safe through its display."""

    def __init__(
        self,
        display: LiveProgress,
        task: TaskID,
        *,
        label: str,
        total: int | None,
        unit: str,
        approximate: bool,
    ) -> None:
        self._display = display
        self._task = task
        self.label = label
        self.unit = unit
        self._total = total
        self._approximate = approximate
        self._completed = 0
        self._detail = ""
        # Time spent paused does not count towards the rate (the clock's seconds).
        self._paused_since: float | None = None
        self._paused_seconds = 0.0
        self.started = display.clock()
        self._last_log = self.started
        self._finished = False

    def reading(self) -> StepReading:
        with self._display.lock:
            return self._reading(self._display.clock())

    def _reading(self, now: float) -> StepReading:
        paused = self._paused_seconds
        if self._paused_since is not None:
            paused += now - self._paused_since
        return StepReading(
            label=self.label,
            unit=self.unit,
            completed=self._completed,
            total=self._total,
            approximate=self._approximate,
            elapsed=max(0.0, now - self.started - paused),
            detail=self._detail,
            paused=self._paused_since is not None,
        )

    def update(
        self,
        *,
        completed: int | None = None,
        advance: int = 0,
        total: int | None = None,
        detail: str | None = None,
        paused: bool | None = None,
    ) -> None:
        """Set `completed` (or add `advance`), a new total (None: keep the current one), the
        detail text and whether the step is paused (None: unchanged); on a non-terminal, log
        the step when the display's log interval has passed since it last logged (or
        started)."""
        display = self._display
        with display.lock:
            if paused is not None:
                self._set_paused(paused, display.clock())
            if completed is not None:
                self._completed = completed
            self._completed += advance
            if total is not None:
                self._total = total
            if detail is not None:
                self._detail = detail
            now = display.clock()
            reading = self._reading(now)
            display.render(self._task, reading)
            if not display.live and now - self._last_log >= display.log_interval:
                self._last_log = now
                display.logger.info("%s", reading.describe())

    def _set_paused(self, paused: bool, now: float) -> None:
        if paused and self._paused_since is None:
            self._paused_since = now
        elif not paused and self._paused_since is not None:
            self._paused_seconds += now - self._paused_since
            self._paused_since = None

    def finish(self) -> None:
        """The step ended (all read): a last log line on a non-terminal; once only."""
        display = self._display
        with display.lock:
            if self._finished:
                return
            self._finished = True
            reading = self._reading(display.clock())
            if (reading.total is None or reading.approximate) and reading.completed > 0:
                # The bar of a step that had no exact total ends full, not mid-way.
                display.render(self._task, reading, total=reading.completed)
            if not display.live:
                display.logger.info("%s", reading.describe_end())


class _StepsProgress(Progress):
    """Each step's bar on one line and its detail (what was scanned, re-stamped, ...) on the
    next: on one line the detail would squeeze the bar to a few cells on a 120-column
    terminal."""

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        several = len(self.tasks) > 1
        for task in self.tasks:
            detail = str(task.fields.get("detail") or "")
            if detail:
                label = f"{Text.from_markup(task.description).plain}: " if several else ""
                yield Text(f"  {label}{detail}", no_wrap=True, overflow="ellipsis")


class LiveProgress:
    """The progress of one command: a live bar per step on a terminal (stderr), periodic log
    lines otherwise. Thread-safe: steps may be updated from worker threads.

    `live` (default: whether stderr is a terminal), `log_interval` (default
    PROGRESS_LOG_SECONDS, read when the display is made), `clock` (monotonic seconds) and
    `console` are injectable for tests.
    """

    def __init__(
        self,
        *,
        live: bool | None = None,
        log_interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        console: Console | None = None,
        logger: logging.Logger = log,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal if live is None else live
        self.log_interval = PROGRESS_LOG_SECONDS if log_interval is None else log_interval
        self.clock = clock
        self.logger = logger
        self.lock = threading.RLock()
        self._quiet: contextlib.AbstractContextManager[None] | None = None
        self._progress = _StepsProgress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            # The bar takes what is left of the line, never less than BAR_MIN_CELLS.
            BarColumn(
                bar_width=None,
                table_column=Column(min_width=BAR_MIN_CELLS, max_width=BAR_MAX_CELLS, ratio=1),
            ),
            TextColumn("{task.fields[count]}", markup=False),
            TextColumn("{task.fields[rate]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("{task.fields[eta]}", markup=False),
            console=self.console,
            disable=not self.live,
            # stdout is the data channel: never routed through the bar (to stderr).
            redirect_stdout=False,
            get_time=clock,
        )

    def step(
        self, label: str, *, total: int | None, unit: str, approximate: bool = False
    ) -> ProgressStep:
        """A new step, started now (its rate and ETA count from here)."""
        with self.lock:
            task = self._progress.add_task(
                escape(label), total=total, count="", rate="", eta="", detail=""
            )
            step = ProgressStep(
                self, task, label=label, total=total, unit=unit, approximate=approximate
            )
            self.render(task, step._reading(self.clock()))
            return step

    def render(self, task: TaskID, reading: StepReading, *, total: int | None = None) -> None:
        """Redraw one step's bar (a no-op on a non-terminal, where rich is disabled)."""
        self._progress.update(
            task,
            completed=reading.completed,
            total=reading.total if total is None else total,
            count=reading.count_text(),
            rate=reading.rate_text(),
            eta=reading.eta_text(),
            detail=reading.detail,
        )

    def start(self) -> None:
        self._quiet = waiting.quiet()
        self._quiet.__enter__()
        self._progress.start()

    def stop(self) -> None:
        self._progress.stop()
        if self._quiet is not None:
            self._quiet.__exit__(None, None, None)
            self._quiet = None

    def __enter__(self) -> LiveProgress:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
