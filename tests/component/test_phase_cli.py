"""`saga-index phase show|set|restore` against moto: every transition and refusal, the JSON
shapes, exit codes 0/1/2/3, the compare-and-set race, --force in the history, and the global
--phase/--shards refused when they disagree with the record. Clocks are injected: nothing
sleeps."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.index.layout import Layout
from saga_index.index.shard import shard
from saga_index.layout_change.checks.layout_probe import probe_shard_keys
from saga_index.layout_change.lease.grant import acquire_lease, new_lease_token, release_lease
from saga_index.layout_change.record.items import history_key, state_key
from saga_index.layout_change.record.state import BackfillCompletion, BackfillDirection
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index.store.dynamo.codec import serialize
from saga_index_cli.context import CliContext, CliHooks
from saga_index_cli.identity import caller_identity, local_identity
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import (
    START,
    Clock,
    moto_fixtures,
    probe_64_shard_keys,
    record_early_backfill,
    set_phase,
)
from tests.support.control_seed import seed_state

RECORD_KEYS = {"phase", "shardCount", "version", "changedAt", "effectiveAt", "movingTo", "reason"}


dynamo, clock, store = moto_fixtures("phase-cli")


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], dynamo: Backend, clock: Clock) -> None:
        self.capsys = capsys
        self.table = dynamo.table_name
        self.hooks = CliHooks(
            identity=lambda _: "tester@host", clock=clock, shard_key_probe=probe_64_shard_keys
        )

    def __call__(self, *argv: str, table: bool = True) -> tuple[int, str, str]:
        args = (["--table", self.table] if table else []) + list(argv)
        with pytest.raises(SystemExit) as exited:
            main(args, hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err

    def json(self, *argv: str) -> tuple[int, dict[str, Any], str]:
        code, out, err = self(*argv)
        (line,) = out.splitlines()  # ONE object
        return code, json.loads(line), err

    def set(self, phase: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        return self.json("phase", "set", phase, "--reason", f"to {phase}", "--json", *extra)

    def show(self, *extra: str) -> dict[str, Any]:
        code, doc, _ = self.json("phase", "show", "--json", *extra)
        assert code == 0
        return doc


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], dynamo: Backend, clock: Clock) -> Cli:
    return Cli(capsys, dynamo, clock)


def record_backfill(
    store: ControlStore, clock: Clock, direction: str, *, verified: bool = True
) -> None:
    """A backfill of the record's move that ran after effectiveAt and released its lease."""
    state = store.read()
    assert state.effective_at is not None
    clock.now = state.effective_at + timedelta(seconds=1)
    token = new_lease_token()
    grant = acquire_lease(store, holder="test-run", token=token, direction=direction, clock=clock)
    started = clock.now
    clock.advance(10)
    completion = BackfillCompletion(
        direction=BackfillDirection.parse(direction),
        source=grant.source,
        target=grant.target,
        state_version=state.version,
        started_at=started,
        completed_at=clock.now,
        scanned=3,
        restamped=3,
        anomalies=0,
        complete=True,
        verified=verified,
        holder="test-run",
        lease_token=token,
    )
    release_lease(store, token=token, completion=completion, clock=clock)
    past_settled_switch(store, clock)


def past_settled_switch(store: ControlStore, clock: Clock) -> None:
    """The clock past the record's effectiveAt plus the in-flight margin: from then on a
    completing move is judged by its checks (before it, it is refused with exit 5)."""
    effective_at = store.read().effective_at
    assert effective_at is not None
    clock.now = max(clock.now, effective_at + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS + 1))


def failed_names(doc: dict[str, Any]) -> list[str]:
    return [check["name"] for check in doc["failed"]]


# ---- show --------------------------------------------------------------------------------------


