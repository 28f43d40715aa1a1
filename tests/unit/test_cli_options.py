"""The CLI's global options, in process, with no AWS request (docs/cli.md): --version, choices
typed as choices, shell completion, and which endpoint each AWS client gets."""

from __future__ import annotations

import importlib.metadata
import logging
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from botocore.config import Config

from saga_index.layout_change.record.open_index import OpenIndexState
from saga_index.layout_change.record.phase import Phase
from saga_index_cli import context, endpoints
from saga_index_cli import main as main_module
from saga_index_cli.context import CliContext
from saga_index_cli.main import cli, main
from saga_index_cli.open_index.commands import set_command as open_index_set_command
from saga_index_cli.phase.commands import set_command

ROOT = Path(__file__).resolve().parents[2]
ENDPOINT_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_CLOUDWATCH",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
)


@pytest.fixture(autouse=True)
def no_endpoint_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


# ---- --version ---------------------------------------------------------------------------------


def test_version_prints_the_installed_distributions_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "--version")

    assert code == 0, err
    assert out == f"saga-index, version {importlib.metadata.version('renewal-saga-index')}\n"


def test_the_installed_version_is_the_one_pyproject_declares(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # .venv's install is redone by `make` whenever pyproject.toml changes.
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    _, out, _ = run(capsys, "--version")

    assert out == f"saga-index, version {declared}\n"


def test_version_without_an_installed_distribution_exits_1_saying_how_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(main_module.importlib.metadata, "version", not_installed)

    code, out, err = run(capsys, "--version")

    assert code == 1
    assert out == ""
    assert "'renewal-saga-index' is not installed" in err
    assert "pipx install ." in err
    assert "Traceback" not in err


# ---- choices -----------------------------------------------------------------------------------


def test_help_shows_the_allowed_values_of_every_choice(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--help")

    assert "--phase [legacy|migrating|sharded|rolling-back]" in out
    assert "--log-level [debug|info|warning|error]" in out
    assert "--phase TEXT" not in out
    assert "--phase PHASE" not in out


def test_phase_set_shows_every_phase_in_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    (argument,) = [p for p in set_command.params if p.name == "phase"]

    metavar = argument.make_metavar(click.Context(set_command))
    _, out, _ = run(capsys, "phase", "set", "--help")

    assert metavar == "{legacy|migrating|sharded|rolling-back|resharding}"
    # click wraps the usage line after a hyphen: compare without the line breaks.
    assert metavar in "".join(out.split())


@pytest.mark.parametrize(
    ("given", "parsed"),
    [
        ("sharded", Phase.SHARDED),
        ("SHARDED", Phase.SHARDED),
        ("Rolling-Back", Phase.ROLLING_BACK),
        ("legacy", Phase.LEGACY),
    ],
)
def test_the_global_phase_is_case_insensitive_and_parsed_into_a_state_phase(
    given: str, parsed: Phase
) -> None:
    with cli.make_context("saga-index", ["--phase", given, "shard", "p"]) as ctx:
        assert ctx.params["phase"] is parsed


@pytest.mark.parametrize("given", ["sideways", "resharding", "shard", ""])
def test_a_phase_outside_the_choices_exits_2_listing_them(
    capsys: pytest.CaptureFixture[str], given: str
) -> None:
    code, out, err = run(capsys, "--phase", given, "shard", "p")

    assert code == 2
    assert out == ""
    assert f"{given!r} is not one of 'legacy', 'migrating', 'sharded', 'rolling-back'" in err


@pytest.mark.parametrize(
    ("command", "given", "parsed"),
    [
        (set_command, "Rolling-Back", Phase.ROLLING_BACK),
        (set_command, "RESHARDING", Phase.RESHARDING),
        (open_index_set_command, "Adding", OpenIndexState.ADDING),
        (open_index_set_command, "removing", OpenIndexState.REMOVING),
    ],
)
def test_a_state_argument_is_case_insensitive_and_handed_over_as_the_domains_member(
    command: click.Command, given: str, parsed: Phase | OpenIndexState
) -> None:
    with command.make_context("set", [given, "--reason", "r"]) as ctx:
        assert ctx.params[command.params[0].name or ""] is parsed


@pytest.mark.parametrize(
    ("words", "allowed"),
    [
        (("phase", "set", "sideways"), "'legacy', 'migrating', 'sharded', 'rolling-back'"),
        (("open-index", "set", "closed"), "'off', 'adding', 'open', 'removing'"),
    ],
)
def test_a_state_argument_outside_its_choices_exits_2_before_any_request(
    capsys: pytest.CaptureFixture[str], words: tuple[str, ...], allowed: str
) -> None:
    code, out, err = run(capsys, "--table", "sagas", *words, "--reason", "r")

    assert code == 2
    assert out == ""
    assert f"{words[-1]!r} is not one of {allowed}" in err


# ---- shell completion --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _saga_index_completion saga-index"),
        ("zsh", "compdef _saga_index_completion saga-index"),
        ("fish", "complete --no-files --command saga-index"),
    ],
)
def test_the_completion_script_of_each_shell_is_printed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, shell: str, marker: str
) -> None:
    monkeypatch.setenv("_SAGA_INDEX_COMPLETE", f"{shell}_source")

    code, out, _ = run(capsys)

    assert code == 0
    assert marker in out
    assert "_SAGA_INDEX_COMPLETE" in out


