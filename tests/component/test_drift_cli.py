"""`saga-index drift`: the report on stdout, exit 0 healthy / 1 drift, per phase."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from saga_index.layout_change.record.items import state_key
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import utc_now
from saga_index.store.dynamo.codec import serialize
from saga_index_cli import progress
from saga_index_cli.context import CliContext
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.control_fixtures import set_phase
from tests.support.drift_contract import N, plant_drift


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("drift-cli", synthesized_template, endpoint_url=None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def drift_json(
    capsys: pytest.CaptureFixture[str], dynamo: Backend, phase: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(
        capsys,
        "--table",
        dynamo.table_name,
        "--phase",
        phase,
        "--shards",
        str(N),
        "drift",
        "--json",
    )
    (line,) = out.splitlines()  # ONE object
    return code, json.loads(line)


def test_json_report_has_the_exact_counts_and_exit_1_on_drift(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = plant_drift(dynamo)
    code, report = drift_json(capsys, dynamo, "sharded")
    assert code == 1
    assert report["legacyRows"] == planted.legacy
    assert report["misroutedRows"] == planted.misrouted
    assert report["unindexedRows"] == planted.unindexed
    assert report["strayRows"] == planted.stray
    assert report["rowsPerShard"] == {str(n): c for n, c in planted.rows_per_shard.items()}
    assert report["healthy"] is False
    assert len(report["findings"]) == 4


@pytest.mark.parametrize(
    ("phase", "code"), [("legacy", 0), ("migrating", 0), ("rolling-back", 0), ("sharded", 1)]
)
def test_legacy_rows_exit_1_only_in_phase_sharded(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], phase: str, code: int
) -> None:
    dynamo.put_saga("l1", "p-1")
    got, report = drift_json(capsys, dynamo, phase)
    assert (got, report["legacyRows"], report["healthy"]) == (code, 1, code == 0)


@pytest.mark.parametrize(
    ("phase", "code"), [("legacy", 1), ("migrating", 0), ("rolling-back", 0), ("sharded", 0)]
)
def test_sharded_rows_exit_1_only_in_phase_legacy(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], phase: str, code: int
) -> None:
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    got, _ = drift_json(capsys, dynamo, phase)
    assert got == code


def test_human_report_names_the_drifted_rows_and_the_verdict(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    plant_drift(dynamo)
    code, out, _ = run(capsys, "--table", dynamo.table_name, "--phase", "migrating", "drift")
    assert code == 1
    assert "misrouted: RSAGA#misrouted" in out
    assert "unindexed: RSAGA#no-sort-key" in out
    assert "stray: RSAGA#stray" in out
    assert "verdict: DRIFT (3 finding(s))" in out


def test_a_healthy_table_exits_0(dynamo: Backend, capsys: pytest.CaptureFixture[str]) -> None:
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    code, out, _ = run(capsys, "--table", dynamo.table_name, "--phase", "sharded", "drift")
    assert code == 0
    assert "verdict: healthy in phase sharded" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["drift"], "no table given"),
        (["--table", "tbl", "drift", "--scan-rate", "0"], "--scan-rate"),
        (["--table", "tbl", "drift", "--segments", "65"], "--segments"),
    ],
)
def test_bad_usage_exits_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert message in err


def test_a_missing_table_is_an_error_on_stderr_with_exit_1(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--table", "no-such-table", "--max-attempts", "1", "drift")
    assert (code, out) == (1, "")
    assert "no-such-table" in err or "ResourceNotFound" in err


# ---- without overrides: judged against the control record ----------------------------------


def settled() -> datetime:
    """A clock past the migrating state's effectiveAt plus the in-flight margin: a completing
    move, forced or not, waits until then."""
    return utc_now() + timedelta(seconds=91)


def record_drift(capsys: pytest.CaptureFixture[str], dynamo: Backend) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, "--table", dynamo.table_name, "drift", "--json")
    (line,) = out.splitlines()
    return code, json.loads(line)


def test_without_overrides_drift_is_judged_against_the_record(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    code, report = record_drift(capsys, dynamo)  # never migrated: legacy
    assert (code, report["phase"], report["unexpectedShardedRows"]) == (1, "legacy", 1)

    store = ControlStore(dynamo.client, dynamo.table_name)
    set_phase(store, "migrating", changed_by="ops", reason="start")
    code, report = record_drift(capsys, dynamo)
    assert (code, report["phase"], report["healthy"]) == (0, "migrating", True)

    set_phase(store, "sharded", changed_by="ops", reason="done", force=True, clock=settled)
    dynamo.put_saga("l1", "p-2")
    code, report = record_drift(capsys, dynamo)
    assert (code, report["phase"], report["unexpectedLegacyRows"]) == (1, "sharded", 1)


def test_a_deleted_record_is_drift_and_reads_every_layout_its_history_names(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ControlStore(dynamo.client, dynamo.table_name)
    set_phase(store, "migrating", changed_by="ops", reason="start")
    set_phase(store, "sharded", changed_by="ops", reason="done", force=True, clock=settled)
    dynamo.client.delete_item(TableName=dynamo.table_name, Key=serialize(state_key()))
    dynamo.put_saga("l1", "p-2")  # on legacy: still read, since history names legacy
    code, report = record_drift(capsys, dynamo)
    assert code == 1
    assert report["controlRecordMissing"] is True
    assert report["unexpectedLegacyRows"] == 0
    assert "STATE item is missing" in report["findings"][0]


# ---- progress: stderr only ----------------------------------------------------------------


@pytest.fixture
def progress_logged_every_update(monkeypatch: pytest.MonkeyPatch) -> None:
    """The non-terminal display (whatever the shell running the tests is) with a log line at
    every update instead of every 10 s."""
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # rich: stderr is not a terminal
    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.0)


def test_progress_goes_to_stderr_and_stdout_is_the_json_report_alone(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], progress_logged_every_update: None
) -> None:
    # Given a table of saga rows and rows of other entities (the scan examines both)
    for n in range(12):
        dynamo.put_saga(f"s{n}", f"p-{n}", gsi4pk="shard")
    for n in range(5):
        dynamo.client.put_item(
            TableName=dynamo.table_name,
            Item=serialize({"PK": f"LEASE#{n}", "SK": "META", "entityType": "Lease"}),
        )

    # When drift runs with --json, stdout and stderr captured apart
    code, out, err = run(
        capsys,
        "--table",
        dynamo.table_name,
        "--phase",
        "sharded",
        "--shards",
        str(N),
        "drift",
        "--json",
        "--segments",
        "2",
    )

    # Then stdout is one JSON object and nothing else
    assert code == 0
    (line,) = out.splitlines()
    report = json.loads(line)
    assert report["scannedSagaRows"] == 12
    for progress_text in ("rows/s", "ETA", "index reads", "base-table scan", "partitions"):
        assert progress_text not in out
    # and stderr has the progress: the index reads (the legacy COUNT and N shard keys), then
    # the scan against the table's ItemCount (17 items: 12 sagas and 5 leases), to its end
    assert f"index reads: 1 of {N + 1} partitions" in err
    assert f"index reads: done, {N + 1} partitions in " in err
    assert "base-table scan: " in err
    assert " of ~17 rows (" in err
    assert "rows/s" in err
    assert "ETA " in err
    assert "base-table scan: done, 17 rows in " in err
    assert "12 saga rows" in err
    assert "ItemCount, about 17 items (DescribeTable" in err


def test_the_human_report_carries_no_progress_either(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], progress_logged_every_update: None
) -> None:
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")
    code, out, err = run(capsys, "--table", dynamo.table_name, "--phase", "sharded", "drift")
    assert code == 0
    assert out.startswith("drift report: ")
    assert "rows/s" not in out
    assert "base-table scan" not in out
    assert "base-table scan: done, 1 rows in " in err


def test_without_an_item_count_the_scan_shows_rows_and_rate_but_no_eta(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    progress_logged_every_update: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given DescribeTable refused (the operator's role lacks dynamodb:DescribeTable)
    real_client = CliContext.client

    def refusing(cli: CliContext) -> Any:
        client = real_client.fget(cli)  # type: ignore[attr-defined]
        client.meta.events.register("before-call.dynamodb.DescribeTable", _access_denied)
        return client

    monkeypatch.setattr(CliContext, "client", property(refusing))
    dynamo.put_saga("s1", "p-1", gsi4pk="shard")

    # When drift runs
    code, out, err = run(
        capsys, "--table", dynamo.table_name, "--phase", "sharded", "drift", "--json"
    )

    # Then it says why there is no ETA, and the scan still shows its rows and rate
    assert code == 0
    assert json.loads(out)["scannedSagaRows"] == 1
    assert "no ETA for the base-table scan: DescribeTable" in err
    assert "AccessDeniedException" in err
    scan_lines = [line for line in err.splitlines() if "base-table scan: 1 rows, " in line]
    assert scan_lines
    assert all("rows/s" in line and "ETA" not in line for line in scan_lines)


def _access_denied(**_: Any) -> tuple[Any, dict[str, Any]]:
    error = {"Code": "AccessDeniedException", "Message": "not authorized: dynamodb:DescribeTable"}
    return AWSResponse("", 400, {}, None), {
        "Error": error,
        "ResponseMetadata": {"HTTPStatusCode": 400},
    }


@pytest.mark.parametrize("person", [None, 42, "p-1"])
def test_a_row_left_on_the_legacy_key_in_sharded_exits_1_whatever_its_person(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], person: Any
) -> None:
    # Given sharded(16) with one row still on the legacy key, its personId unusable or not
    dynamo.put_saga("s1", "p-2", gsi4pk="shard")
    dynamo.put_saga("left", person)
    code, report = drift_json(capsys, dynamo, "sharded")
    # Then it is drift: no reader of sharded reads the legacy key
    assert code == 1
    assert (report["unexpectedLegacyRows"], report["anomalousRows"]) == (1, 0)
    assert [row["sagaId"] for row in report["unexpectedLegacy"]] == ["left"]
