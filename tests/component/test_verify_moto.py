"""Parity (`ParityVerifier`, `saga-index verify`) on moto: planted mismatches are caught by key,
clean tables pass in every phase, mismatches are re-checked once, snapshots compare."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys, names
from saga_index.index.layout import Layout
from saga_index.layout_change.checks.parity import ParityReport, ParityVerifier, Snapshot
from saga_index.layout_change.record.routing import Routing
from saga_index_cli import progress
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.drift_contract import N, put_raw, wrong_shard_of

PEOPLE = [f"p-{n}" for n in range(6)]


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("verify", synthesized_template, endpoint_url=None)


def seed(dynamo: Backend, where: str | None) -> None:
    """Two sagas per person (one open, one signed); where=None legacy, 'shard', or 'mixed'."""
    for n, person in enumerate(PEOPLE):
        for m, state in enumerate(("OPENED", "SIGNED")):
            key = where if where != "mixed" else ("shard" if (n + m) % 2 else None)
            dynamo.put_saga(
                f"{person}-{m}",
                person,
                gsi4pk=key,
                state=state,
                opened_at=f"2026-0{m + 1}-01T00:00:00.000Z",
            )


def restamp_all(dynamo: Backend, *, to_shard: bool) -> None:
    for raw in dynamo.scan_all():
        person = raw["personId"]["S"]
        target = keys.shard_gsi4pk_for_person(person, N) if to_shard else keys.LEGACY_GSI4PK
        dynamo.client.update_item(
            TableName=dynamo.table_name,
            Key={"PK": raw["PK"], "SK": raw["SK"]},
            UpdateExpression="SET GSI4PK = :pk",
            ExpressionAttributeValues={":pk": {"S": target}},
        )


def verify(
    dynamo: Backend, phase: str, *, snapshot: Snapshot | None = None, **kwargs: Any
) -> ParityReport:
    verifier = ParityVerifier(
        dynamo.client,
        dynamo.table_name,
        phase=phase,
        shard_count=N,
        recheck_delay_seconds=kwargs.pop("delay", 0.0),
        **kwargs,
    )
    return verifier.verify(sample=100, seed=7, snapshot=snapshot).report


def keys_of(findings: Any) -> set[tuple[str, str]]:
    return {(f.read.label if f.read else "", f.key[0]) for f in findings}


@pytest.mark.parametrize(
    ("phase", "where"),
    [("legacy", None), ("migrating", "mixed"), ("sharded", "shard"), ("rolling-back", "mixed")],
)
def test_a_clean_table_is_identical_in_its_phase(dynamo: Backend, phase: str, where: str) -> None:
    seed(dynamo, where)
    report = verify(dynamo, phase)
    assert report.ok
    assert (report.missing, report.extra, report.misrouted) == ((), (), ())
    assert report.truth_rows == 12
    assert report.read_counts["all-sagas"] == 12
    assert report.read_counts["open-sagas"] == 6
    assert report.persons == tuple(PEOPLE)
    assert all(report.read_counts[f"by-person:{p}"] == 2 for p in PEOPLE)
    assert report.rechecked == 0


def test_a_legacy_row_in_phase_sharded_is_missing_from_every_read_that_should_return_it(
    dynamo: Backend,
) -> None:
    seed(dynamo, "shard")
    dynamo.put_saga("stuck", "p-0", state="OPENED", opened_at="2026-03-01T00:00:00.000Z")
    report = verify(dynamo, "sharded")
    assert not report.ok
    assert keys_of(report.missing) == {
        ("all-sagas", "RSAGA#stuck"),
        ("open-sagas", "RSAGA#stuck"),
        ("by-person:p-0", "RSAGA#stuck"),
    }
    assert {f.reason for f in report.missing} == {
        "on the legacy key, which phase sharded does not read"
    }
    assert (report.extra, report.misrouted) == ((), ())


def test_an_unindexed_row_is_missing_in_every_phase(dynamo: Backend) -> None:
    seed(dynamo, "mixed")
    dynamo.put_saga("hidden", "p-1", state="SIGNED", GSI4SK=None)
    report = verify(dynamo, "migrating")
    assert keys_of(report.missing) == {
        ("all-sagas", "RSAGA#hidden"),
        ("by-person:p-1", "RSAGA#hidden"),
    }
    assert "in no index partition" in report.missing[0].reason


def test_a_non_saga_row_under_the_saga_index_is_extra(dynamo: Backend) -> None:
    seed(dynamo, "shard")
    put_raw(
        dynamo,
        {
            "PK": "LEASE#l-9",
            "SK": "META",
            "state": "OPENED",
            "personId": "p-2",
            "GSI4PK": keys.shard_gsi4pk_for_person("p-2", N),
            "GSI4SK": "p-2#2026-04-01T00:00:00.000Z",
        },
    )
    report = verify(dynamo, "sharded")
    assert keys_of(report.extra) == {
        ("all-sagas", "LEASE#l-9"),
        ("open-sagas", "LEASE#l-9"),
        ("by-person:p-2", "LEASE#l-9"),
    }
    assert all("not a saga row" in f.reason for f in report.extra)
    assert report.missing == ()


def test_a_row_indexed_under_another_persons_sort_key_is_extra_for_that_person(
    dynamo: Backend,
) -> None:
    seed(dynamo, "shard")
    dynamo.put_saga(
        "borrowed",
        "p-3",
        gsi4pk=keys.shard_gsi4pk_for_person("p-4", N),
        GSI4SK="p-4#2026-05-01T00:00:00.000Z",
    )
    report = verify(dynamo, "sharded")
    assert ("by-person:p-4", "RSAGA#borrowed") in keys_of(report.extra)
    assert ("by-person:p-3", "RSAGA#borrowed") in keys_of(report.missing)


def test_a_misrouted_row_is_reported_as_misrouted_once(dynamo: Backend) -> None:
    seed(dynamo, "shard")
    wrong = keys.sharded_gsi4pk(wrong_shard_of("p-5"))
    dynamo.put_saga("lost", "p-5", gsi4pk=wrong, opened_at="2026-06-01T00:00:00.000Z")
    report = verify(dynamo, "sharded")
    (finding,) = report.misrouted
    assert finding.key == ("RSAGA#lost", "META")
    assert finding.gsi4pk == wrong
    assert finding.expected_gsi4pk == keys.shard_gsi4pk_for_person("p-5", N)
    # The enumerations read every shard and find it; the person's read does not, and says why
    # once, as misrouted rather than also as missing.
    assert report.missing == ()
    assert not report.ok


def test_a_mismatch_that_heals_during_the_recheck_delay_does_not_count(dynamo: Backend) -> None:
    # Given a row the backfill is still moving, and one that stays behind
    seed(dynamo, "shard")
    dynamo.put_saga("moving", "p-0", opened_at="2026-07-01T00:00:00.000Z")
    dynamo.put_saga("stuck", "p-1", opened_at="2026-07-01T00:00:00.000Z")
    slept: list[float] = []

    def backfill_finishes_moving(seconds: float) -> None:
        slept.append(seconds)
        dynamo.client.update_item(
            TableName=dynamo.table_name,
            Key={"PK": {"S": "RSAGA#moving"}, "SK": {"S": "META"}},
            UpdateExpression="SET GSI4PK = :pk",
            ExpressionAttributeValues={":pk": {"S": keys.shard_gsi4pk_for_person("p-0", N)}},
        )

    # When parity runs in phase sharded
    report = verify(dynamo, "sharded", delay=1.5, sleep=backfill_finishes_moving)
    # Then it waited once, re-checked both, and only the row still behind counts
    assert slept == [1.5]
    assert report.rechecked == 6
    assert report.resolved_on_recheck == 3
    assert {f.key[0] for f in report.missing} == {"RSAGA#stuck"}


def test_a_snapshot_before_the_backfill_compares_identical_after_it(dynamo: Backend) -> None:
    seed(dynamo, None)
    before = ParityVerifier(dynamo.client, dynamo.table_name, phase="legacy", shard_count=N)
    baseline = before.verify(sample=100, seed=1).snapshot
    restamp_all(dynamo, to_shard=True)
    snapshot = Snapshot.from_document(json.loads(json.dumps(baseline.to_document())))
    report = verify(dynamo, "sharded", snapshot=snapshot)
    assert report.ok
    assert report.changed == ()
    assert report.persons == tuple(PEOPLE)
    assert report.snapshot_created_at == baseline.created_at


def test_compare_reports_a_lost_row_as_missing_and_explained_changes_as_changed(
    dynamo: Backend,
) -> None:
    seed(dynamo, None)
    baseline = (
        ParityVerifier(dynamo.client, dynamo.table_name, phase="legacy", shard_count=N)
        .verify(sample=100, seed=1)
        .snapshot
    )
    restamp_all(dynamo, to_shard=True)
    # A row lost by the migration, a saga closed and a saga opened since the snapshot
    dynamo.client.delete_item(
        TableName=dynamo.table_name, Key={"PK": {"S": "RSAGA#p-1-0"}, "SK": {"S": "META"}}
    )
    dynamo.client.update_item(
        TableName=dynamo.table_name,
        Key={"PK": {"S": "RSAGA#p-2-0"}, "SK": {"S": "META"}},
        UpdateExpression="SET #s = :signed",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":signed": {"S": "SIGNED"}},
    )
    dynamo.put_saga("fresh", "p-3", gsi4pk="shard", opened_at="2026-08-01T00:00:00.000Z")
    report = verify(dynamo, "sharded", snapshot=baseline)
    assert not report.ok
    assert keys_of(report.missing) == {
        ("all-sagas", "RSAGA#p-1-0"),
        ("open-sagas", "RSAGA#p-1-0"),
        ("by-person:p-1", "RSAGA#p-1-0"),
    }
    assert {f.source for f in report.missing} == {"snapshot"}
    assert keys_of(report.changed) == {
        ("open-sagas", "RSAGA#p-2-0"),
        ("all-sagas", "RSAGA#fresh"),
        ("open-sagas", "RSAGA#fresh"),
        ("by-person:p-3", "RSAGA#fresh"),
    }
    assert report.extra == ()


# ---- the CLI ----------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def cli(dynamo: Backend, phase: str, *argv: str) -> list[str]:
    return [
        "--table",
        dynamo.table_name,
        "--phase",
        phase,
        "--shards",
        str(N),
        "verify",
        "--recheck-delay",
        "0",
        *argv,
    ]


def test_cli_json_has_ok_missing_extra_misrouted_and_exit_0_when_identical(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, "shard")
    code, out, _ = run(capsys, *cli(dynamo, "sharded", "--json", "--sample", "3", "--seed", "5"))
    (line,) = out.splitlines()
    report = json.loads(line)
    assert code == 0
    assert report["ok"] is True
    assert (report["missing"], report["extra"], report["misrouted"]) == ([], [], [])
    assert len(report["persons"]) == 3
    assert report["seed"] == 5


def test_cli_exits_1_on_a_mismatch_and_names_the_row(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(dynamo, "shard")
    dynamo.put_saga("stuck", "p-0")
    code, out, _ = run(capsys, *cli(dynamo, "sharded"))
    assert code == 1
    assert "RSAGA#stuck META" in out
    assert "verdict: MISMATCH" in out


def test_cli_snapshot_then_compare_round_trips(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo, None)
    path = tmp_path / "before.json"
    code, _, _ = run(capsys, *cli(dynamo, "legacy", "--snapshot", str(path), "--sample", "4"))
    assert code == 0
    document = json.loads(path.read_text())
    assert document["format"] == "saga-index-verify-snapshot"
    assert len(document["persons"]) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["before.json"]  # no temp file left
    restamp_all(dynamo, to_shard=True)
    code, out, _ = run(capsys, *cli(dynamo, "sharded", "--compare", str(path), "--json"))
    report = json.loads(out)
    assert code == 0
    assert report["comparedWithSnapshot"] == document["createdAt"]
    assert report["persons"] == document["persons"]


def test_cli_refuses_to_overwrite_a_snapshot(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("precious")
    code, out, err = run(capsys, *cli(dynamo, "legacy", "--snapshot", str(path)))
    assert (code, out) == (2, "")
    assert "refusing to overwrite" in err
    assert "--overwrite" in err
    assert path.read_text() == "precious"


def test_cli_replaces_a_snapshot_only_with_overwrite(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text("old")
    argv = cli(dynamo, "legacy", "--snapshot", str(path), "--overwrite")
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    assert json.loads(path.read_text())["format"] == "saga-index-verify-snapshot"
    # --overwrite names no file of its own: without --snapshot it is bad usage
    code, _, err = run(capsys, *cli(dynamo, "legacy", "--overwrite"))
    assert code == 2
    assert "--overwrite applies to --snapshot FILE only" in err


def _snapshot_text(dynamo: Backend, **changes: Any) -> str:
    document: dict[str, Any] = {
        "format": "saga-index-verify-snapshot",
        "version": 1,
        "table": dynamo.table_name,
        "index": names.INDEX_NAME,
        "phase": "legacy",
        "shardCount": N,
        "createdAt": "2026-07-01T00:00:00.000000Z",
        "persons": [],
        "results": {"all-sagas": [], "open-sagas": [], "by-person": {}},
    }
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read snapshot"),
        ("{not json", "is not valid JSON"),
        ('["a list"]', "a snapshot is a JSON object"),
        ('{"format": "something-else"}', "not a verify snapshot"),
        ("version", "unsupported snapshot version"),
        ("pairs", "not a [PK, SK] pair"),
        ("persons", "exactly the listed persons"),
        ("table", "the snapshot was taken of table 'another-table'"),
    ],
)
def test_cli_compare_with_a_missing_or_damaged_file_exits_2_naming_the_problem(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str | None,
    message: str,
) -> None:
    path = tmp_path / "snapshot.json"
    damaged = {
        "version": _snapshot_text(dynamo, version=2),
        "pairs": _snapshot_text(
            dynamo, results={"all-sagas": [["only-pk"]], "open-sagas": [], "by-person": {}}
        ),
        "persons": _snapshot_text(dynamo, persons=["p-1"]),
        "table": _snapshot_text(dynamo, table="another-table"),
    }
    if content is not None:
        path.write_text(damaged.get(content, content))
    code, out, err = run(capsys, *cli(dynamo, "sharded", "--compare", str(path)))
    assert (code, out) == (2, "")
    assert message in err
    assert str(path) in err or "another-table" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--snapshot", "a.json", "--compare", "b.json"], "mutually exclusive"),
        (["--compare", "b.json", "--sample", "5"], "--sample cannot be combined with --compare"),
        (["--compare", "b.json", "--seed", "5"], "--seed cannot be combined with --compare"),
        (["--sample", "-1"], "--sample"),
    ],
)
def test_cli_bad_option_combinations_exit_2(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    code, out, err = run(capsys, *cli(dynamo, "sharded", *extra))
    assert (code, out) == (2, "")
    assert message in err


def test_cli_snapshot_into_a_missing_directory_exits_2_before_reading(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "no-such-dir" / "before.json"
    code, out, err = run(capsys, *cli(dynamo, "legacy", "--snapshot", str(path)))
    assert (code, out) == (2, "")
    assert "is not a directory" in err
    assert not path.parent.exists()


def test_cli_snapshot_is_written_even_when_parity_fails_and_the_exit_code_says_so(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    seed(dynamo, "shard")
    dynamo.put_saga("stuck", "p-0")
    path = tmp_path / "baseline.json"
    code, _, _ = run(capsys, *cli(dynamo, "sharded", "--snapshot", str(path)))
    assert code == 1
    assert Snapshot.from_document(json.loads(path.read_text())).table_name == dynamo.table_name


# ---- parity along a routing (the control record's state) ------------------------------------

SPLIT = Routing.between(Layout.sharded(16), Layout.sharded(32))


def verify_routed(dynamo: Backend, routing: Routing) -> ParityReport:
    verifier = ParityVerifier(
        dynamo.client, dynamo.table_name, routing=routing, recheck_delay_seconds=0.0
    )
    return verifier.verify(sample=100, seed=7).report


def test_a_split_in_progress_reads_both_layouts_and_is_identical(dynamo: Backend) -> None:
    for n, person in enumerate(PEOPLE):
        count = 16 if n % 2 else 32
        dynamo.put_saga(person, person, gsi4pk=keys.shard_gsi4pk_for_person(person, count))
    report = verify_routed(dynamo, SPLIT)
    assert report.ok, report.to_dict()
    assert (report.phase.value, report.shard_count) == ("resharding", 32)
    assert report.read_counts["all-sagas"] == len(PEOPLE)


def test_a_row_on_no_layout_of_the_split_is_misrouted_toward_the_writers_key(
    dynamo: Backend,
) -> None:
    # p-1 is shard 14 of 16 and 30 of 32; shard 3 is neither
    dynamo.put_saga("lost", "p-1", gsi4pk=keys.sharded_gsi4pk(3))
    report = verify_routed(dynamo, SPLIT)
    (finding,) = report.misrouted
    assert finding.expected_gsi4pk == keys.shard_gsi4pk_for_person("p-1", 32)
    assert "resharding" in finding.reason


def test_a_row_beyond_the_routings_shards_is_missing_and_says_why(dynamo: Backend) -> None:
    dynamo.put_saga("far", "p-1", gsi4pk=keys.sharded_gsi4pk(20))
    report = verify_routed(dynamo, Routing.between(Layout.sharded(16)))
    assert {f.reason for f in report.missing} == {"under shard 20, outside the 16 shards read"}
    assert report.misrouted == ()


# ---- progress: stderr only ----------------------------------------------------------------


def test_cli_progress_goes_to_stderr_and_stdout_is_the_json_report_alone(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the non-terminal display (whatever runs the tests) logging at every update
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # rich: stderr is not a terminal
    monkeypatch.setattr(progress, "PROGRESS_LOG_SECONDS", 0.0)
    seed(dynamo, "shard")  # 12 saga rows of 6 persons

    # When verify runs with --json, sampling 3 persons
    code, out, err = run(
        capsys, *cli(dynamo, "sharded", "--json", "--sample", "3", "--seed", "5", "--segments", "2")
    )

    # Then stdout is one JSON object and nothing else
    assert code == 0
    (line,) = out.splitlines()
    report = json.loads(line)
    assert (report["ok"], report["truthRows"]) == (True, 12)
    for progress_text in ("rows/s", "ETA", "base-table scan", "repository reads"):
        assert progress_text not in out
    # and stderr has the scan against the table's ItemCount, then the reads (all-sagas,
    # open-sagas and one per sampled person), each to its end
    assert "base-table scan (consistent): " in err
    assert " of ~12 rows (" in err
    assert "rows/s" in err
    assert "ETA " in err
    assert "base-table scan (consistent): done, 12 rows in " in err
    assert "repository reads: 0 of 5 reads (0.0 %)" in err
    assert "repository reads: 5 of 5 reads (100.0 %)" in err
    assert "repository reads: done, 5 reads in " in err
    assert err.index("base-table scan (consistent): done") < err.index("repository reads: 0 of")