def test_show_of_a_never_migrated_table_is_legacy_version_0(cli: Cli) -> None:
    doc = cli.show()
    assert doc.keys() >= RECORD_KEYS
    assert {k: doc[k] for k in RECORD_KEYS} == {
        "phase": "legacy",
        "shardCount": None,
        "version": 0,
        "changedAt": None,
        "effectiveAt": None,
        "movingTo": None,
        "reason": None,
    }
    assert doc["condition"] == "never-migrated"
    assert doc["allowedMoves"] == ["migrating"]
    code, out, _ = cli("phase", "show")
    assert code == 0
    assert "phase legacy  (version 0, record never-migrated)" in out
    assert "never migrated" in out


# ---- legacy -> migrating -------------------------------------------------------------------------


def test_legacy_to_migrating_writes_version_1_with_n_16_and_its_history(
    cli: Cli, store: ControlStore, clock: Clock
) -> None:
    # the real probe, every possible shard key
    cli.hooks = replace(cli.hooks, shard_key_probe=probe_shard_keys)
    code, doc, err = cli.set("migrating")
    assert code == 0
    assert doc["phase"] == "migrating"
    assert doc["version"] == 1
    assert doc["shardCount"] is None  # the current layout is still legacy
    assert doc["movingTo"] == {"layout": "sharded", "shardCount": 16}
    assert doc["changedAt"] == format_time(START)
    assert doc["effectiveAt"] == format_time(START + timedelta(seconds=75))
    assert (doc["effective"], doc["secondsUntilEffective"]) == (False, 75.0)
    assert doc["changedBy"] == "tester@host"
    assert doc["reason"] == "to migrating"
    assert doc["from"] == {"phase": "legacy", "version": 0}
    assert doc["checks"] == [
        {
            "name": "no-rows-on-shard-keys",
            "passed": True,
            "detail": "no saga row on any of the 1024 shard keys (1024 queries)",
        }
    ]
    assert (doc["historyWritten"], doc["warnings"]) == (True, [])
    # Until effectiveAt writers still stamp legacy, and the record says when that changes
    assert doc["routing"] == {
        "writes": "legacy",
        "reads": ["legacy", "sharded(16)"],
        "switchesTo": "sharded(16)",
        "switchesAt": doc["effectiveAt"],
    }
    assert "every process follows the new routing" in err
    code, out, _ = cli("phase", "show")
    assert (
        f"writers stamp legacy until {doc['effectiveAt']}, then sharded(16); readers read "
        "legacy, then sharded(16)"
    ) in out
    clock.now = store.read().effective_at or clock.now
    shown = cli.show()["routing"]
    assert (shown["writes"], shown["switchesTo"], shown["switchesAt"]) == (
        "sharded(16)",
        None,
        None,
    )
    assert [t.version for t in store.history()] == [1]
    shown = cli.show()
    assert {k: shown[k] for k in RECORD_KEYS} == {k: doc[k] for k in RECORD_KEYS}


def test_legacy_to_migrating_takes_its_n_from_shards(cli: Cli) -> None:
    code, doc, _ = cli.set("migrating", "--shards", "32")
    assert (code, doc["movingTo"]) == (0, {"layout": "sharded", "shardCount": 32})


@pytest.mark.parametrize("n", ["12", "0", "2048"])
def test_shards_that_are_not_a_power_of_two_exit_2(cli: Cli, n: str) -> None:
    code, out, err = cli("phase", "set", "migrating", "--reason", "r", "--shards", n)
    assert (code, out) == (2, "")
    assert "power of two" in err


def test_set_needs_a_reason(cli: Cli) -> None:
    code, out, err = cli("phase", "set", "migrating")
    assert (code, out) == (2, "")
    assert "--reason" in err


# ---- moves that are not allowed ----------------------------------------------------------------


# The phase the record already holds is no move at all: exit 0, nothing written
# (tests/component/test_cli_exit_scheme.py).
@pytest.mark.parametrize(
    ("setup", "requested", "allowed"),
    [
        ([], "sharded", "Allowed from 'legacy': migrating"),
        ([], "rolling-back", "Allowed from 'legacy': migrating"),
        (["migrating"], "legacy", "Allowed from 'migrating': sharded, rolling-back"),
        (
            ["migrating", "rolling-back"],
            "sharded",
            "Allowed from 'rolling-back': legacy, migrating",
        ),
        ([], "resharding", "Allowed from 'legacy': migrating"),
    ],
)
def test_a_move_that_is_not_allowed_exits_2_naming_the_allowed_moves(
    cli: Cli, store: ControlStore, setup: list[str], requested: str, allowed: str
) -> None:
    for phase in setup:
        assert cli.set(phase)[0] == 0
    before = store.read().version
    code, out, err = cli("phase", "set", requested, "--reason", "r")
    assert (code, out) == (2, "")
    assert allowed in err
    assert store.read().version == before


