"""A record that cannot be lost or wedged, through `saga-index phase|status` on moto: history is
written before STATE (an intent), an applied move never exits as lost, a failed STATE write is
told apart from an applied one, a lost control partition is rebuilt from the rows (or refused
when they are ambiguous), and an unparseable STATE item is shown and rewritten from history.

Failures are injected with botocore before-send hooks on the CLI's own client (--max-attempts 1:
a throttle fails the request at once)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from saga_index.index import keys
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.shard import shard
from saga_index.layout_change.record.errors import ControlRecordLostError
from saga_index.layout_change.record.items import state_key
from saga_index.layout_change.record.store import ControlStore
from saga_index.store.dynamo.codec import serialize
from saga_index_cli import context
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, moto_backend, probe_64_shard_keys, set_phase
from tests.support.control_seed import delete_state, seed_state

S16, S32 = Layout.sharded(16), Layout.sharded(32)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("record-safety", synthesized_template) as backend:
        yield backend


@pytest.fixture
def store(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name)


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], dynamo: Backend) -> None:
        self.capsys = capsys
        self.table = dynamo.table_name
        self.hooks = CliHooks(identity=lambda _: "tester@host", clock=Clock())

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(["--table", self.table, "--max-attempts", "1", *argv], hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err

    def json(self, *argv: str) -> tuple[int, dict[str, Any], str]:
        code, out, err = self(*argv, "--json")
        (line,) = out.splitlines()
        return code, json.loads(line), err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> Cli:
    return Cli(capsys, dynamo)


class FailingCalls:
    """Every matching call of a client fails in its before-call hook, before it reaches the
    table: botocore raises a service failure as it would DynamoDB's, nothing is written (not a
    throttle or a conflict: the control writes retry those, tests/component/
    test_control_write_retries.py)."""

    def __init__(
        self, client: Any, operation: str, match: Callable[[dict[str, Any]], bool]
    ) -> None:
        self.operation = operation
        self.match = match
        self.failed = 0
        client.meta.events.register(f"before-call.dynamodb.{operation}", self._hook)

    def _hook(self, params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params.get("body") or b"{}")
        if self.match(body):
            self.failed += 1
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "Internal server error"}},
                self.operation,
            )


def fail_cli_calls(
    monkeypatch: pytest.MonkeyPatch, operation: str, match: Callable[[dict[str, Any]], bool]
) -> list[FailingCalls]:
    """Every matching call of the CLI's DynamoDB client fails (the test's own client does
    not)."""
    injectors: list[FailingCalls] = []
    original = context.make_client

    def make(**kwargs: Any) -> Any:
        client = original(**kwargs)
        injectors.append(FailingCalls(client, operation, match))
        return client

    monkeypatch.setattr(context, "make_client", make)
    return injectors


def history_put(applied: bool) -> Callable[[dict[str, Any]], bool]:
    def match(body: dict[str, Any]) -> bool:
        item = body.get("Item", {})
        return item.get("SK", {}).get("S", "").startswith("HISTORY#") and item.get("applied") == {
            "BOOL": applied
        }

    return match


def state_update(body: dict[str, Any]) -> bool:
    return body.get("Key", {}).get("SK") == {"S": "STATE"}


def sharded_16(dynamo: Backend) -> None:
    seed_state(dynamo.client, dynamo.table_name, S16, version=2, previous=(LEGACY, S16))


# ---- case 3: no state without its history ------------------------------------------------------


def test_a_failed_history_write_after_the_state_write_exits_0_and_restore_follows_it(
    cli: Cli, store: ControlStore, dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given sharded(16), and every HISTORY write that would mark an item applied failing
    sharded_16(dynamo)
    injectors = fail_cli_calls(monkeypatch, "PutItem", history_put(applied=True))
    # When the re-shard is set
    code, doc, err = cli.json("phase", "set", "resharding", "--shards", "32", "--reason", "split")
    # Then the move is applied and says so: exit 0, a warning naming what failed
    assert sum(i.failed for i in injectors) >= 1
    assert code == 0
    assert (doc["version"], doc["phase"], doc["historyWritten"]) == (3, "resharding", False)
    assert "(HISTORY version 3) is still an unconfirmed intent" in doc["warnings"][0]
    assert "WARNING: move applied (version 3)" in err
    assert "lost the race" not in err
    # And the history item of version 3 exists, as an unconfirmed intent
    entry = store.history_entry(3)
    assert entry is not None
    assert (entry.applied, entry.abandoned) == (False, False)
    # When STATE is deleted, the fallback and the restore follow version 3, the applied state
    monkeypatch.undo()
    delete_state(dynamo.client, dynamo.table_name)
    missing = store.read()
    assert (missing.condition.value, missing.version, missing.phase.value) == (
        "missing",
        3,
        "resharding",
    )
    code, doc, err = cli.json("phase", "restore")
    assert code == 0
    assert (doc["restoredFrom"], doc["version"], doc["phase"]) == ("history", 3, "resharding")
    assert doc["movingTo"] == {"layout": "sharded", "shardCount": 32}
    # And the restore settled the intent: version 3 is applied now
    settled = store.history_entry(3)
    assert settled is not None
    assert settled.applied


def test_a_failed_state_write_exits_1_not_applied_and_restore_follows_the_applied_version(
    cli: Cli, store: ControlStore, dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given sharded(16), and the STATE write failing
    sharded_16(dynamo)
    fail_cli_calls(monkeypatch, "UpdateItem", state_update)
    code, out, err = cli("phase", "set", "resharding", "--shards", "32", "--reason", "split")
    # Then it is not applied and says so (not "lost the race": nobody else moved the record);
    # the service refused the call, so the command could not complete (exit 4)
    assert (code, out) == (4, "")
    assert "the move was NOT applied" in err
    assert "marked abandoned" in err
    assert "lost the race" not in err
    assert store.read().version == 2
    entry = store.history_entry(3)
    assert entry is not None
    assert (entry.applied, entry.abandoned) == (False, True)
    # And `phase show --history` tells the abandoned intent from the applied versions
    monkeypatch.undo()
    code, doc, _ = cli.json("phase", "show", "--history")
    assert code == 0
    assert [(h["version"], h["status"], h["applied"]) for h in doc["history"]] == [
        (2, "applied", True),
        (3, "abandoned", False),
    ]
    # When STATE is deleted, the fallback and the restore follow version 2, never the intent
    delete_state(dynamo.client, dynamo.table_name)
    assert (store.read().version, store.read().phase.value) == (2, "sharded")
    code, doc, _ = cli.json("phase", "restore")
    assert (code, doc["version"], doc["phase"], doc["shardCount"]) == (0, 2, "sharded", 16)
    # And the same change, set again, takes the abandoned slot over and is applied
    code, doc, _ = cli.json("phase", "set", "resharding", "--shards", "32", "--reason", "again")
    assert (code, doc["version"], doc["historyWritten"], doc["warnings"]) == (0, 3, True, [])
    again = store.history_entry(3)
    assert again is not None
    assert again.applied
    assert again.transition.reason == "again"


def test_a_failed_first_state_write_is_not_applied_and_the_same_command_works_again(
    cli: Cli, store: ControlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a table never migrated, and its first STATE write failing
    cli.hooks = replace(cli.hooks, shard_key_probe=probe_64_shard_keys)
    fail_cli_calls(monkeypatch, "UpdateItem", state_update)
    code, out, err = cli("phase", "set", "migrating", "--reason", "start")
    # Then it is reported as NOT applied (exit 4: the service refused the call): no STATE item
    # holds it, whatever the history says
    assert (code, out) == (4, "")
    assert "the move was NOT applied" in err
    assert store.read_raw_state() is None
    entry = store.history_entry(1)
    assert entry is not None
    assert (entry.applied, entry.abandoned) == (False, True)
    assert store.read().condition.value == "never-migrated"
    # And the same command, run again, takes the slot over and is applied: no restore needed
    monkeypatch.undo()
    code, doc, err = cli.json("phase", "set", "migrating", "--reason", "again")
    assert (code, doc["version"], doc["historyWritten"], doc["changed"]) == (0, 1, True, True)
    again = store.history_entry(1)
    assert again is not None
    assert (again.applied, again.transition.reason) == (True, "again")


def test_a_failed_intent_write_changes_nothing_and_never_says_lost_the_race(
    cli: Cli, store: ControlStore, dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    sharded_16(dynamo)
    fail_cli_calls(monkeypatch, "PutItem", history_put(applied=False))
    code, out, err = cli("phase", "set", "resharding", "--shards", "32", "--reason", "split")
    # Could not complete (exit 4: the service refused the call), and nothing was applied
    assert (code, out) == (4, "")
    assert "InternalServerError" in err
    # Could not complete (exit 4: the service refused the call), and nothing was applied
    assert (code, out) == (4, "")
    assert "InternalServerError" in err
    assert "the move was NOT applied" in err
    assert "lost the race" not in err
    assert store.read().version == 2
    assert store.history_entry(3) is None


def test_a_lost_race_settles_the_winner_into_the_slot_and_exits_1_naming_its_version(
    cli: Cli, store: ControlStore, dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:

    sharded_16(dynamo)
    other = ControlStore(dynamo.new_client(), dynamo.table_name)
    original = ControlStore.compare_and_set

    def lose(self: ControlStore, expected_version: int, transition: Any) -> bool:
        # The other operator's change lands after this one's intent, before its STATE write.
        if self is not other:
            monkeypatch.setattr(ControlStore, "compare_and_set", original)
            set_phase(other, "rolling-back", changed_by="other", reason="abort instead")
        return original(self, expected_version, transition)

    monkeypatch.setattr(ControlStore, "compare_and_set", lose)
    code, _, err = cli("phase", "set", "resharding", "--shards", "32", "--reason", "mine")
    assert code == 1
    assert "lost the race" in err
    assert "to version 3" in err
    entry = store.history_entry(3)
    assert entry is not None
    assert entry.applied
    assert (entry.transition.changed_by, entry.transition.phase.value) == ("other", "rolling-back")


# ---- case 4: a lost control partition ------------------------------------------------------------


def plant_sharded_rows(dynamo: Backend, shard_count: int, people: int = 40) -> None:
    for n in range(people):
        person = f"person-{n}"
        dynamo.put_saga(f"s{n}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, shard_count))


def test_the_first_migrating_refuses_when_rows_already_carry_shard_keys(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    # Given sharded(16) rows and no control item at all (the partition was deleted)
    plant_sharded_rows(dynamo, 16)
    assert store.read().version == 0
    code, out, _err = cli("phase", "set", "migrating", "--shards", "32", "--reason", "fresh start")
    # Then the move is refused, naming the keys and rows, and nothing is written
    assert code == 3
    doc = json.loads(out)
    assert doc["refused"] is True
    (failed,) = doc["failed"]
    assert (failed["name"], failed["passed"]) == ("no-rows-on-shard-keys", False)
    assert "shard key(s) carry rows: RenewalSaga#" in failed["detail"]
    assert "RSAGA#s" in failed["detail"]
    assert "phase restore" in failed["detail"]
    assert store.read().version == 0
    assert store.history_entries() == []


def test_a_lost_control_partition_fails_every_read_loudly_until_restored(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    # Given sharded(16) rows and no control item at all (the partition was deleted after the
    # migration completed)
    plant_sharded_rows(dynamo, 16)
    # Then a read does not answer "0 sagas" from the empty legacy key: it fails, naming why
    for argv in (("sagas", "all"), ("sagas", "open"), ("sagas", "by-person", "person-1")):
        code, out, err = cli(*argv)
        assert (code, out) == (1, ""), err
        assert "the control record is lost" in err
        assert "phase restore" in err
    with pytest.raises(ControlRecordLostError):  # a store readers and writers route by
        ControlStore(dynamo.client, dynamo.table_name, refuse_lost=True).read()
    assert store.read().version == 0  # the plain read judges the rows (drift, phase set)
    # And once restored, the same reads answer right
    assert cli.json("phase", "restore")[0] == 0
    code, out, err = cli("sagas", "all")
    assert code == 0, err
    assert sum('"sagaId"' in line for line in out.splitlines()) == 40


def test_restore_with_no_history_rebuilds_sharded_n_from_the_rows(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    plant_sharded_rows(dynamo, 16)
    code, doc, err = cli.json("phase", "restore")
    assert code == 0
    assert (doc["restoredFrom"], doc["phase"], doc["shardCount"], doc["version"]) == (
        "rows",
        "sharded",
        16,
        1,
    )
    assert doc["reason"] == "restored from rows"
    assert doc["requests"] == 1 + 1024
    entry = store.history_entry(1)
    assert entry is not None
    assert entry.applied
    assert "restored" in err


def test_restore_from_rows_on_both_sides_is_migrating_n(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    # Given sharded(32) rows, and a row a writer stamped on the legacy key after the loss
    plant_sharded_rows(dynamo, 32, people=80)
    dynamo.put_saga("late", "p-late")
    code, doc, _ = cli.json("phase", "restore")
    assert code == 0
    assert (doc["phase"], doc["movingTo"]) == ("migrating", {"layout": "sharded", "shardCount": 32})
    assert doc["routing"]["reads"] == ["legacy", "sharded(32)"]


def half_split_rows(dynamo: Backend) -> list[str]:
    """A split 16 -> 32 half done, with its control partition lost: persons whose key moves
    ("m-*") moved, others ("z-*") not yet, and on every lower key a person whose key stays
    ("a-*", first in the index's order), so the one row per key a probe reads fits
    sharded(32) everywhere. Returns the persons not yet moved."""
    stay = [p for p in (f"a-{n:04}" for n in range(2000)) if shard(p, 32) < 16]
    moved = [p for p in (f"m-{n:04}" for n in range(2000)) if shard(p, 32) >= 16]
    unmoved = [p for p in (f"z-{n:04}" for n in range(2000)) if shard(p, 32) >= 16]
    for k in range(16):
        person = next(p for p in stay if shard(p, 32) == k)
        dynamo.put_saga(f"a{k}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, 32))
    for k in range(16, 32):
        person = next(p for p in moved if shard(p, 32) == k)
        dynamo.put_saga(f"m{k}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, 32))
    left = unmoved[:6]
    for n, person in enumerate(left):
        dynamo.put_saga(f"z{n}", person, gsi4pk=keys.shard_gsi4pk_for_person(person, 16))
    return left


def test_restore_from_rows_in_the_middle_of_a_split_restores_the_move_and_hides_none(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    unmoved = half_split_rows(dynamo)
    code, doc, err = cli.json("phase", "restore")
    # Then not sharded(32), which hides the rows not yet moved: the re-shard between the two
    assert code == 0, err
    assert (doc["phase"], doc["shardCount"], doc["movingTo"]) == (
        "resharding",
        16,
        {"layout": "sharded", "shardCount": 32},
    )
    assert f"{len(unmoved)} of them sit on their sharded(16) key" in doc["detail"]
    for n, person in enumerate(unmoved):
        code, out, err = cli("sagas", "by-person", person)
        assert code == 0, err
        assert f"RSAGA#z{n}" in out


def test_restore_from_rows_of_three_layouts_is_refused_naming_them(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    half_split_rows(dynamo)
    dynamo.put_saga("late", "p-late")  # and a writer that followed "never migrated"
    code, out, _ = cli("phase", "restore")
    assert code == 3
    (failed,) = json.loads(out)["failed"]
    assert failed["name"] == "rows-name-one-layout"
    assert "three layouts" in failed["detail"]
    assert "RSAGA#z" in failed["detail"]
    assert store.read_raw_state() is None


def test_restore_from_rows_that_fit_several_shard_counts_is_refused(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    # One row on #0 fits every N: too few rows to tell
    person = next(f"p-{n}" for n in range(10_000) if shard(f"p-{n}", 1024) == 0)
    dynamo.put_saga("one", person, gsi4pk=keys.sharded_gsi4pk(0))
    code, out, _err = cli("phase", "restore")
    assert code == 3
    (failed,) = json.loads(out)["failed"]
    assert failed["name"] == "rows-name-one-layout"
    assert "fit N = 1, 2, 4" in failed["detail"]
    assert store.read().version == 0
    assert store.history_entries() == []


def test_restore_from_rows_that_fit_no_shard_count_is_refused(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    plant_sharded_rows(dynamo, 16)
    person = next(f"q-{n}" for n in range(10_000) if shard(f"q-{n}", 16) != 3)
    dynamo.put_saga("misrouted", person, gsi4pk=keys.sharded_gsi4pk(3))
    # #3 may already hold a row that sits right; replace that one so the probe sees ours
    for n in range(40):
        if keys.shard_gsi4pk_for_person(f"person-{n}", 16) == keys.sharded_gsi4pk(3):
            dynamo.client.delete_item(
                TableName=dynamo.table_name, Key=serialize(keys.saga_table_key(f"s{n}"))
            )
    code, out, _ = cli("phase", "restore")
    assert code == 3
    assert "no shard count N puts every one of them" in json.loads(out)["failed"][0]["detail"]
    assert store.read().version == 0


def test_restore_of_a_table_with_only_legacy_rows_writes_nothing(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    dynamo.put_saga("l", "p-1")
    code, doc, err = cli.json("phase", "restore")
    assert (code, doc["restored"], doc["phase"], doc["version"]) == (0, False, "legacy", 0)
    assert "never migrated" in err
    assert store.history_entries() == []


# ---- case 5: an unparseable STATE item ---------------------------------------------------------


def break_state(dynamo: Backend, attribute: str, value: dict[str, Any]) -> None:
    dynamo.client.update_item(
        TableName=dynamo.table_name,
        Key=serialize(state_key()),
        UpdateExpression="SET #a = :v",
        ExpressionAttributeNames={"#a": attribute},
        ExpressionAttributeValues={":v": value},
    )


def test_status_names_the_bad_attribute_and_restore_rewrites_it_from_history(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    sharded_16(dynamo)
    break_state(dynamo, "shardCount", {"N": "12"})
    # status shows what it can read and names the attribute and its value
    code, doc, err = cli.json("status")
    assert code == 1
    assert doc["condition"] == "unreadable"
    assert (doc["badAttribute"], doc["badValue"]) == ("shardCount", 12)
    assert doc["stored"]["phase"] == "sharded"
    assert doc["restoreFrom"]["version"] == 2
    assert "phase restore" in err
    code, out, _ = cli("status")
    assert code == 1
    assert "bad attribute: shardCount = " in out
    # phase set refuses until it is repaired; restore rewrites it from history version 2
    code, _, err = cli("phase", "set", "rolling-back", "--reason", "r")
    assert code == 1
    assert "does not parse" in err
    assert "saga-index phase restore" in err
    code, doc, _ = cli.json("phase", "restore")
    assert (code, doc["replacedUnreadable"], doc["restoredFrom"]) == (0, True, "history")
    assert (doc["version"], doc["phase"], doc["shardCount"]) == (2, "sharded", 16)
    assert store.read().shard_count == 16


def test_an_unparseable_state_with_no_history_is_rebuilt_from_the_rows(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    plant_sharded_rows(dynamo, 16)
    dynamo.client.put_item(
        TableName=dynamo.table_name,
        Item=serialize({**state_key(), "entityType": "RenewalSagaIndexControl", "layout": "x"}),
    )
    code, doc, _ = cli.json("status")
    assert (code, doc["badAttribute"], doc["restoreFrom"]) == (1, "layout", None)
    code, doc, _ = cli.json("phase", "restore")
    assert (code, doc["restoredFrom"], doc["replacedUnreadable"]) == (0, "rows", True)
    assert (doc["phase"], doc["shardCount"]) == ("sharded", 16)
