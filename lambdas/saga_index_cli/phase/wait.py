"""`--wait` of `phase set` and `phase show`: wait until the record's state is effective (its
effectiveAt has passed, so every process follows it), re-reading the record when the wait ends
(another change may have landed meanwhile, with an effectiveAt of its own).

The wait shows itself on stderr only: a rich bar counting down on a terminal, otherwise one
quiet log line when it starts, one every NOTE_SECONDS and one when it ends. It only reads: Ctrl-C
leaves nothing half-written, and the caller says what stands (`interrupted_after_write`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn

from saga_index.layout_change.record import ControlState, format_time
from saga_index_cli import waiting
from saga_index_cli.context import CliContext
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.progress import format_seconds

log = logging.getLogger("saga_index.cli.progress")

# Off a terminal: one line this often while waiting, in seconds.
NOTE_SECONDS = 15.0
# On a terminal: the bar is redrawn this often, in seconds.
_TICK_SECONDS = 0.5


class _Countdown:
    """The display of one wait: a bar on a terminal, log lines otherwise."""

    def __init__(self, what: str, total: float, console: Console) -> None:
        self.what = what
        self.total = total
        self.live = console.is_terminal
        self._last_note = total
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(bar_width=None),
            TextColumn("{task.fields[left]}", markup=False),
            console=console,
            disable=not self.live,
            redirect_stdout=False,
            expand=True,
        )
        self._task: TaskID | None = None

    @contextmanager
    def shown(self) -> Iterator[_Countdown]:
        if not self.live:
            log.info("%s: waiting %s", self.what, format_seconds(self.total, round_up=True))
            yield self
            return
        with waiting.quiet(), self._progress:
            self._task = self._progress.add_task(self.what, total=self.total, left="")
            yield self

    def update(self, left: float) -> None:
        text = f"{format_seconds(left, round_up=True)} left"
        if self._task is not None:
            self._progress.update(self._task, completed=self.total - left, left=text)
        elif self._last_note - left >= NOTE_SECONDS:
            self._last_note = left
            log.info("%s: %s", self.what, text)


def wait_until(
    cli: CliContext, moment: datetime, what: str, *, console: Console | None = None
) -> None:
    """Sleep until the wall clock (cli.now) reaches `moment`, showing `what` on stderr
    (`console`: tests). KeyboardInterrupt (Ctrl-C) ends it; nothing is written either way."""
    total = (moment - cli.now()).total_seconds()
    if total <= 0:
        return
    countdown = _Countdown(what, total, console or Console(stderr=True))
    with countdown.shown():
        while (left := (moment - cli.now()).total_seconds()) > 0:
            countdown.update(left)
            cli.hooks.sleep(min(left, _TICK_SECONDS if countdown.live else NOTE_SECONDS))
        countdown.update(0.0)
    if not countdown.live:
        log.info("%s: done", what)


def wait_until_effective(cli: CliContext, state: ControlState) -> ControlState:
    """The record once its state is effective: `state` itself when it already is, else the
    record read again after its effectiveAt (again until the one read is effective)."""
    while state.effective_at is not None and cli.now() < state.effective_at:
        wait_until(
            cli,
            state.effective_at,
            f"version {state.version} ({state.phase.value}) takes effect at "
            f"{format_time(state.effective_at)}",
        )
        state = cli.reread_state()
    return state


def interrupted_after_write(cli: CliContext, state: ControlState) -> click.exceptions.Exit:
    """Ctrl-C while `phase set --wait` waited for the change it wrote: the change stands (a
    written record is never half-written), it is just not yet effective. Exit 6, and the
    command that waits for it."""
    at = format_time(state.effective_at) if state.effective_at else "once it is read"
    click.echo(
        f"saga-index: interrupted while waiting: version {state.version} (phase "
        f"{state.phase.value}) is written and takes effect at {at}; nothing else was done. "
        f"Wait for it with `{cli.command_prefix()} phase show --wait`",
        err=True,
    )
    return click.exceptions.Exit(ExitCode.PARTIAL)
