"""What a command waits for, on a terminal: a call is named once it has waited SHOW_AFTER
seconds, the oldest first, never while a progress display owns the terminal, and never off a
terminal."""

from __future__ import annotations

import io

from rich.console import Console

from saga_index_cli.waiting import SHOW_AFTER_SECONDS, CallWatch


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _watch(terminal: bool) -> tuple[CallWatch, _Clock]:
    clock = _Clock()
    console = Console(file=io.StringIO(), force_terminal=terminal)
    return CallWatch(console, clock=clock), clock


def test_a_call_is_named_once_it_has_waited_long_enough() -> None:
    watch, clock = _watch(terminal=True)
    watch.begin("DynamoDB", "http://127.0.0.1:9", "GetItem")
    assert watch.text() is None  # a quick call is never shown
    clock.now += SHOW_AFTER_SECONDS + 1
    assert watch.text() == (
        "waiting for DynamoDB at http://127.0.0.1:9 (GetItem): 3 s (Ctrl-C to stop)"
    )
    watch.end()
    assert watch.text() is None


def test_nothing_is_shown_while_a_progress_display_owns_the_terminal() -> None:
    watch, clock = _watch(terminal=True)
    watch.begin("DynamoDB", None, "Query")
    clock.now += 10
    watch.suppressed += 1  # what waiting.quiet() does to the CLI's watch
    assert watch.text() is None
    watch.suppressed -= 1
    assert watch.text() == "waiting for DynamoDB (Query): 10 s (Ctrl-C to stop)"
    watch.end()


def test_off_a_terminal_nothing_is_tracked() -> None:
    watch, clock = _watch(terminal=False)
    watch.begin("Step Functions", None, "DescribeExecution")
    clock.now += 10
    assert watch.text() is None
