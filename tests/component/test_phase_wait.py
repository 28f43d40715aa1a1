"""`phase set --wait` and `phase show --wait` against moto, on an injected clock whose sleep
advances it (nothing really waits): they end once the state is effective, a completing move
waits for its settled switch and is set then, Ctrl-C after the write exits 6 with advice that
works when followed literally, and a "not yet" (exit 5) names the checks that already fail
without waiting for anything."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console

from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index_cli.context import CliContext, CliHooks
from saga_index_cli.main import main
from saga_index_cli.phase.wait import wait_until
from tests.support.backends import Backend
from tests.support.control_fixtures import (
    Clock,
    moto_backend,
    probe_64_shard_keys,
    record_early_backfill,
)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("phase-wait", synthesized_template) as backend:
        yield backend


class Sleeper:
    """The hooks' sleep: advances the clock; `interrupt_after` sleeps, raises Ctrl-C."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.slept: list[float] = []
        self.interrupt_after: int | None = None

    def __call__(self, seconds: float) -> None:
        if self.interrupt_after is not None and len(self.slept) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.slept.append(seconds)
        self.clock.advance(seconds)


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
        self.capsys = capsys
        self.table = dynamo.table_name
        self.clock = Clock()
        self.sleep = Sleeper(self.clock)
        self.hooks = CliHooks(
            identity=lambda _: "tester@host",
            clock=self.clock,
            sleep=self.sleep,
            shard_key_probe=probe_64_shard_keys,
        )

    def __call__(self, *argv: str, table: bool = True) -> tuple[int, str, str]:
        args = (["--table", self.table] if table else []) + list(argv)
        with pytest.raises(SystemExit) as exited:
            main(args, hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> Cli:
    return Cli(capsys, dynamo)


@pytest.fixture
def store(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name)


def test_set_wait_ends_once_the_new_state_is_effective_and_prints_it(
    cli: Cli, store: ControlStore
) -> None:
    start = cli.clock.now

    code, out, err = cli("phase", "set", "migrating", "--reason", "go", "--wait", "--json")

    assert code == 0, err
    doc = json.loads(out)
    assert (doc["phase"], doc["effective"], doc["secondsUntilEffective"]) == ("migrating", True, 0)
    effective_at = store.read().effective_at
    assert effective_at is not None
    assert cli.clock.now >= effective_at
    # It slept exactly until effectiveAt (the change was written at `start`), no longer.
    assert sum(cli.sleep.slept) == pytest.approx((effective_at - start).total_seconds())
    # Off a terminal: quiet lines, the first naming the version and its effectiveAt.
    assert f"version 1 (migrating) takes effect at {format_time(effective_at)}" in err
    assert "done" in err


def test_show_wait_waits_for_the_effective_at_of_the_record(cli: Cli, store: ControlStore) -> None:
    assert cli("phase", "set", "migrating", "--reason", "go")[0] == 0
    assert not cli.sleep.slept

    code, out, _ = cli("phase", "show", "--wait", "--output", "json")

    assert code == 0
    assert json.loads(out)["effective"] is True
    assert cli.sleep.slept  # it did wait, on the clock the record's effectiveAt is judged by
    code, out, _ = cli("phase", "show", "--wait")  # already effective: no wait, text
    assert code == 0
    assert "effective:    true" in out


def test_a_not_yet_names_the_checks_that_already_fail_and_wait_does_not_wait_for_them(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    dynamo.put_saga("old", "p-1")  # on the legacy key: no backfill ever ran
    assert cli("phase", "set", "migrating", "--reason", "go")[0] == 0
    for wait in ((), ("--wait",)):
        code, out, err = cli("phase", "set", "sharded", "--reason", "done", "--json", *wait)

        assert code == 5, err
        refusal = json.loads(out)
        assert refusal["retryLater"] is True
        assert [c["name"] for c in refusal["failed"]] == ["backfill-verified", "no-legacy-rows"]
        assert "no forward backfill has been recorded" in refusal["message"]
        assert "would be refused (exit 3)" in err
        assert not cli.sleep.slept  # nothing waited for a refusal it can already see
        assert store.read().version == 1  # nothing written


def test_a_not_yet_with_nothing_failing_says_so_and_wait_sets_it_once_settled(
    cli: Cli, store: ControlStore
) -> None:
    assert cli("phase", "set", "migrating", "--reason", "go")[0] == 0
    record_early_backfill(store, cli.clock)
    effective_at = store.read().effective_at
    assert effective_at is not None
    settled = effective_at + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS)

    code, out, _ = cli("phase", "set", "sharded", "--reason", "done", "--json")
    assert code == 5
    assert json.loads(out)["failed"] == []

    code, out, err = cli(
        "phase", "set", "sharded", "--reason", "done", "--recheck-delay", "0", "--wait", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["phase"], doc["version"], doc["effective"]) == ("sharded", 2, True)
    assert store.read().transition.changed_at >= settled  # set once the switch settled
    assert "can be set once the switch settles" in err


def test_ctrl_c_after_the_write_exits_6_and_its_advice_works_literally(
    cli: Cli, store: ControlStore
) -> None:
    cli.sleep.interrupt_after = 0

    code, out, err = cli("phase", "set", "migrating", "--reason", "go", "--wait", "--json")

    assert code == 6
    assert json.loads(out)["version"] == 1  # the change stands, and its document is printed
    assert store.read().version == 1
    advice = err.split("Wait for it with `", 1)[1].split("`", 1)[0]
    words = shlex.split(advice)
    assert words[0] == "saga-index"
    cli.sleep.interrupt_after = None
    code, out, _ = cli(*words[1:], "--json", table=False)
    assert code == 0
    assert json.loads(out)["effective"] is True


def test_ctrl_c_while_waiting_before_any_write_exits_1_with_nothing_written(
    cli: Cli, store: ControlStore
) -> None:
    assert cli("phase", "set", "migrating", "--reason", "go")[0] == 0
    cli.sleep.interrupt_after = 0

    code, _, err = cli("phase", "show", "--wait")

    assert code == 1
    assert "interrupted" in err
    assert store.read().version == 1


def test_on_a_terminal_the_wait_is_a_bar_as_wide_as_the_terminal_allows(
    dynamo: Backend,
) -> None:
    clock = Clock()
    sleeper = Sleeper(clock)
    cli = CliContext(
        table=dynamo.table_name,
        endpoint_url=None,
        region=None,
        phase_override=None,
        shards_override=None,
        max_attempts=1,
        hooks=CliHooks(clock=clock, sleep=sleeper),
    )
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)

    wait_until(cli, clock.now + timedelta(seconds=5), "version 1 takes effect", console=console)

    assert sum(sleeper.slept) == pytest.approx(5)
    assert max(sleeper.slept) <= 0.5  # redrawn often enough to count down
    last = screen.getvalue().rsplit("\r", 1)[-1]
    assert last.count("━") >= 40, last
