"""`saga-index shard` and `saga-index sagas ...`: data on stdout, exit codes as documented."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys
from saga_index.layout_change.record.store import ControlStore
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.control_fixtures import set_phase


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli", synthesized_template, endpoint_url=None)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[Any], str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    return int(exited.value.code or 0), lines, err


def test_shard_prints_one_json_object_per_person(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "--shards", "16", "shard", "p-1", "José", "a#b")
    assert code == 0
    assert lines == [
        {
            "personId": p,
            "shard": keys.parse_gsi4pk(keys.shard_gsi4pk_for_person(p, 16)),
            "gsi4pk": keys.shard_gsi4pk_for_person(p, 16),
        }
        for p in ["p-1", "José", "a#b"]
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shards", "12", "shard", "p"], "power of two"),
        (["--shards", "0", "shard", "p"], "power of two"),
        (
            ["--phase", "sideways", "shard", "p"],
            "'sideways' is not one of 'legacy', 'migrating', 'sharded', 'rolling-back'",
        ),
        # resharding names two shard counts: no reader's view fits one --shards.
        (["--phase", "resharding", "shard", "p"], "'resharding' is not one of"),
        (["shard", ""], "personId must be a non-empty string"),
        (["shard", "x" * 1100], "too long"),
        (["shard"], "Missing argument"),
        (["sagas", "open"], "no table given"),
        (["frobnicate"], "No such command"),
    ],
)
def test_bad_usage_or_input_exits_2_naming_the_problem(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, lines, err = run(capsys, *argv)
    assert code == 2
    assert lines == []
    assert message in err


def test_sagas_commands_print_rows_as_stored_in_the_overridden_phase(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("s1", "p-1", state="OPENED", score=7, ratio="0.5")
    dynamo.put_saga("s2", "p-2", gsi4pk="shard", state="SIGNED")
    dynamo.put_saga("odd", None, GSI4SK="#2026-01-01T00:00:00Z")
    table = ["--table", dynamo.table_name]

    code, lines, err = run(capsys, *table, "--phase", "migrating", "sagas", "all")
    assert code == 0
    assert sorted(line["sagaId"] for line in lines) == ["odd", "s1", "s2"]
    s1 = next(line for line in lines if line["sagaId"] == "s1")
    assert s1["score"] == 7
    assert s1["GSI4PK"] == "RenewalSaga"
    assert "anomaly" in err

    code, lines, _ = run(capsys, *table, "--phase", "migrating", "sagas", "open")
    assert sorted(line["sagaId"] for line in lines) == ["odd", "s1"]

    code, lines, _ = run(capsys, *table, "--phase", "sharded", "sagas", "by-person", "p-2")
    assert [line["sagaId"] for line in lines] == ["s2"]

    code, lines, _ = run(capsys, *table, "--phase", "legacy", "sagas", "by-person", "p-2")
    assert (code, lines) == (0, [])


def test_a_failed_enumeration_exits_1_and_prints_no_partial_data(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamo.put_saga("s1", "p-1")
    monkeypatch.setenv("SAGA_TABLE_NAME", "no-such-table")
    # Both overrides: the reads do not need the record, so the enumeration is what fails.
    overrides = ["--phase", "migrating", "--shards", "16"]
    code, lines, err = run(capsys, "--max-attempts", "1", *overrides, "sagas", "all")
    assert code == 1
    assert lines == []
    # Issue 12: a missing table is named (it used to surface as "could not enumerate" per shard).
    assert "table 'no-such-table' does not exist" in err


def test_a_record_unreadable_for_a_missing_table_exits_1_naming_the_table(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = run(
        capsys, "--table", "no-such-table", "--max-attempts", "1", "sagas", "all"
    )
    assert (code, lines) == (1, [])
    # Issue 12: when the record is unreadable because the table is missing, the table is named.
    assert "table 'no-such-table' does not exist" in err


def test_without_overrides_reads_follow_the_record(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("old", "p-1")
    dynamo.put_saga("new", "p-2", gsi4pk="shard")
    table = ["--table", dynamo.table_name]

    # Never migrated: the record says legacy, so the sharded row is not read.
    code, lines, _ = run(capsys, *table, "sagas", "all")
    assert (code, [line["sagaId"] for line in lines]) == (0, ["old"])

    store = ControlStore(dynamo.client, dynamo.table_name)
    set_phase(store, "migrating", changed_by="ops", reason="start")
    code, lines, _ = run(capsys, *table, "sagas", "all")
    assert sorted(line["sagaId"] for line in lines) == ["new", "old"]
    code, lines, _ = run(capsys, *table, "sagas", "by-person", "p-2")
    assert [line["sagaId"] for line in lines] == ["new"]


def test_overrides_read_as_a_reader_in_that_phase_would_whatever_the_record_says(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("old", "p-1")
    dynamo.put_saga("new", "p-2", gsi4pk="shard", shard_count=4)
    store = ControlStore(dynamo.client, dynamo.table_name)
    set_phase(store, "migrating", changed_by="ops", reason="start", shard_count=4)
    table = ["--table", dynamo.table_name]

    code, lines, err = run(capsys, *table, "--phase", "sharded", "sagas", "all")
    # --phase alone takes N from the record (4).
    assert (code, [line["sagaId"] for line in lines]) == (0, ["new"])
    assert "read override" in err
    code, lines, _ = run(capsys, *table, "--phase", "legacy", "sagas", "all")
    assert [line["sagaId"] for line in lines] == ["old"]
    # --shards alone keeps the record's phase (migrating) with another N.
    code, lines, err = run(capsys, *table, "--shards", "16", "sagas", "all")
    assert code == 0
    assert "writes sharded(16); reads legacy, then sharded(16)" in err


def test_the_phase_environment_variables_no_longer_override_the_record(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamo.put_saga("s1", "p-1", gsi4pk="shard", shard_count=4)
    monkeypatch.setenv("SAGA_TABLE_NAME", dynamo.table_name)
    monkeypatch.setenv("SAGA_INDEX_SHARDS", "4")
    monkeypatch.setenv("SAGA_INDEX_PHASE", "sharded")
    code, lines, err = run(capsys, "sagas", "by-person", "p-1")
    # No record at all, and a row on a shard key: the record is lost, whatever the variables say
    assert (code, lines) == (1, [])
    assert "the control record is lost" in err
    code, lines, _ = run(capsys, "--phase", "sharded", "--shards", "4", "sagas", "by-person", "p-1")
    assert (code, [line["sagaId"] for line in lines]) == (0, ["s1"])


def test_shard_takes_n_from_the_record_when_a_table_is_given(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ControlStore(dynamo.client, dynamo.table_name)
    set_phase(store, "migrating", changed_by="ops", reason="start", shard_count=4)
    code, lines, _ = run(capsys, "--table", dynamo.table_name, "shard", "p-1")
    assert (code, lines[0]["gsi4pk"]) == (0, keys.shard_gsi4pk_for_person("p-1", 4))
    code, lines, _ = run(capsys, "shard", "p-1")  # no table: the default N
    assert lines[0]["gsi4pk"] == keys.shard_gsi4pk_for_person("p-1", 16)
