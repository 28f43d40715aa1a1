"""Progress on stderr: numbered steps, rich bars on a terminal, plain lines otherwise; the
library's warnings said once each, as part of the step that logged them."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class StepLog(logging.Handler):
    """Collects the library's warnings (a saga row anomaly, a server without transactions) so
    that each is said once, as a note of the step that logged it, and never as a timestamped
    line breaking into the steps (the in-process CLI's own handler would print one per row,
    per command)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.pending: list[str] = []
        self.said: set[str] = set()
        self._saved: list[tuple[logging.Logger, bool, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.said and message not in self.pending:
            self.pending.append(message)

    def take(self) -> list[str]:
        """The warnings not said yet in this step (each once)."""
        self.acquire()
        try:
            taken, self.pending = self.pending, []
            self.said.update(taken)
        finally:
            self.release()
        return taken

    def new_step(self) -> None:
        self.said.clear()

    def capture(self, prefix: str = "saga_index") -> None:
        """Route every logger under `prefix` here, not to its parent's handlers (again at each
        step: a module imported since has its own); `restore` puts them back."""
        for name in sorted(logging.Logger.manager.loggerDict):
            if not name.startswith(prefix + "."):
                continue
            logger = logging.getLogger(name)
            if self in logger.handlers:
                continue
            self._saved.append((logger, logger.propagate, logger.level))
            logger.addHandler(self)
            logger.propagate = False
            logger.setLevel(logging.WARNING)

    def restore(self) -> None:
        for logger, propagate, level in self._saved:
            logger.removeHandler(self)
            logger.propagate = propagate
            logger.setLevel(level)
        self._saved.clear()


class Stages:
    """Progress on stderr: numbered steps, rich bars on a terminal, plain lines otherwise.

    With a `log` (StepLog), the warnings logged since the last line are said (once each in a
    step) before the next note and before the next step begins."""

    def __init__(self, total: int, console: Console, log: StepLog | None = None) -> None:
        self.total = total
        self.console = console
        self.number = 0
        self.log = log

    def step(self, text: str) -> None:
        self.flush()
        if self.log is not None:
            self.log.new_step()
            self.log.capture()
        self.number += 1
        self.console.print(f"[bold]\\[{self.number}/{self.total}][/bold] {text}")

    def note(self, text: str) -> None:
        self.flush()
        self.console.print(f"      {text}")

    def flush(self) -> None:
        """Say the warnings logged since the last line, each once in this step."""
        if self.log is None:
            return
        for message in self.log.take():
            self.console.print(f"      logged: {message}", markup=False)

    def bar(self, description: str, total: float) -> Progress:
        progress = Progress(
            TextColumn("      {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            disable=not self.console.is_terminal,
        )
        progress.add_task(description, total=total)
        return progress
