"""Entry point of `saga-index`.

Exit codes, the same for every command (docs/cli.md, "Exit codes"): 0 success (a check found
nothing); 1 a check found something (drift, a mismatch, throttles, a failed preflight check), or
any other failure (a lost compare-and-set, a missing table, a missing record: the
message says what to do); 2 bad usage or invalid input (a move that is not allowed, an override
that disagrees with the record, a table name DynamoDB would refuse, an endpoint that is not an
http(s) URL: refused before any request, naming the value); 3 a precondition refused the change
(`{"refused": true, "failed": [...]}` on stdout); 4 could not complete: a service could not be
reached, refused the call, or does not support it (failures.py: the message names the service,
its endpoint and the operation); 5 not yet: the same command may succeed later (before
effectiveAt, a lease a live run holds, a write that lost a transient conflict; the time to
retry at when known); 6 interrupted, partly done (a run that wrote rows, then stopped).
stdout carries only data; logs go to stderr. docs/cli.md:
install, --version, shell completion, global options, endpoints.
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from typing import Any, TextIO

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import InvalidInputError, RetryLaterError, SagaIndexError
from saga_index.layout_change.record import SINGLE_COUNT_PHASES, Phase, format_time
from saga_index.layout_change.transitions import PreconditionFailedError
from saga_index.store.dynamo import botocore_resent
from saga_index_cli.backfill.command import backfill_group
from saga_index_cli.context import CliContext, CliHooks, is_table_missing
from saga_index_cli.endpoints import (
    ENV_DYNAMODB_ENDPOINT,
    check_global_endpoint_env,
    endpoint_url_option,
)
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.failures import (
    EXIT_FOUND,
    EXIT_OK,
    EXIT_RETRY_LATER,
    EXIT_UNAVAILABLE,
    exit_code_of,
    retry_at_of,
    service_failure,
    transient_write,
)
from saga_index_cli.open_index.commands import open_index_group
from saga_index_cli.options import shards_option, table_name_option
from saga_index_cli.output import emit
from saga_index_cli.phase.commands import phase_group
from saga_index_cli.preflight.command import preflight_command
from saga_index_cli.reads import sagas_group, shard_command
from saga_index_cli.repair import repair_anomaly_command
from saga_index_cli.signals.drift import drift_command
from saga_index_cli.signals.verify import verify_command
from saga_index_cli.signals.watch import watch_command
from saga_index_cli.status.command import status_command

EXIT_FAILURE, EXIT_USAGE, EXIT_REFUSED = EXIT_FOUND, ExitCode.USAGE, ExitCode.REFUSED
PROG_NAME = "saga-index"
# The distribution (pyproject.toml [project].name) whose installed version --version prints.
DISTRIBUTION = "renewal-saga-index"


def _version(_: click.Context) -> str:
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise click.ClickException(
            f"no version: the distribution {DISTRIBUTION!r} is not installed (this runs from "
            "a source tree); install it with `pipx install .` or `pip install .`"
        ) from None
    return f"{PROG_NAME}, version {version}"


def _phase(_: click.Context, __: click.Parameter, value: str | None) -> Phase | None:
    # click.Choice has already refused anything but SINGLE_COUNT_PHASES (any case).
    return None if value is None else Phase.parse(value)


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


class _Cli(click.Group):
    """Names the table when DynamoDB says it does not exist, wherever the command met it (the
    record read, a fan-out's partitions, a scan): the error alone names none."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as err:
            if isinstance(ctx.obj, CliContext) and ctx.obj.table and is_table_missing(err):
                raise ctx.obj.table_not_found() from err
            raise


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.custom_version_option(_version, help="Print `saga-index, version X` and exit.")
@click.option(
    "--table",
    envvar="SAGA_TABLE_NAME",
    callback=table_name_option,
    help="Table name: 3-255 characters of A-Z a-z 0-9 _ . - [env SAGA_TABLE_NAME].",
)
@click.option(
    "--endpoint-url",
    envvar=ENV_DYNAMODB_ENDPOINT,
    callback=endpoint_url_option,
    help="DynamoDB's endpoint only, an http(s) URL, e.g. a local server "
    f"[env {ENV_DYNAMODB_ENDPOINT}]. Other services never use it (see docs/cli.md).",
)
@click.option("--region", envvar="AWS_REGION", help="AWS region [env AWS_REGION].")
@click.option(
    "--phase",
    # resharding names two shard counts: no single --shards can describe its readers.
    type=click.Choice(SINGLE_COUNT_PHASES, case_sensitive=False),
    default=None,
    callback=_phase,
    help="READ override: reads (sagas, verify, drift, shard) see what a reader in that phase "
    "would see. Default: the control record's state. Commands that write refuse a --phase the "
    "record does not hold (exit 2).",
)
@click.option(
    "--shards",
    metavar="N",
    type=int,
    default=None,
    callback=shards_option,
    help="READ override: shard count N, a power of two 1..1024. Default: the record's N "
    "(16 when it names none). Commands that write refuse an N the record does not hold.",
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
    phase: Phase | None,
    shards: int | None,
    max_attempts: int,
    log_level: str,
) -> None:
    """Operator CLI for the sharded renewal-saga index (ADR-0085).

    The migration state is the control record in the table (docs/control-contract.md):
    `phase show` prints it, `phase set` changes it, `status` shows it with the backfill and
    drift; every read follows it unless --phase/--shards override what is read.
    """
    _log_to_stderr(log_level)
    check_global_endpoint_env()
    ctx.obj = CliContext(
        table=table,
        endpoint_url=endpoint_url or None,
        region=region,
        phase_override=phase,
        shards_override=shards,
        max_attempts=max_attempts,
        hooks=ctx.obj if isinstance(ctx.obj, CliHooks) else CliHooks(),
    )


cli.add_command(shard_command)
cli.add_command(sagas_group)
cli.add_command(drift_command)
cli.add_command(verify_command)
cli.add_command(watch_command)
cli.add_command(backfill_group)
cli.add_command(repair_anomaly_command)
cli.add_command(phase_group)
cli.add_command(open_index_group)
cli.add_command(status_command)
cli.add_command(preflight_command)


# The options of `saga-index` itself, which a subcommand does not know: given after it, click
# says only "No such option".
GLOBAL_OPTIONS = tuple(
    opt for param in cli.params for opt in param.opts if opt not in ("-h", "--help")
)


def global_option_hint(err: click.NoSuchOption) -> click.UsageError:
    """A global option given after the subcommand, as an error that says where it goes; any
    other unknown option as click reports it."""
    ctx = err.ctx
    if ctx is None or ctx.parent is None or err.option_name not in GLOBAL_OPTIONS:
        return err
    command = ctx.command_path.removeprefix(f"{PROG_NAME} ")
    return click.UsageError(
        f"{err.option_name} is a global option of {PROG_NAME}: global options come before the "
        f"subcommand, e.g. `{PROG_NAME} {err.option_name} VALUE {command} ...` "
        f"(global options: {', '.join(GLOBAL_OPTIONS)})",
        ctx=ctx,
    )


def _transient_words(err: BaseException) -> str:
    """A "not yet" as the operator reads it: the refusal's own words, or the write that lost."""
    lost = transient_write(err)
    if lost is None:
        return str(err)
    code = lost.response.get("Error", {}).get("Code", "")
    # A refusal answers a request DynamoDB did not apply; but when botocore resent the request,
    # an earlier attempt of it may have landed with its answer lost.
    written = (
        "an earlier attempt of it got an error or no answer and may have landed: check what is "
        "stored before running it again"
        if botocore_resent(lost)
        else "nothing was written. Run the same command again in a moment"
    )
    return (
        f"DynamoDB refused the {lost.operation_name} ({code}) past the retries: other traffic "
        f"holds the item or the table's capacity; {written}"
    )


def main(argv: list[str] | None = None, *, hooks: CliHooks | None = None) -> None:
    """Run the CLI and map failures to the documented exit codes (`hooks`: tests, the demo)."""
    try:
        code = cli.main(args=argv, prog_name=PROG_NAME, standalone_mode=False, obj=hooks)
    except click.NoSuchOption as err:
        hinted = global_option_hint(err)
        hinted.show()
        sys.exit(hinted.exit_code)
    except click.ClickException as err:  # UsageError / BadParameter carry exit code 2
        err.show()
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("saga-index: interrupted", err=True)
        sys.exit(EXIT_FAILURE)
    except InvalidInputError as err:
        click.echo(f"saga-index: invalid input: {err}", err=True)
        sys.exit(EXIT_USAGE)
    except PreconditionFailedError as err:
        # The refusal is data (which checks failed), so it goes to stdout as well.
        emit({**err.to_json(), "requested": err.requested})
        click.echo(f"saga-index: refused: {err}", err=True)
        sys.exit(EXIT_REFUSED)
    except RetryLaterError as err:
        # Not yet, and when: the refusal is data (a script waits until retryAt and runs the
        # same command again), so it goes to stdout as well.
        at = None if err.retry_at is None else format_time(err.retry_at)
        refusal: dict[str, Any] = {"retryLater": True, "retryAt": at, "message": str(err)}
        failed = getattr(err, "failed", None)
        if failed is not None:
            # phase set: the checks that already fail (fix them; waiting alone will not do).
            refusal["failed"] = [check.to_json() for check in failed]
        emit(refusal)
        when = f" (retry at {at})" if at else ""
        click.echo(f"saga-index: not yet{when}: {err}", err=True)
        sys.exit(EXIT_RETRY_LATER)
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        code = exit_code_of(err)
        failure = service_failure(err)
        if code == EXIT_RETRY_LATER:
            retry_at = retry_at_of(err)
            emit({"retryLater": True, "retryAt": retry_at, "message": _transient_words(err)})
            when = f" (retry at {retry_at})" if retry_at else ""
            click.echo(f"saga-index: not yet{when}: {_transient_words(err)}", err=True)
        elif code == EXIT_UNAVAILABLE and failure is not None:
            click.echo(f"saga-index: {failure.message()}", err=True)
        else:
            click.echo(f"saga-index: error: {err}", err=True)
        sys.exit(code)
    except BrokenPipeError:
        # The reader (head, jq -e) went away: not our failure, nothing more to print.
        sys.stderr.close()
        sys.exit(EXIT_OK)
    sys.exit(code if isinstance(code, int) else EXIT_OK)
