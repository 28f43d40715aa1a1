"""Errors at the CLI's edge: a bad value is refused before any request
(exit 2, naming it), and a table that does not exist is named (exit 1, saying what to do)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from saga_index.index import names
from saga_index_cli import context, options
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


class RequestMade(AssertionError):
    """A client was built: the bad value should have been refused before any request."""


@pytest.fixture
def no_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise RequestMade("a client was built before the input was validated")

    monkeypatch.setattr(context, "make_client", refuse)
    monkeypatch.setattr(boto3, "client", refuse)


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-edge", synthesized_template, endpoint_url=None)


# ---- --endpoint-url ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["notaurl", "localhost:8000", "ftp://host", "http://"])
@pytest.mark.usefixtures("no_requests")
def test_an_endpoint_url_that_is_not_an_http_url_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, out, err = run(capsys, "--endpoint-url", url, "--table", "sagas", "phase", "show")
    assert code == 2
    assert repr(url) in err
    assert "--endpoint-url" in err
    assert "Traceback" not in err
    assert out == ""


@pytest.mark.usefixtures("no_requests")
def test_the_global_endpoint_variable_is_validated_too_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore applies it to every client it builds, and would raise ValueError there.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "notaurl")
    code, out, err = run(capsys, "--table", "sagas", "phase", "show")
    assert code == 2
    assert "$AWS_ENDPOINT_URL: 'notaurl'" in err
    assert out == ""


@pytest.mark.usefixtures("no_requests")
def test_the_dynamodb_endpoint_variable_is_validated_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The envvar of --endpoint-url: a bad value names the variable, not the option alone.
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "notaurl")
    code, _, err = run(capsys, "--table", "sagas", "phase", "show")
    assert code == 2
    assert "$AWS_ENDPOINT_URL_DYNAMODB: 'notaurl'" in err


@pytest.mark.usefixtures("no_requests")
def test_the_cloudwatch_endpoint_variable_is_validated_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "notaurl")
    code, _, err = run(capsys, "--table", "sagas", "status", "--alarms")
    assert code == 2
    assert "$AWS_ENDPOINT_URL_CLOUDWATCH: 'notaurl'" in err


@pytest.mark.parametrize("command", [("watch",), ("status", "--alarms")])
@pytest.mark.usefixtures("no_requests")
def test_a_bad_cloudwatch_endpoint_url_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    code, _, err = run(capsys, "--table", "sagas", *command, "--cloudwatch-endpoint-url", "notaurl")
    assert code == 2
    assert "'notaurl'" in err
    assert "Traceback" not in err


# ---- --table ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "named"),
    [("x", "'x'"), ("bad name!", "'bad name!'"), ("a" * 300, "300 characters")],
)
@pytest.mark.parametrize(
    "argv",
    [
        ("phase", "show"),
        ("--phase", "sharded", "--shards", "16", "sagas", "open"),
        ("--phase", "legacy", "--shards", "16", "drift"),
    ],
)
@pytest.mark.usefixtures("no_requests")
def test_a_table_name_dynamodb_would_refuse_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], table: str, named: str, argv: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, "--table", table, *argv)
    assert code == 2, err
    assert named in err
    assert "3-255" in err
    assert "could not enumerate" not in err
    assert out == ""


@pytest.mark.usefixtures("no_requests")
def test_a_table_name_from_the_environment_is_validated_too(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAGA_TABLE_NAME", "bad name!")
    code, _, err = run(capsys, "phase", "show")
    assert code == 2
    assert "'bad name!'" in err


def test_valid_table_names_at_the_bounds_pass_validation() -> None:
    for name in ("abc", "A-b_c.9", "a" * 255):
        assert options.table_name_option(None, None, name) == name  # type: ignore[arg-type]


# ---- a table that does not exist --------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ("phase", "show"),
        ("status",),
        ("--phase", "sharded", "--shards", "16", "sagas", "open"),
        ("--phase", "sharded", "--shards", "16", "drift"),
        ("--phase", "sharded", "--shards", "16", "verify", "--recheck-delay", "0"),
    ],
)
def test_a_missing_table_exits_1_naming_it_and_what_to_do(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, _out, err = run(capsys, "--region", "us-east-1", "--table", "no-such-table", *argv)
    assert code == 1, err
    assert "table 'no-such-table' does not exist" in err
    assert "--table" in err
    assert "--region" in err
    assert "could not enumerate" not in err
    assert "Traceback" not in err


# ---- verify --compare -------------------------------------------------------------------------


def _snapshot(path: Path, table_name: str, **changes: Any) -> Path:
    document: dict[str, Any] = {
        "format": "saga-index-verify-snapshot",
        "version": 1,
        "table": table_name,
        "index": names.INDEX_NAME,
        "phase": "legacy",
        "shardCount": 16,
        "createdAt": "2026-07-01T00:00:00.000000Z",
        "persons": ["p-1"],
        "results": {"all-sagas": [], "open-sagas": [], "by-person": {"p-1": []}},
    }
    document.update(changes)
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"phase": "sideways"}, "'sideways'"),
        ({"shardCount": 12}, "12"),
        ({"shardCount": 0}, "shardCount"),
        (
            {
                "persons": ["p" * 1100],
                "results": {"all-sagas": [], "open-sagas": [], "by-person": {"p" * 1100: []}},
            },
            "too long",
        ),
        ({"table": "another-table"}, "'another-table'"),
        ({"index": "GSI9"}, "'GSI9'"),
    ],
)
@pytest.mark.usefixtures("no_requests")
def test_an_unsuitable_snapshot_exits_2_before_any_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, changes: dict[str, Any], named: str
) -> None:
    path = _snapshot(tmp_path / "before.json", "sagas", **changes)
    code, out, err = run(capsys, "--table", "sagas", "verify", "--compare", str(path))
    assert code == 2, err
    assert named in err
    assert str(path) in err
    assert out == ""


# ---- --max-writes-per-second ------------------------------------------------------------------


@pytest.mark.parametrize("rate", ["1e-300", "0.05", "0", "nan", "1001"])
@pytest.mark.parametrize(
    "argv",
    [
        ("backfill", "--dry-run", "--max-writes-per-second"),
        ("backfill", "throttle", "--max-writes-per-second"),
    ],
)
@pytest.mark.usefixtures("no_requests")
def test_a_write_cap_outside_its_bounds_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], rate: str, argv: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, "--table", "sagas", *argv, rate)
    assert code == 2, err
    assert rate in err
    assert "--max-writes-per-second" in err
    assert out == ""


@pytest.mark.parametrize("floor", ["0", "-0.5", "1.5", "nan", "inf", "half"])
@pytest.mark.usefixtures("no_requests")
def test_a_pace_floor_outside_0_to_1_exits_2_naming_it_before_any_request(
    capsys: pytest.CaptureFixture[str], floor: str
) -> None:
    # refused before any client is built: nothing can have been written
    code, out, err = run(capsys, "--table", "sagas", "backfill", "--pace-floor", floor)
    assert code == 2, err
    assert floor in err
    assert "--pace-floor" in err
    assert out == ""


def test_the_write_cap_floor_is_one_home_shared_with_the_ceiling() -> None:
    assert 0 < names.MIN_WRITES_PER_SECOND < names.MAX_WRITES_PER_SECOND