def test_completion_offers_the_phases(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_SAGA_INDEX_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", "saga-index --phase ro")
    monkeypatch.setenv("COMP_CWORD", "2")

    code, out, _ = run(capsys)

    assert code == 0
    assert out.split() == ["plain,rolling-back"]


# ---- endpoints ---------------------------------------------------------------------------------


class ClientBuilt(Exception):
    """The DynamoDB client was about to be built (no request is ever made)."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        super().__init__(kwargs)
        self.kwargs = kwargs


@pytest.fixture
def dynamodb_client_kwargs(monkeypatch: pytest.MonkeyPatch) -> None:
    def record(**kwargs: Any) -> Any:
        raise ClientBuilt(kwargs)

    monkeypatch.setattr(context, "make_client", record)


def dynamodb_endpoint(*argv: str) -> str | None:
    with pytest.raises(ClientBuilt) as built:
        main([*argv, "--table", "sagas", "phase", "show"])
    endpoint: str | None = built.value.kwargs["endpoint_url"]
    return endpoint


@pytest.mark.usefixtures("dynamodb_client_kwargs")
def test_the_dynamodb_variable_is_the_endpoint_urls_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000")

    assert dynamodb_endpoint() == "http://127.0.0.1:8000"
    assert dynamodb_endpoint("--endpoint-url", "http://localhost:9000") == "http://localhost:9000"


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def cli_log() -> Iterator[Records]:
    """The CLI logger's records: the CLI's stderr handler stops propagation at `saga_index`
    (so caplog may not see them), hence a handler on the logger itself."""
    logger = logging.getLogger("saga_index.cli")
    records = Records()
    logger.addHandler(records)
    try:
        yield records
    finally:
        logger.removeHandler(records)


@pytest.mark.usefixtures("dynamodb_client_kwargs")
def test_the_global_variable_is_not_taken_as_the_dynamodb_endpoint_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, cli_log: Records
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")

    endpoint = dynamodb_endpoint()

    # None: botocore resolves it (the global variable then applies, as to every client).
    assert endpoint is None
    warnings = [r.getMessage() for r in cli_log.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "$AWS_ENDPOINT_URL=http://127.0.0.1:4566 is set" in warnings[0]
    assert "CloudWatch, Step Functions, CloudFormation" in warnings[0]
    for variable in ("AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_CLOUDWATCH"):
        assert variable in warnings[0]
    assert "AWS_ENDPOINT_URL_SFN" in warnings[0]


def test_no_warning_without_the_global_variable_or_when_botocore_ignores_it(
    cli_log: Records,
) -> None:
    assert endpoints.check_global_endpoint_env({}) is None
    # botocore ignores configured endpoints then: a bad value is no one's problem.
    ignored = {"AWS_ENDPOINT_URL": "notaurl", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "TRUE"}
    assert endpoints.check_global_endpoint_env(ignored) is None
    assert cli_log.records == []

    # The same capture does see the warning when the variable applies.
    assert endpoints.check_global_endpoint_env({"AWS_ENDPOINT_URL": "http://h:1"}) == "http://h:1"
    assert [r.levelno for r in cli_log.records] == [logging.WARNING]


def cli_context(endpoint_url: str | None) -> CliContext:
    return CliContext(
        table="sagas",
        endpoint_url=endpoint_url,
        region="us-east-1",
        phase_override=None,
        shards_override=None,
        max_attempts=3,
    )


def test_other_services_never_get_the_dynamodb_endpoint() -> None:
    cli = cli_context("http://localhost:4567")

    cloudwatch = cli.aws_client("cloudwatch")

    assert cloudwatch.meta.endpoint_url == "https://monitoring.us-east-1.amazonaws.com"
    assert cli.client.meta.endpoint_url == "http://localhost:4567"


def test_other_services_get_their_own_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:5000")
    cli = cli_context("http://localhost:4567")

    assert cli.aws_client("cloudwatch").meta.endpoint_url == "http://127.0.0.1:5000"
    assert (
        cli.aws_client("stepfunctions", endpoint_url="http://127.0.0.1:8083").meta.endpoint_url
        == "http://127.0.0.1:8083"
    )


def test_a_clients_own_config_is_merged_over_the_retry_policy() -> None:
    client = cli_context(None).aws_client("cloudwatch", config=Config(read_timeout=5))

    assert client.meta.config.read_timeout == 5
    assert client.meta.config.retries == {"total_max_attempts": 3, "mode": "standard"}
