"""The drift checker's watch of the open-saga index while it is `adding`, against moto: once the
open index's switch has settled (effectiveAt plus the in-flight margin), a scanning run compares
it with the base table by the same rule as in `open`. A closed saga it holds (or that carries
OpenSagaPK) is stray and is drift, as in `open`; an open saga not stamped yet is counted as
unstamped, the open-index backfill's work left, and is not drift; after the backfill has run
the run reads "unstamped 0, stray 0". The record is moved with the real `open-index set` moves
and the backfill is the real local run, on an injected wall clock; the re-check's sleep is
recorded, nothing waits."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from saga_index.index import Person, names
from saga_index.layout_change.backfill import BackfillRequest, OpenVerify, backfill_locally
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.layout_change.lease import open_index_direction
from saga_index.layout_change.record import BackfillKind, ControlStore
from saga_index.store.dynamo import ScanOptions
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock
from tests.support.open_index import Moves, open_index_fixtures

N = 16  # the open index's N when the layout is legacy (open-index set adding's default)
OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
RECHECK = 0.5
dynamo, clock, store = open_index_fixtures("drift-adding")


def put(dynamo: Backend, saga_id: str, person: str, *, state: str = "OPENED", key: Any) -> None:
    """A saga row; `key` True: its person's OpenSagaPK, a string: that key, False: none."""
    stamp = {} if key is False else {OPEN_KEY: key}
    if key is True:
        stamp = {OPEN_KEY: Person.of(person).open_index_pk(N)}
    dynamo.put_saga(saga_id, person, state=state, **stamp)


def adding(store: ControlStore, clock: Clock) -> None:
    """`open-index set adding`, the clock then past its settled switch."""
    Moves(store, clock)("adding", settle=True)


class Run:
    """One checker run, its sleeps recorded; `at_clock`: judged at the injected wall clock,
    else at this process's (the moves' clock starts in March 2026: long settled by then)."""

    def __init__(self, store: ControlStore, clock: Clock, *, at_clock: bool = False) -> None:
        self.store, self.clock, self.at_clock = store, clock, at_clock
        self.slept: list[float] = []

    def check(self) -> DriftReport:
        when = {"now": self.clock()} if self.at_clock else {}
        checker = DriftChecker(
            self.store.client,
            self.store.table_name,
            state=self.store.read(),
            scan_options=ScanOptions(segments=1),
            open_recheck_seconds=RECHECK,
            sleep=self.slept.append,
            **when,
        )
        return checker.check(scan_unindexed=True)


def backfill(store: ControlStore, clock: Clock) -> None:
    """The open-index backfill (runbook O2), run here as `saga-index open-index backfill` runs
    it: leased, fenced, every segment, its verify without the GSI-lag wait."""
    request = BackfillRequest(
        direction=open_index_direction(store.read()),
        kind=BackfillKind.OPEN_INDEX,
        total_segments=2,
        max_writes_per_second=1000.0,
        dry_run=False,
    )
    done = backfill_locally(
        store.client,
        store.table_name,
        request,
        holder="tester@host/1",
        store=store,
        clock=clock,
        poll_seconds=0.05,
        open_verify=OpenVerify(recheck_delay_seconds=0),
    )
    assert done.summary.complete


def test_in_adding_a_closed_saga_that_keeps_its_key_is_drift_and_named(
    store: ControlStore, clock: Clock, dynamo: Backend
) -> None:
    # Given the open index `adding` and settled, an open saga the backfill has yet to stamp,
    # and a closed saga whose writer kept its OpenSagaPK when it closed it
    put(dynamo, "old", "p-1", key=False)
    put(dynamo, "kept", "p-2", state="DECLINED", key=True)
    adding(store, clock)
    run = Run(store, clock)

    # When a scanning run compares the open index with the table
    report = run.check()

    # Then the closed saga is stray (re-read after the GSI lag: it still is), and drift
    assert report.open_index is not None
    assert str(report.open_index.index) == f"adding({N})"
    assert report.open_index_stray_rows == 1
    assert RECHECK in run.slept
    assert not report.healthy
    summary = report.to_dict()
    [row] = summary["openIndexStray"]
    assert row["pk"] == "RSAGA#kept"
    assert "a closed saga carries OpenSagaPK" in row["reason"]
    assert any("would read them once they read it" in f for f in report.findings())
    # And the open saga not stamped yet is counted apart, not as missing
    assert (summary["openIndexUnstampedRows"], summary["openIndexMissingRows"]) == (1, 0)