def test_an_unknown_phase_exits_2_naming_the_allowed_values(cli: Cli) -> None:
    code, _, err = cli("phase", "set", "sideways", "--reason", "r")
    assert code == 2
    assert (
        "'sideways' is not one of 'legacy', 'migrating', 'sharded', 'rolling-back', "
        "'resharding'" in err
    )


def test_the_phase_argument_is_case_insensitive(cli: Cli, store: ControlStore) -> None:
    code, _, err = cli("phase", "set", "MIGRATING", "--reason", "r")
    assert code == 0, err
    assert store.read().phase.value == "migrating"


def test_a_shards_that_disagrees_with_the_record_exits_2(cli: Cli) -> None:
    cli.set("migrating")
    code, out, err = cli("phase", "set", "rolling-back", "--reason", "r", "--shards", "32")
    assert (code, out) == (2, "")
    assert "--shards 32 disagrees" in err
    # One that agrees is an assertion that holds.
    assert cli.set("rolling-back", "--shards", "16")[0] == 0


# ---- the guarded moves ---------------------------------------------------------------------------


def test_sharded_before_the_backfill_is_refused_with_exit_3_naming_each_failed_check(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    dynamo.put_saga("old", "p-1")  # still on the legacy key
    cli.set("migrating")
    past_settled_switch(store, clock)
    code, out, err = cli("phase", "set", "sharded", "--reason", "done", "--recheck-delay", "0")
    assert code == 3
    (line,) = out.splitlines()
    refusal = json.loads(line)
    assert refusal["refused"] is True
    assert refusal["requested"] == "sharded"
    assert failed_names(refusal) == ["backfill-verified", "no-legacy-rows", "parity"]
    assert all(set(c) == {"name", "passed", "detail"} for c in refusal["failed"])
    assert all(c["passed"] is False for c in refusal["failed"])
    details = {c["name"]: c["detail"] for c in refusal["failed"]}
    assert "no forward backfill has been recorded" in details["backfill-verified"]
    assert "1 saga row(s) still on the legacy key" in details["no-legacy-rows"]
    assert "1 row(s) missing, 0 row(s) extra, 0 row(s) misrouted of 1" in details["parity"]
    assert "refused" in err
    assert store.read().version == 1  # nothing written
    assert [t.version for t in store.history()] == [1]


def test_sharded_after_a_verified_backfill_with_every_row_moved_passes_every_check(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    cli.set("migrating")
    for n in range(3):
        dynamo.put_saga(f"s{n}", f"p-{n}", gsi4pk="shard")
    record_backfill(store, clock, "forward")
    code, doc, _ = cli.set("sharded")
    assert code == 0
    assert (doc["phase"], doc["version"], doc["shardCount"], doc["movingTo"]) == (
        "sharded",
        2,
        16,
        None,
    )
    assert [c["name"] for c in doc["checks"]] == [
        "backfill-verified",
        "no-legacy-rows",
        "no-misrouted-rows",
        "parity",
    ]
    assert all(c["passed"] for c in doc["checks"])
    assert doc["checksPassed"] == [c["name"] for c in doc["checks"]]
    assert doc["checksForced"] == []
    assert store.history()[-1].checks_passed == tuple(doc["checksPassed"])


def test_an_unroutable_legacy_row_refuses_sharded_as_a_row_left_behind_and_in_parity(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    # A row the backfill cannot move still sits where sharded's readers never look: it must
    # be repaired (repair-anomaly) before the move, not left to page after it.
    cli.set("migrating")
    dynamo.put_saga("odd", None, GSI4SK="#2026-01-01T00:00:00Z")  # no personId: unmovable
    record_backfill(store, clock, "forward")
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    assert failed_names(json.loads(out)) == ["no-legacy-rows", "parity"]


def test_a_misrouted_row_refuses_the_sharded_move(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    cli.set("migrating")
    wrong = (shard("p-moved", 16) + 1) % 16
    dynamo.put_saga("misrouted", "p-moved", gsi4pk=keys.sharded_gsi4pk(wrong))
    record_backfill(store, clock, "forward")
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    refusal = json.loads(out)
    assert "no-misrouted-rows" in failed_names(refusal)
    assert "backfill-verified" not in failed_names(refusal)


def test_an_unverified_backfill_refuses(cli: Cli, store: ControlStore, clock: Clock) -> None:
    cli.set("migrating")
    record_backfill(store, clock, "forward", verified=False)
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r")
    assert code == 3
    assert failed_names(json.loads(out)) == ["backfill-verified"]


def test_a_completing_move_waits_for_the_settled_switch_forced_or_not(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    # The runbook's fastest path: a verified backfill 1 s after effectiveAt, then `phase set
    # sharded` at once. A writer whose clock runs 10 s behind (or a request held 10 s) still
    # stamps the legacy key after that: the move must wait until effectiveAt + the margin,
    # and its checks then see the late row.
    cli.set("migrating")
    effective_at = store.read().effective_at
    assert effective_at is not None
    record_early_backfill(store, clock)
    settled = effective_at + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS)
    for extra in ((), ("--force",)):
        code, out, err = cli("phase", "set", "sharded", "--reason", "r", *extra)
        assert code == 5, err
        refusal = json.loads(out)
        assert (refusal["retryLater"], refusal["retryAt"]) == (True, format_time(settled))
        assert "--force does not skip" in err
        assert store.read().version == 1  # nothing written
    dynamo.put_saga("late", "p-1")  # the held write lands on the legacy key meanwhile
    clock.now = settled
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    assert "no-legacy-rows" in failed_names(json.loads(out))


def test_force_skips_the_checks_and_the_history_records_which(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    dynamo.put_saga("old", "p-1")
    cli.set("migrating")
    past_settled_switch(store, clock)
    code, doc, err = cli.set("sharded", "--force")
    assert code == 0
    forced = ["backfill-verified", "no-legacy-rows", "no-misrouted-rows", "parity"]
    assert (doc["phase"], doc["checks"], doc["checksForced"]) == ("sharded", [], forced)
    assert "FORCED" in err
    history = cli.show("--history")["history"]
    assert [(h["version"], h["from"], h["to"]) for h in history] == [
        (1, "legacy", "migrating"),
        (2, "migrating", "sharded"),
    ]
    assert history[1]["checksForced"] == forced
    assert history[1]["reason"] == "to sharded"
    assert history[1]["changedBy"] == "tester@host"
    code, out, _ = cli("phase", "show", "--history")
    assert "checks FORCED: backfill-verified" in out
    assert "v2: migrating -> sharded" in out


# ---- abort and rollback: never blocked ---------------------------------------------------------


def test_abort_and_rollback_edges_are_never_blocked(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    dynamo.put_saga("old", "p-1")
    steps = [
        ("migrating", "migrating", 1),
        ("rolling-back", "rolling-back", 2),  # abort: nothing checked
        ("migrating", "migrating", 3),  # abort the rollback
        ("sharded", None, None),  # forced below
        ("rolling-back", "rolling-back", 5),
    ]
    for requested, phase, version in steps:
        if phase is None:
            past_settled_switch(store, clock)
            assert cli.set(requested, "--force")[0] == 0
            continue
        code, doc, _ = cli.set(requested)
        # Only the very first move checks anything: that no row carries a shard key yet
        first = ["no-rows-on-shard-keys"] if version == 1 else []
        assert (code, doc["phase"], doc["version"]) == (0, phase, version)
        assert [c["name"] for c in doc["checks"]] == first
        if version == 1:
            dynamo.put_saga("new", "p-2", gsi4pk="shard")
    state = store.read()
    assert (str(state.layout), str(state.moving_to)) == ("sharded(16)", "legacy")


def test_legacy_is_refused_while_rows_remain_on_the_shards_and_allowed_after_the_rollback(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    cli.set("migrating")
    cli.set("rolling-back")
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    past_settled_switch(store, clock)
    code, out, _ = cli("phase", "set", "legacy", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    refusal = json.loads(out)
    assert failed_names(refusal) == ["backfill-verified", "no-sharded-rows", "parity"]
    assert "1 saga row(s) still on the 16 shard keys" in refusal["failed"][1]["detail"]

    dynamo.put_saga("s1", "p-1")  # the rollback moved it back to the legacy key
    record_backfill(store, clock, "rollback")
    code, doc, _ = cli.set("legacy")
    assert (code, doc["phase"], doc["version"]) == (0, "legacy", 3)
    assert doc["checksPassed"] == [
        "backfill-verified",
        "no-sharded-rows",
        "no-misrouted-rows",
        "parity",
    ]


# ---- racing operators ----------------------------------------------------------------------------


def test_the_loser_of_a_race_exits_1_naming_the_version_it_lost_to(
    cli: Cli, dynamo: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:

    cli.set("migrating")
    other = ControlStore(dynamo.new_client(), dynamo.table_name)
    original = ControlStore.compare_and_set

    def lose(self: ControlStore, expected_version: int, transition: Any) -> bool:
        # The other operator's abort lands between this one's read and its write.
        if self is not other:
            monkeypatch.setattr(ControlStore, "compare_and_set", original)
            set_phase(other, "rolling-back", changed_by="other", reason="abort")
        return original(self, expected_version, transition)

    monkeypatch.setattr(ControlStore, "compare_and_set", lose)
    code, out, err = cli("phase", "set", "rolling-back", "--reason", "mine")
    assert (code, out) == (1, "")
    assert "lost the race" in err
    assert "from version 1 to version 2" in err
    state = ControlStore(dynamo.client, dynamo.table_name).read()
    assert (state.version, state.transition and state.transition.changed_by) == (2, "other")


# ---- the global read overrides on a write ------------------------------------------------------


def test_a_global_phase_or_shards_that_disagrees_with_the_record_is_refused(cli: Cli) -> None:
    cli.set("migrating")
    code, out, err = cli("--phase", "sharded", "phase", "set", "rolling-back", "--reason", "r")
    assert (code, out) == (2, "")
    assert "--phase sharded disagrees with the record (phase migrating, version 1)" in err
    code, _, err = cli("--shards", "32", "phase", "set", "rolling-back", "--reason", "r")
    assert code == 2
    assert "--shards 32 disagrees with the record, which holds shard count 16" in err
    code, doc, _ = cli.json(
        "--phase", "migrating", "--shards", "16", "phase", "set", "rolling-back",
        "--reason", "agreeing overrides are assertions that hold", "--json",
    )  # fmt: skip
    assert (code, doc["phase"]) == (0, "rolling-back")


def test_a_global_shards_before_any_migration_points_at_phase_set_shards(cli: Cli) -> None:
    code, _, err = cli("--shards", "32", "phase", "set", "migrating", "--reason", "r")
    assert code == 2
    assert "holds no shard count" in err
    assert "phase set migrating --shards N" in err


# ---- a deleted record ----------------------------------------------------------------------------


def test_a_missing_record_is_shown_from_history_refused_for_set_and_restored(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    cli.set("migrating")
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(state_key()))
    code, doc, err = cli.json("phase", "show", "--json")
    assert code == 1
    assert (doc["condition"], doc["phase"], doc["version"]) == ("missing", "migrating", 1)
    assert doc["allowedMoves"] == []
    assert "MISSING" in err
    assert "saga-index phase restore" in err

    code, out, err = cli("phase", "set", "sharded", "--reason", "r", "--force")
    assert (code, out) == (1, "")
    assert "missing" in err

    code, doc, err = cli.json("phase", "restore", "--json")
    assert (code, doc["restored"], doc["condition"], doc["version"]) == (0, True, "present", 1)
    code, doc, err = cli.json("phase", "restore", "--json")
    assert (code, doc["restored"]) == (0, False)
    assert "nothing to restore" in err


def test_a_missing_history_item_is_rewritten_by_the_next_set(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    cli.set("migrating")
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(history_key(1)))
    assert cli.set("rolling-back")[0] == 0
    assert [t.version for t in store.history()] == [1, 2]


# ---- who changed it ------------------------------------------------------------------------------


def test_changed_by_is_the_sts_caller_arn_by_default(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--table", dynamo.table_name, "phase", "set", "migrating", "--reason", "r", "--json"])
    assert exited.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    assert doc["changedBy"].startswith("arn:aws:")


def test_changed_by_is_user_at_host_against_a_local_endpoint() -> None:
    context = CliContext(
        table="t",
        endpoint_url="http://localhost:4567",
        region="us-east-1",
        phase_override=None,
        shards_override=None,
        max_attempts=1,
    )
    assert caller_identity(context) == local_identity()
    assert "@" in local_identity()


def test_human_output_of_set_names_the_move_and_when_it_takes_effect(cli: Cli) -> None:
    code, out, _ = cli("phase", "set", "migrating", "--reason", "go")
    assert code == 0
    assert "phase legacy -> migrating: version 1 written" in out
    assert "effectiveAt:  2026-03-01T09:01:15.000Z (in 75 s)" in out
    assert "reason:       go" in out


# ---- re-shard: sharded(N) -> resharding -> sharded(M), the abort and the merge back ------------

PERSONS = [f"person-{n}" for n in range(20)]


def split_movers(n: int, m: int) -> list[str]:
    return [p for p in PERSONS if shard(p, n) != shard(p, m)]


def sharded_table(dynamo: Backend, n: int = 16) -> None:
    """The record at sharded(N) (planted: the migration's moves are tested above), and one saga
    per person on its key of N."""
    seed_state(dynamo.client, dynamo.table_name, Layout.sharded(n))
    for number, person in enumerate(PERSONS):
        dynamo.put_saga(f"s{number:02}", person, gsi4pk="shard", shard_count=n)


def backfill_json(cli: Cli, clock: Clock, store: ControlStore, *extra: str) -> dict[str, Any]:
    """`saga-index backfill --json` once the record's effectiveAt has passed."""
    effective_at = store.read().effective_at
    assert effective_at is not None
    clock.now = max(clock.now, effective_at + timedelta(seconds=1))
    code, doc, err = cli.json("backfill", "--json", "--max-writes-per-second", "1000", *extra)
    assert code == 0, err
    past_settled_switch(store, clock)
    return doc


# A --shards that is no power of two is refused before the record is read, like every bad
# argument (tests/component/test_cli_exit_scheme.py).
@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ([], "a re-shard needs --shards M, the shard count to move to (allowed: 8 (merge) or 32"),
        (["--shards", "64"], "--shards 64 is not one factor of two from the record's 16"),
        (["--shards", "4"], "allowed: 8 (merge) or 32 (split)"),
        (["--shards", "16"], "allowed: 8 (merge) or 32 (split)"),
    ],
)
def test_resharding_to_anything_but_2n_or_n_over_2_exits_2_naming_the_allowed_values(
    cli: Cli, store: ControlStore, dynamo: Backend, shards: list[str], message: str
) -> None:
    sharded_table(dynamo)
    code, out, err = cli("phase", "set", "resharding", "--reason", "r", *shards)
    assert (code, out) == (2, "")
    assert message in err
    assert "allowed: 8 (merge) or 32 (split)" in err
    assert store.read().version == 1


def test_resharding_starts_never_blocked_and_the_record_holds_both_layouts(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    sharded_table(dynamo)
    code, doc, err = cli.set("resharding", "--shards", "32")
    assert code == 0
    assert (doc["phase"], doc["version"], doc["shardCount"]) == ("resharding", 2, 16)
    assert doc["movingTo"] == {"layout": "sharded", "shardCount": 32}
    assert doc["from"] == {"phase": "sharded", "version": 1}
    assert doc["checks"] == []
    assert doc["allowedMoves"] == ["sharded", "resharding"]
    assert doc["routing"] == {
        "writes": "sharded(16)",
        "reads": ["sharded(16)", "sharded(32)"],
        "switchesTo": "sharded(32)",
        "switchesAt": doc["effectiveAt"],
    }
    assert "writes sharded(32); reads sharded(16), then sharded(32)" in err
    shown = cli.show()
    assert {k: shown[k] for k in RECORD_KEYS} == {k: doc[k] for k in RECORD_KEYS}
    code, out, _ = cli("phase", "show")
    assert "phase resharding  (version 2, record present)" in out
    assert "layout:       sharded(16) -> sharded(32)" in out
    history = store.history()[-1]
    assert (str(history.previous_layout), str(history.layout), str(history.moving_to)) == (
        "sharded(16)",
        "sharded(16)",
        "sharded(32)",
    )


def test_from_resharding_only_the_abort_or_the_completion_is_allowed(
    cli: Cli, store: ControlStore, dynamo: Backend
) -> None:
    sharded_table(dynamo)
    cli.set("resharding", "--shards", "32")
    for requested, extra, message in [
        ("rolling-back", [], "Allowed from 'resharding': sharded, resharding"),
        ("legacy", [], "Allowed from 'resharding': sharded, resharding"),
        ("resharding", [], "the abort needs --shards 16 (allowed: 16 (abort: back to"),
        ("resharding", ["--shards", "64"], "only its abort can start now (allowed: 16"),
        ("sharded", ["--shards", "16"], "--shards 16 disagrees"),
    ]:
        code, out, err = cli("phase", "set", requested, "--reason", "r", *extra)
        assert (code, out) == (2, ""), requested
        assert message in err
    assert store.read().version == 2


def test_the_abort_swaps_the_layouts_never_blocked_with_rows_on_both(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    # Given a split half done: some rows moved to their key of 32, the rest still on 16
    sharded_table(dynamo)
    cli.set("resharding", "--shards", "32")
    for number, person in enumerate(PERSONS[:10]):
        dynamo.put_saga(f"s{number:02}", person, gsi4pk="shard", shard_count=32)
    # When the operator aborts
    code, doc, _ = cli.set("resharding", "--shards", "16")
    # Then the move runs back: current sharded(32), writers stamp 16, reads 32 then 16
    assert (code, doc["phase"], doc["version"], doc["checks"]) == (0, "resharding", 3, [])
    assert (doc["shardCount"], doc["movingTo"]) == (32, {"layout": "sharded", "shardCount": 16})
    assert doc["routing"] == {
        "writes": "sharded(16)",
        "reads": ["sharded(32)", "sharded(16)"],
        "switchesTo": None,
        "switchesAt": None,
    }
    # And the backfill of the way back is a forward run, which puts every row on its 16 key
    code, out, err = cli("backfill", "--direction", "rollback")
    assert (code, out) == (2, "")
    assert "needs the record in phase rolling-back" in err
    moved = backfill_json(cli, clock, store)
    assert moved["direction"] == "forward"
    # (the rows planted on their key of 32 that differs from their key of 16 move back)
    assert moved["restamped"] == len([p for p in split_movers(16, 32) if p in PERSONS[:10]])
    code, doc, _ = cli.set("sharded")
    assert (code, doc["phase"], doc["shardCount"]) == (0, "sharded", 16)


def test_a_rollback_backfill_while_resharding_exits_2_naming_the_way_back(
    cli: Cli, dynamo: Backend
) -> None:
    sharded_table(dynamo)
    cli.set("resharding", "--shards", "32")
    code, out, err = cli("backfill", "--direction", "rollback")
    assert (code, out) == (2, "")
    assert "`phase set resharding --shards 16` (the abort), then a forward backfill" in err


def test_a_split_and_the_merge_back_through_the_cli_with_every_check(
    cli: Cli, store: ControlStore, dynamo: Backend, clock: Clock
) -> None:
    sharded_table(dynamo)
    before = [r for r in dynamo.scan_all() if r["PK"]["S"].startswith("RSAGA#")]
    movers = split_movers(16, 32)
    assert 0 < len(movers) < len(PERSONS)
    assert cli.set("resharding", "--shards", "32")[0] == 0

    # Completing before the backfill: refused, naming the rows not yet moved
    past_settled_switch(store, clock)
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    refusal = json.loads(out)
    assert failed_names(refusal) == ["backfill-verified", "no-misrouted-rows", "parity"]
    details = {c["name"]: c["detail"] for c in refusal["failed"]}
    misrouted = details["no-misrouted-rows"]
    assert f"{len(movers)} row(s) under a shard key that is not their person's in " in misrouted
    assert "not yet moved" in misrouted
    assert f"{len(movers)} row(s) misrouted of {len(PERSONS)}" in details["parity"]

    # The split: only the rows whose key of 32 is the upper one move, s -> s + 16
    moved = backfill_json(cli, clock, store)
    assert (moved["restamped"], moved["anomalies"]) == (len(movers), 0)
    assert moved["source"] == {"kind": "sharded", "shardCount": 16}
    assert moved["target"] == {"kind": "sharded", "shardCount": 32}
    for number, person in enumerate(PERSONS):
        row = dynamo.get(f"RSAGA#s{number:02}", "META")
        assert row is not None
        assert row["GSI4PK"]["S"] == keys.shard_gsi4pk_for_person(person, 32)

    code, doc, _ = cli.set("sharded")
    assert code == 0
    assert (doc["phase"], doc["shardCount"], doc["movingTo"], doc["version"]) == (
        "sharded",
        32,
        None,
        3,
    )
    assert [c["name"] for c in doc["checks"]] == [
        "backfill-verified",
        "no-unmoved-rows",
        "no-misrouted-rows",
        "parity",
    ]
    assert all(c["passed"] for c in doc["checks"]), doc["checks"]
    assert doc["allowedMoves"] == ["rolling-back", "resharding"]

    # The merge back: 32 -> 16, refused while rows sit on the upper keys the target drops
    assert cli.set("resharding", "--shards", "16")[0] == 0
    past_settled_switch(store, clock)
    code, out, _ = cli("phase", "set", "sharded", "--reason", "r", "--recheck-delay", "0")
    assert code == 3
    refusal = json.loads(out)
    assert "no-unmoved-rows" in failed_names(refusal)
    unmoved = next(c for c in refusal["failed"] if c["name"] == "no-unmoved-rows")
    assert unmoved["detail"].startswith(
        f"{len(movers)} saga row(s) still on the 16 sharded(32) key(s) sharded(16) does not read"
    )
    merged = backfill_json(cli, clock, store)
    assert merged["restamped"] == len(movers)
    code, doc, _ = cli.set("sharded")
    assert (code, doc["shardCount"]) == (0, 16)
    assert all(c["passed"] for c in doc["checks"]), doc["checks"]
    after = [r for r in dynamo.scan_all() if r["PK"]["S"].startswith("RSAGA#")]
    assert after == before
    assert [t.phase.value for t in store.history()] == [
        "sharded",
        "resharding",
        "sharded",
        "resharding",
        "sharded",
    ]


def test_verify_during_a_half_done_split_reads_as_its_readers_do_and_is_identical(
    cli: Cli, dynamo: Backend
) -> None:
    # Given a split half done: some rows already on their key of 32, the rest still on 16
    sharded_table(dynamo)
    cli.set("resharding", "--shards", "32")
    for number, person in enumerate(PERSONS[:10]):
        dynamo.put_saga(f"s{number:02}", person, gsi4pk="shard", shard_count=32)
    # When the operator checks parity in the resharding state (no --phase override)
    code, doc, err = cli.json("verify", "--json", "--recheck-delay", "0")
    # Then the reads (source 16 first, then 32) return exactly the base table's sagas
    assert code == 0, err
    assert doc["ok"] is True
    assert doc["phase"] == "resharding"
