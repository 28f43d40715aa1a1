"""Progress on stderr: numbered steps, rich bars on a terminal, plain lines otherwise."""

from __future__ import annotations

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


class Stages:
    """Progress on stderr: numbered steps, rich bars on a terminal, plain lines otherwise."""

    def __init__(self, total: int, console: Console) -> None:
        self.total = total
        self.console = console
        self.number = 0

    def step(self, text: str) -> None:
        self.number += 1
        self.console.print(f"[bold]\\[{self.number}/{self.total}][/bold] {text}")

    def note(self, text: str) -> None:
        self.console.print(f"      {text}")

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