def test_in_adding_an_unstamped_open_saga_is_counted_not_drift_and_the_backfill_clears_it(
    store: ControlStore, clock: Clock, dynamo: Backend
) -> None:
    # Given two open sagas from before `adding` (unstamped), one stamped, one closed
    put(dynamo, "old1", "p-1", key=False)
    put(dynamo, "old2", "p-2", key=False)
    put(dynamo, "new", "p-3", key=True)
    put(dynamo, "closed", "p-4", state="SIGNED", key=False)
    adding(store, clock)
    run = Run(store, clock)

    # When a scanning run compares the open index with the table
    report = run.check()

    # Then the unstamped are counted and named, without a re-read each, and the run is healthy
    assert report.open_index_unstamped_rows == 2
    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (0, 0)
    assert report.healthy
    assert RECHECK not in run.slept
    summary = report.to_dict()
    assert [r["pk"] for r in summary["openIndexUnstamped"]] == ["RSAGA#old1", "RSAGA#old2"]
    assert summary["openIndexEntries"] == 1

    # And once the open-index backfill has stamped them, unstamped is 0 and stray is 0
    backfill(store, clock)
    after = Run(store, clock).check()
    assert (after.open_index_unstamped_rows, after.open_index_stray_rows) == (0, 0)
    assert after.open_index_missing_rows == 0
    assert after.to_dict()["openIndexEntries"] == 3

    # And in `open` an open saga a writer left unstamped is missing and drift, as before
    Moves(store, clock)("open", settle=True)
    put(dynamo, "forgot", "p-5", key=False)
    opened = Run(store, clock).check()
    assert str(opened.open_index.index) == f"open({N})"  # type: ignore[union-attr]
    assert (opened.open_index_missing_rows, opened.open_index_unstamped_rows) == (1, 0)
    assert not opened.healthy


def test_in_adding_an_open_saga_stamped_with_another_key_is_missing_and_drift(
    store: ControlStore, clock: Clock, dynamo: Backend
) -> None:
    # Given an open saga stamped with a key that is not its person's (a wrong stamp: neither
    # the backfill nor a writer that follows the record makes one)
    wrong = next(k for k in (f"RenewalSagaOpen#{n}" for n in range(N)) if k != _key("p-1"))
    put(dynamo, "wrong", "p-1", key=wrong)
    adding(store, clock)

    report = Run(store, clock).check()

    assert (report.open_index_missing_rows, report.open_index_unstamped_rows) == (1, 0)
    assert not report.healthy
    [row] = report.to_dict()["openIndexMissing"]
    assert row["pk"] == "RSAGA#wrong"


def test_before_adding_settles_and_in_removing_the_open_index_is_not_compared(
    store: ControlStore, clock: Clock, dynamo: Backend
) -> None:
    # Given a closed saga that carries OpenSagaPK and an unstamped open saga
    put(dynamo, "kept", "p-2", state="DECLINED", key=True)
    put(dynamo, "old", "p-1", key=False)
    moves = Moves(store, clock)
    moves("adding")
    state = store.read()
    assert state.effective_at is not None
    # Then until effectiveAt plus the in-flight margin (a writer may still follow `off`) the
    # run compares nothing: what the index holds proves nothing yet
    clock.now = state.effective_at + timedelta(seconds=1)
    early = Run(store, clock, at_clock=True).check()
    assert early.open_index is None
    assert (early.open_index_stray_rows, early.open_index_unstamped_rows) == (0, 0)
    assert early.healthy
    # And in `removing` (the rollback: stamps are being removed) it compares nothing either
    moves.settle()
    moves("removing", settle=True)
    removing = Run(store, clock, at_clock=True).check()
    assert removing.open_index is None
    assert removing.to_dict()["openIndex"] is None


def drift_json(dynamo: Backend, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    """`saga-index --table <table> drift --json` as runbook O3 has the operator run it."""
    with pytest.raises(SystemExit) as exited:
        main(["--table", dynamo.table_name, "drift", "--json"])
    out, _ = capsys.readouterr()
    (line,) = out.splitlines()
    return int(exited.value.code or 0), json.loads(line)


def test_the_operator_reads_unstamped_and_stray_from_saga_index_drift_before_o3(
    store: ControlStore, clock: Clock, dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the open index `adding` (settled) and an open saga from before it
    put(dynamo, "old", "p-1", key=False)
    adding(store, clock)
    # When the operator runs the command runbook O3 names, before the backfill
    code, report = drift_json(dynamo, capsys)
    # Then it names the open index compared and counts the unstamped saga; not drift (exit 0)
    assert code == 0
    assert report["openIndex"] == f"adding({N})"
    counts = ("openIndexUnstampedRows", "openIndexStrayRows", "openIndexMissingRows")
    assert tuple(report[key] for key in counts) == (1, 0, 0)
    # And after the backfill (runbook O2) it reads unstamped 0, stray 0: O3 may go ahead
    backfill(store, clock)
    code, report = drift_json(dynamo, capsys)
    assert (code, *(report[key] for key in counts)) == (0, 0, 0, 0)


def _key(person: str) -> str:
    return Person.of(person).open_index_pk(N)
