"""Entry point of `saga-index`.

Exit codes: 0 success; 2 bad usage or invalid input; 1 any other failure (commands may add
their own, documented in their help). stdout carries only data; logs go to stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.errors import InvalidInputError, SagaIndexError
from saga_index.model import Phase
from saga_index.shard import DEFAULT_SHARD_COUNT, validate_shard_count
from saga_index_cli.backfill import backfill_command
from saga_index_cli.context import CliContext
from saga_index_cli.drift import drift_command, verify_command, watch_command
from saga_index_cli.reads import sagas_group, shard_command
from saga_index_cli.repair import repair_anomaly_command

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _shards(_: click.Context, __: click.Parameter, value: int) -> int:
    try:
        return validate_shard_count(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


def _phase(_: click.Context, __: click.Parameter, value: str) -> Phase:
    try:
        return Phase.parse(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


class _StderrHandler(logging.StreamHandler[TextIO]):
    """Marks the handler this CLI installed, so a second invocation in-process replaces it."""


def _log_to_stderr(level: str) -> None:
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("saga_index", "botocore", "boto3"):
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(level.upper() if name == "saga_index" else logging.WARNING)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--table", envvar="SAGA_TABLE_NAME", help="Table name [env SAGA_TABLE_NAME].")
@click.option(
    "--endpoint-url",
    envvar="AWS_ENDPOINT_URL",
    help="DynamoDB endpoint, e.g. a local server [env AWS_ENDPOINT_URL].",
)
@click.option("--region", envvar="AWS_REGION", help="AWS region [env AWS_REGION].")
@click.option(
    "--shards",
    envvar="SAGA_INDEX_SHARDS",
    type=int,
    default=DEFAULT_SHARD_COUNT,
    show_default=True,
    callback=_shards,
    help="Shard count N, a power of two 1..1024 [env SAGA_INDEX_SHARDS].",
)
@click.option(
    "--phase",
    envvar="SAGA_INDEX_PHASE",
    default=Phase.MIGRATING.value,
    show_default=True,
    callback=_phase,
    help="legacy | migrating | sharded | rolling-back [env SAGA_INDEX_PHASE]. The default "
    "dual read (legacy first, then shards) returns every saga in any phase.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(1, 50),
    default=10,
    show_default=True,
    help="botocore attempts per request (throttles included) before a read fails.",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
    envvar="SAGA_INDEX_LOG_LEVEL",
    help="Logs go to stderr.",
)
@click.pass_context
def cli(
    ctx: click.Context,
    table: str | None,
    endpoint_url: str | None,
    region: str | None,
    shards: int,
    phase: Phase,
    max_attempts: int,
    log_level: str,
) -> None:
    """Operator CLI for the sharded renewal-saga index (ADR-0085)."""
    _log_to_stderr(log_level)
    ctx.obj = CliContext(
        table=table,
        endpoint_url=endpoint_url or None,
        region=region,
        shards=shards,
        phase=phase,
        max_attempts=max_attempts,
    )


cli.add_command(shard_command)
cli.add_command(sagas_group)
cli.add_command(drift_command)
cli.add_command(verify_command)
cli.add_command(watch_command)
cli.add_command(backfill_command)
cli.add_command(repair_anomaly_command)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and map failures to the documented exit codes."""
    try:
        code = cli.main(args=argv, prog_name="saga-index", standalone_mode=False)
    except click.ClickException as err:  # UsageError / BadParameter carry exit code 2
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("saga-index: interrupted", err=True)
        sys.exit(EXIT_FAILURE)
    except InvalidInputError as err:
        click.echo(f"saga-index: invalid input: {err}", err=True)
        sys.exit(EXIT_USAGE)
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        click.echo(f"saga-index: error: {err}", err=True)
        sys.exit(EXIT_FAILURE)
    except BrokenPipeError:
        # The reader (head, jq -e) went away: not our failure, nothing more to print.
        sys.stderr.close()
        sys.exit(EXIT_OK)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
