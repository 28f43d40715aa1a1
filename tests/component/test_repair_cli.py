"""`saga-index repair-anomaly` against moto: output contract and exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from saga_index.index import keys
from saga_index.store.dynamo.codec import deserialize, serialize
from saga_index.store.repair import tenancy_key
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend

OPENED_AT = "2026-01-01T00:00:00.000Z"


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        backend = make_backend("cli-repair", synthesized_template, endpoint_url=None)
        backend.put_saga("no-person", None, GSI4SK=f"#{OPENED_AT}")
        backend.client.put_item(
            TableName=backend.table_name,
            Item=serialize({**tenancy_key("lease-no-person"), "personId": "p-7"}),
        )
        yield backend


def run(capsys: pytest.CaptureFixture[str], dynamo: Backend, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["--table", dynamo.table_name, "repair-anomaly", *argv])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def person_of(dynamo: Backend, saga_id: str) -> tuple[Any, Any]:
    raw = dynamo.get(f"RSAGA#{saga_id}", "META")
    assert raw is not None
    item = deserialize(raw)
    return item.get("personId"), item.get("GSI4SK")


def test_given_an_anomaly_when_run_without_apply_then_a_dry_run_prints_what_it_would_write(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dynamo.scan_all()

    code, out, err = run(capsys, dynamo, "--saga-id", "no-person", "--from-lease")

    assert code == 0, err
    [line] = out.splitlines()
    result = json.loads(line)
    assert result["status"] == "would-repair"
    assert result["dryRun"] is True
    assert result["personSource"] == "lease"
    # GSI4PK too, by the write rule of the record's state (never migrated here: legacy), so a
    # repaired row is found by `sagas by-person` at once
    assert result["write"] == {
        "personId": "p-7",
        "GSI4SK": keys.gsi4sk("p-7", OPENED_AT),
        "GSI4PK": keys.LEGACY_GSI4PK,
    }
    assert (result["pk"], result["sk"]) == ("RSAGA#no-person", "META")
    assert dynamo.scan_all() == before


def test_given_the_key_the_backfill_listed_when_applied_then_the_row_is_repaired_once(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    key = ["--pk", "RSAGA#no-person", "--sk", "META", "--from-lease", "--apply"]

    code, out, err = run(capsys, dynamo, *key)

    assert code == 0, err
    assert json.loads(out)["status"] == "repaired"
    assert "`sagas by-person` finds it now" in err
    assert person_of(dynamo, "no-person") == ("p-7", keys.gsi4sk("p-7", OPENED_AT))
    # Run again: nothing left to do, still success
    code, out, _ = run(capsys, dynamo, *key)
    assert code == 0
    assert json.loads(out)["status"] == "nothing-to-repair"


def test_given_a_person_id_when_applied_then_it_is_the_person_written(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, dynamo, "--saga-id", "no-person", "--person-id", "p-1", "--apply")

    assert code == 0, err
    assert json.loads(out)["personSource"] == "given"
    assert person_of(dynamo, "no-person") == ("p-1", keys.gsi4sk("p-1", OPENED_AT))


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--from-lease"], "--saga-id"),
        (["--pk", "RSAGA#no-person", "--from-lease"], "--sk"),
        (["--saga-id", "no-person", "--pk", "RSAGA#no-person", "--from-lease"], "not both"),
        (["--saga-id", "no-person"], "--person-id"),
        (["--saga-id", "no-person", "--person-id", "p-1", "--from-lease"], "--from-lease"),
        (["--saga-id", "no-person", "--person-id", ""], "personId"),
        (["--pk", "LEASE#lease-no-person", "--sk", "META", "--from-lease"], "saga table key"),
    ],
)
def test_given_bad_usage_then_exit_2_naming_what_is_wrong_and_nothing_is_written(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    before = dynamo.scan_all()

    code, out, err = run(capsys, dynamo, *argv, "--apply")

    assert code == 2
    assert named in err
    assert out == ""
    assert dynamo.scan_all() == before


def test_given_no_row_at_the_key_then_exit_1_with_what_to_check(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, dynamo, "--saga-id", "gone", "--person-id", "p-1", "--apply")

    assert code == 1
    assert json.loads(out)["status"] == "not-found"
    assert "not repaired (not-found)" in err
    assert "mistyped" in err


def test_given_a_healthy_row_of_another_person_then_exit_1_and_it_is_left_alone(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.put_saga("healthy", "p-1")

    code, out, err = run(capsys, dynamo, "--saga-id", "healthy", "--person-id", "p-2", "--apply")

    assert code == 1
    assert json.loads(out)["status"] == "belongs-to-another-person"
    assert "does not move a saga to another person" in err
    assert person_of(dynamo, "healthy")[0] == "p-1"


def test_given_the_lease_is_gone_then_exit_1_asking_for_the_person(
    dynamo: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamo.client.delete_item(
        TableName=dynamo.table_name,
        Key={name: {"S": value} for name, value in tenancy_key("lease-no-person").items()},
    )

    code, out, err = run(capsys, dynamo, "--saga-id", "no-person", "--from-lease", "--apply")

    assert code == 1
    assert out == ""
    assert "which is gone: pass --person-id" in err
