"""The drift checker's watch of the open-saga index against moto: while the record's open index
is `open`, a scanning run compares it with the base table by the completing move's rule, counts
only what outlives the re-check, names each row with the `repair-anomaly` command that repairs
it (these tests run that command, as printed, and the next check is clean), and never reports a
read it could not finish. Clocks and sleeps are injected: nothing waits."""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

import pytest

from saga_index.index import Layout, Person, names
from saga_index.layout_change.checks.drift import DriftChecker, DriftReport
from saga_index.layout_change.record import ControlStore
from saga_index.store.dynamo import KeyReadIncompleteError, ScanOptions
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import moto_backend
from tests.support.control_seed import seed_open_index, seed_state
from tests.support.open_index import add_open_index

N = 16
OPEN_KEY = names.OPEN_INDEX_PARTITION_KEY
RECHECK = 0.5


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("drift-open", synthesized_template) as backend:
        add_open_index(backend.client, backend.table_name)
        seed_state(backend.client, backend.table_name, Layout.sharded(N))
        seed_open_index(backend.client, backend.table_name, Layout.sharded(N), N)
        yield backend


def put(dynamo: Backend, saga_id: str, person: str, *, state: str = "OPENED", key: bool) -> None:
    """A saga row on its shard key; `key`: it carries its person's OpenSagaPK."""
    stamp = {OPEN_KEY: Person.of(person).open_index_pk(N)} if key else {}
    dynamo.put_saga(saga_id, person, gsi4pk="shard", state=state, **stamp)


class Run:
    """One checker run, its sleeps recorded (the re-check's among them)."""

    def __init__(self, dynamo: Backend) -> None:
        self.dynamo = dynamo
        self.slept: list[float] = []
        self.on_sleep: list[Any] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        for act in self.on_sleep:
            act()

    def check(self, **kw: Any) -> DriftReport:
        dynamo = self.dynamo
        checker = DriftChecker(
            dynamo.client,
            dynamo.table_name,
            state=ControlStore(dynamo.client, dynamo.table_name).read(),
            scan_options=ScanOptions(segments=1),
            open_recheck_seconds=RECHECK,
            sleep=self.sleep,
            **kw.pop("checker", {}),
        )
        return checker.check(scan_unindexed=True, **kw)


def follow(dynamo: Backend, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Run a printed `saga-index ...` command as an operator would paste it."""
    argv = shlex.split(command)
    assert argv[0] == "saga-index"
    with pytest.raises(SystemExit) as exited:
        main(argv[1:])
    out, err = capsys.readouterr()
    assert exited.value.code == 0, (out, err)


def test_given_every_open_saga_in_the_open_index_then_the_run_is_clean(dynamo: Backend) -> None:
    put(dynamo, "a", "p-1", key=True)
    put(dynamo, "b", "p-2", key=True)
    put(dynamo, "closed", "p-3", state="SIGNED", key=False)
    run = Run(dynamo)

    report = run.check()

    assert report.open_index is not None
    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (0, 0)
    assert report.healthy
    summary = report.to_dict()
    assert summary["openIndex"] == f"open({N})"
    assert summary["openIndexEntries"] == 2
    assert RECHECK not in run.slept  # nothing differed: no re-check


def test_given_an_unstamped_open_saga_then_it_is_missing_and_its_printed_repair_fixes_it(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an open saga a writer left without OpenSagaPK, beside a stamped one
    put(dynamo, "stamped", "p-1", key=True)
    put(dynamo, "unstamped", "p-9", key=False)
    run = Run(dynamo)

    # When a scanning run compares the open index with the table
    report = run.check()

    # Then it counts the row once the re-check (after the GSI-lag delay) still finds it
    assert RECHECK in run.slept
    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (1, 0)
    assert not report.healthy
    assert any("getAllOpenSagas" in f for f in report.findings())
    [row] = report.to_dict()["openIndexMissing"]
    assert row["pk"] == "RSAGA#unstamped"
    assert row["repairCommand"] == (
        f"saga-index --table {dynamo.table_name} repair-anomaly --pk 'RSAGA#unstamped' "
        "--sk META --person-id p-9 --apply"
    )
    # And the command, run as printed, stamps the row: the next run is clean
    follow(dynamo, row["repairCommand"], capsys)
    assert Run(dynamo).check().open_index_missing_rows == 0


def test_given_a_closed_saga_left_stamped_then_it_is_stray_and_its_printed_repair_fixes_it(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    put(dynamo, "open", "p-1", key=True)
    put(dynamo, "closed", "p-2", state="DECLINED", key=True)

    report = Run(dynamo).check()

    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (0, 1)
    [row] = report.to_dict()["openIndexStray"]
    assert row["pk"] == "RSAGA#closed"
    assert "a closed saga carries OpenSagaPK" in row["reason"]
    follow(dynamo, row["repairCommand"], capsys)
    raw = dynamo.get("RSAGA#closed", "META")
    assert raw is not None
    assert OPEN_KEY not in raw
    after = Run(dynamo).check()
    assert (after.open_index_missing_rows, after.open_index_stray_rows) == (0, 0)


def test_a_difference_that_heals_within_the_gsi_lag_does_not_count(dynamo: Backend) -> None:
    # Given an open saga whose stamp lands while the run waits for the GSI's lag
    put(dynamo, "late", "p-4", key=False)
    run = Run(dynamo)
    run.on_sleep.append(lambda: put(dynamo, "late", "p-4", key=True))

    report = run.check()

    assert run.slept == [RECHECK]
    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (0, 0)


def test_an_open_index_read_that_passes_the_deadline_is_no_verdict(dynamo: Backend) -> None:
    # Given a run whose time is up once the GSI4 reads are done (the open index's keys next)
    put(dynamo, "unstamped", "p-9", key=False)
    now = [1000.0]
    deadline = now[0] + 60

    def reads_done(done: int, total: int) -> None:
        if done == total:
            now[0] = deadline + 1

    # Then the run raises instead of reporting a partial comparison as clean or as drift
    with pytest.raises(KeyReadIncompleteError, match="RenewalSagaOpen#0"):
        Run(dynamo).check(
            checker={"clock": lambda: now[0]}, deadline=deadline, on_index_read=reads_done
        )


def test_while_the_open_index_is_not_read_it_is_not_compared(dynamo: Backend) -> None:
    # Given the record back on a plain sharded layout (open index off), an unstamped open saga
    seed_state(dynamo.client, dynamo.table_name, Layout.sharded(N), version=3)
    put(dynamo, "unstamped", "p-9", key=False)

    report = Run(dynamo).check()

    # Then the run reads no open index key and counts nothing there: no reader reads it
    assert report.open_index is None
    assert (report.open_index_missing_rows, report.open_index_stray_rows) == (0, 0)
    assert report.to_dict()["openIndex"] is None
