"""`saga-index open-index show|set` and `status`'s open index against moto: the exit codes (2
before any call for bad input, 3 refused, 5 not yet with `failed`), the JSON shapes, a refusal
writing nothing, the readiness read from DescribeTable; an open-index run's lease as the
operator sees it (`status`, `backfill --stop`) and its moves in `phase show --history`. Clocks
are injected."""

from __future__ import annotations

import getpass
import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from saga_index.layout_change.lease import acquire_lease
from saga_index.layout_change.record import BackfillKind, ControlStore
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, moto_backend, probe_64_shard_keys
from tests.support.open_index import (
    BUILDING,
    MISSING,
    Verdict,
    add_open_index,
    drop_open_index,
    readiness_of,
)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("open-index-cli", synthesized_template) as backend:
        yield backend


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
        self.capsys, self.table, self.clock = capsys, dynamo.table_name, Clock()
        self.calls: list[str] = []
        self.hooks = CliHooks(
            identity=lambda _: "tester@host",
            clock=self.clock,
            sleep=self._sleep,
            shard_key_probe=probe_64_shard_keys,
        )

    def _sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(["--table", self.table, *argv], hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err

    def json(self, *argv: str) -> tuple[int, dict[str, Any], str]:
        code, out, err = self(*argv, "--output", "json")
        (line,) = out.splitlines()
        return code, json.loads(line), err

    def settle(self, store: ControlStore) -> None:
        effective = store.read().effective_at
        assert effective is not None
        self.clock.now = effective + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS + 1)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> Cli:
    return Cli(capsys, dynamo)


@pytest.fixture
def store(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name)


def test_given_no_open_index_on_the_table_then_adding_is_refused_with_exit_2(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    drop_open_index(dynamo.client, dynamo.table_name)
    code, _, err = cli("open-index", "set", "adding", "--reason", "r")
    assert code == 2
    assert "renewal-saga-open-index does not exist on table" in err
    assert "Nothing written" in err
    assert store.read().version == 0


def test_given_bad_input_then_exit_2_before_any_call_and_nothing_written(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    code, _, err = cli("open-index", "set", "adding", "--reason", "r", "--shards", "12")
    assert code == 2
    assert "power of two" in err
    code, _, err = cli("open-index", "set", "sideways", "--reason", "r")
    assert code == 2
    code, _, err = cli("open-index", "set", "open", "--reason", "r")
    assert code == 2
    assert "not an allowed move" in err
    assert store.read().version == 0


def _saga_ids(result: tuple[int, str, str]) -> list[str]:
    code, out, err = result
    assert code == 0, err
    return sorted(json.loads(line)["sagaId"] for line in out.splitlines())


def _history_items(dynamo: Backend) -> int:
    return sum(1 for i in dynamo.scan_all() if i["SK"]["S"].startswith("HISTORY#"))


def test_another_n_is_refused_naming_the_way_to_it_and_the_way_works(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    assert cli("open-index", "set", "adding", "--reason", "add", "--shards", "8")[0] == 0
    before, items = store.read(), _history_items(dynamo)
    for target in ("adding", "open", "removing"):
        code, _, err = cli("open-index", "set", target, "--reason", "r", "--shards", "16")
        assert code == 2, err
        assert "shard count is 8 and --shards 16 disagrees; nothing was written" in err
        assert (
            "`saga-index open-index set removing --reason ...`, then `saga-index open-index "
            "backfill` (in removing it removes every stamp), then `saga-index open-index set off "
            "--reason ...`, then `saga-index open-index set adding --shards 16 --reason ...`"
        ) in err
    assert (store.read(), _history_items(dynamo)) == (before, items)

    # In removing the way starts at its backfill; followed as printed, it reaches N = 16.
    assert cli("open-index", "set", "removing", "--reason", "back")[0] == 0
    code, _, err = cli("open-index", "set", "adding", "--reason", "r", "--shards", "16")
    assert code == 2
    assert "(before `open`): `saga-index open-index backfill`" in err
    cli.settle(store)
    assert cli("open-index", "backfill", "--rate", "1000")[0] == 0
    assert cli("open-index", "set", "off", "--reason", "gone")[0] == 0
    code, doc, _ = cli.json("open-index", "set", "adding", "--reason", "again", "--shards", "16")
    assert (code, doc["openIndexShardCount"]) == (0, 16)

    # Once open, its N is fixed for good.
    cli.settle(store)
    assert cli("open-index", "set", "open", "--reason", "read it")[0] == 0
    before, items = store.read(), _history_items(dynamo)
    code, _, err = cli("open-index", "set", "open", "--reason", "r", "--shards", "32")
    assert code == 2
    assert "Its N is fixed once it is open: `open` is the end" in err
    assert (store.read(), _history_items(dynamo)) == (before, items)


def test_an_index_not_ready_refuses_adding_and_open_and_writes_nothing(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    """DescribeTable's answers moto never gives (an index CREATING, Backfilling) stand in through
    the CLI's readiness hook; the real one reads moto's table between them."""
    add_open_index(dynamo.client, dynamo.table_name)
    ready = cli.hooks.open_index_readiness

    def refused(target: str, verdict: Verdict, code: int, words: str) -> None:
        cli.hooks = replace(cli.hooks, open_index_readiness=readiness_of(verdict))
        before, items = store.read(), _history_items(dynamo)
        exited, _, err = cli("open-index", "set", target, "--reason", "r")
        assert (exited, words in err, "Nothing written" in err) == (code, True, True), err
        assert (store.read(), _history_items(dynamo)) == (before, items)
        cli.hooks = replace(cli.hooks, open_index_readiness=ready)

    refused("adding", BUILDING, 5, "is CREATING (Backfilling)")
    refused("adding", MISSING, 2, "add it")
    assert cli("open-index", "set", "adding", "--reason", "add")[0] == 0
    cli.settle(store)
    refused("open", BUILDING, 5, "is CREATING (Backfilling)")
    refused("open", MISSING, 2, "add it")
    assert cli("open-index", "set", "open", "--reason", "read it")[0] == 0


def test_the_ladder_through_the_cli(cli: Cli, store: ControlStore, dynamo: Backend) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    dynamo.put_saga("old", "p-1")  # an open saga no writer has stamped yet
    code, doc, _ = cli.json("open-index", "show")
    assert (code, doc["openIndex"], doc["routing"]["enumerations"]) == (0, "off", "gsi4")

    code, doc, _ = cli.json("open-index", "set", "adding", "--reason", "add it", "--shards", "8")
    assert code == 0
    assert (doc["openIndex"], doc["openIndexShardCount"], doc["changed"]) == ("adding", 8, True)
    assert doc["routing"]["stamps"] is None  # before effectiveAt
    assert doc["routing"]["stampsFromEffectiveAt"] == "adding(8)"
    code, doc, _ = cli.json("open-index", "set", "adding", "--reason", "again")
    assert (code, doc["changed"]) == (0, False)

    code, doc, err = cli.json("open-index", "set", "open", "--reason", "read it")
    assert code == 5
    assert doc["retryLater"] is True
    assert doc["failed"] == []
    assert "in-flight margin" in err

    cli.settle(store)
    code, doc, _ = cli.json("open-index", "set", "open", "--reason", "read it")
    assert code == 3
    assert doc["refused"] is True
    assert doc["failed"][0]["name"] == "open-index-parity"
    assert "RSAGA#old" in doc["failed"][0]["detail"]
    version = store.read().version
    # Adding: `sagas open` enumerates over GSI4, the unstamped saga included.
    assert _saga_ids(cli("sagas", "open")) == ["old"]

    code, doc, _ = cli.json("open-index", "backfill", "--dry-run")
    assert (code, doc["stamped"], doc["dryRun"], doc["holder"]) == (0, 1, True, None)
    code, _, err = cli("open-index", "backfill", "--segments", "0")
    assert code == 2
    assert "--segments" in err
    code, doc, _ = cli.json("open-index", "backfill", "--rate", "10")
    assert (code, doc["direction"], doc["stamped"], doc["scanned"]) == (0, "stamp", 1, 1)
    assert (doc["verified"], doc["complete"], doc["maxWritesPerSecond"]) == (True, True, 10.0)
    assert doc["examples"] == ["RSAGA#old: stamp"]
    assert "/" in doc["holder"]  # user@host/pid: this process held the lease
    assert store.read().lease is None
    stored = dynamo.get("RSAGA#old", "META")
    assert stored is not None
    assert stored["OpenSagaPK"] == {"S": "RenewalSagaOpen#6"}  # p-1 is shard 6 of 8
    code, doc, _ = cli.json("open-index", "set", "open", "--reason", "read it")
    assert code == 0
    assert doc["routing"]["enumerations"] == "open-index"
    assert doc["checks"][0]["passed"] is True
    assert store.read().version == version + 1

    code, _, err = cli("open-index", "set", "removing", "--reason", "back")
    assert code == 2
    assert "`open` is the end" in err
    assert store.read().version == version + 1

    # Open: a new process's `sagas open` reads the open index (an open saga a writer left
    # unstamped is not in it), while `sagas by-person` stays one Query on GSI4.
    dynamo.put_saga("unstamped", "p-2")  # the layout is legacy: GSI4's one partition
    assert _saga_ids(cli("sagas", "open")) == ["old"]
    assert _saga_ids(cli("sagas", "by-person", "p-2")) == ["unstamped"]

    code, doc, _ = cli.json("status", "--no-counts")
    assert doc["openIndex"] == {
        "state": "open",
        "shardCount": 8,
        # Until open's effectiveAt writers stamp as adding did: the same key.
        "stamps": "adding(8)",
        "enumerations": "open-index",
    }
    code, out, _ = cli("phase", "show")
    assert "open index:   open(8)" in out


def test_given_wait_then_a_not_yet_waits_for_retry_at_and_moves(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    assert cli("open-index", "set", "adding", "--reason", "add")[0] == 0
    assert cli("open-index", "set", "removing", "--reason", "back")[0] == 0
    code, doc, _ = cli.json("open-index", "set", "off", "--reason", "done", "--wait")
    assert code == 0
    assert doc["openIndex"] == "off"
    assert doc["effective"] is True


def test_a_dead_local_open_index_run_is_shown_as_one_and_backfill_stop_releases_its_lease(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    dynamo.put_saga("old", "p-1")
    assert cli("open-index", "set", "adding", "--reason", "add", "--shards", "8")[0] == 0
    cli.settle(store)
    # A local open-index run killed while it held the lease: its pid is above the kernel's
    # pid_max, so no process has it.
    holder = f"{getpass.getuser()}@{socket.gethostname()}/4999999"
    acquire_lease(
        store,
        holder=holder,
        token="killed",
        direction="forward",
        clock=cli.clock,
        kind=BackfillKind.OPEN_INDEX,
    )

    code, doc, _ = cli.json("status", "--no-counts")
    lease = doc["backfill"]["lease"]
    assert (code, lease["holder"], lease["kind"], lease["live"]) == (0, holder, "open-index", True)
    code, out, _ = cli("status", "--no-counts")
    assert f"lease: {holder} (open-index run, forward), LIVE" in out
    assert f"an open-index backfill runs ({holder})" in out
    code, out, err = cli("backfill", "--stop", "--json")
    assert code == 0, err
    released = json.loads(out)
    assert (released["holder"], released["kind"], released["leaseReleased"]) == (
        holder,
        "open-index",
        True,
    )
    assert "is gone from this host" in released["why"]
    assert store.read().lease is None
    code, out, _ = cli.json("status", "--no-counts")
    assert out["backfill"]["lease"] is None

    # The advice, literally: the open-index backfill runs again and finishes the move.
    code, doc, _ = cli.json("open-index", "backfill", "--rate", "1000")
    assert (code, doc["stamped"], doc["verified"]) == (0, 1, True)


def test_phase_show_history_prints_an_open_index_move_as_what_it_is(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    add_open_index(dynamo.client, dynamo.table_name)
    assert cli("open-index", "set", "adding", "--reason", "add", "--shards", "8")[0] == 0
    assert cli("open-index", "set", "removing", "--reason", "back")[0] == 0
    cli.settle(store)
    assert cli("open-index", "set", "off", "--reason", "gone")[0] == 0
    assert cli("phase", "set", "migrating", "--reason", "shard it")[0] == 0

    code, doc, _ = cli.json("phase", "show", "--history")
    assert code == 0
    history = [(h["from"], h["to"], h["moved"], h["change"]) for h in doc["history"]]
    assert history == [
        ("legacy", "legacy", "open-index", "openIndex off -> adding(8)"),
        ("legacy", "legacy", "open-index", "openIndex adding(8) -> removing(8)"),
        ("legacy", "legacy", "open-index", "openIndex removing(8) -> off"),
        ("legacy", "migrating", "layout", "legacy -> migrating"),
    ]
    code, out, _ = cli("phase", "show", "--history")
    lines = [line for line in out.splitlines() if line.startswith("  v")]
    assert [line.split(" at ")[0] for line in lines] == [
        "  v1: openIndex off -> adding(8)",
        "  v2: openIndex adding(8) -> removing(8)",
        "  v3: openIndex removing(8) -> off",
        "  v4: legacy -> migrating",
    ]
