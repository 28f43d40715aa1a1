"""Global options, shared by every subcommand, and the objects they build.

Where reads come from: the control record (docs/control-contract.md), read once per invocation
with a strongly consistent GetItem. The global --phase/--shards are READ overrides: a read
command with them sees what a reader in that phase (with that N) would see. Commands that write
follow the record only, and refuse an override that disagrees with it (`require_overrides_agree`).

Endpoints: --endpoint-url is DynamoDB's only (env AWS_ENDPOINT_URL_DYNAMODB). Every other
service's client comes from `CliContext.aws_client`, with its own endpoint. botocore applies the
global $AWS_ENDPOINT_URL to every client that has no endpoint of its own: the CLI validates it
and warns once (`check_global_endpoint_env`).
"""

from __future__ import annotations

import getpass
import json
import logging
import math
import os
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import boto3
import click
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from botocore.utils import ensure_boolean, is_valid_endpoint_url, is_valid_ipv6_endpoint_url
from click.core import ParameterSource

from saga_index.index.errors import InvalidInputError, SagaIndexError
from saga_index.index.layout import StatePhase, layouts_for_phase
from saga_index.index.names import DEFAULT_SHARD_COUNT
from saga_index.index.shard import validate_shard_count
from saga_index.layout_change.record.errors import ControlRecordUnavailableError
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.state import ControlState
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.timing import DEFAULT_TIMING, ControlTiming, WallClock, utc_now
from saga_index.store.dynamo.client import make_client, retry_config
from saga_index.store.dynamo.codec import to_plain_json
from saga_index.store.repository import SagaRepository

log = logging.getLogger("saga_index.cli")

# STS answers in well under a second; an operator's shell without network must not wait long.
_STS_CONFIG = Config(
    connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1, "mode": "standard"}
)


# DynamoDB's rule for a table name (CreateTable): 3-255 characters of these.
_TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
# The envvar of --endpoint-url; botocore's own name for DynamoDB's endpoint.
ENV_DYNAMODB_ENDPOINT = "AWS_ENDPOINT_URL_DYNAMODB"
# botocore applies it to EVERY client without an endpoint of its own (and raises ValueError on a
# bad one when the client is built), unless $AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
ENV_GLOBAL_ENDPOINT = "AWS_ENDPOINT_URL"
ENV_IGNORE_CONFIGURED_ENDPOINTS = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
# botocore's service-specific variables of the services the CLI calls (its service ids).
SERVICE_ENDPOINT_VARIABLES = (
    ENV_DYNAMODB_ENDPOINT,
    "AWS_ENDPOINT_URL_CLOUDWATCH",
    "AWS_ENDPOINT_URL_SFN",
    "AWS_ENDPOINT_URL_CLOUDFORMATION",
    "AWS_ENDPOINT_URL_LAMBDA",
    "AWS_ENDPOINT_URL_STS",
)


class OverrideDisagreesError(InvalidInputError):
    """A command that writes was given a --phase/--shards the record does not hold (exit 2)."""


class TableNotFoundError(SagaIndexError):
    """DynamoDB answered ResourceNotFoundException for the table (exit 1)."""


def validate_table_name(name: str) -> str:
    """`name` when DynamoDB would accept it as a table name; InvalidInputError naming it if not."""
    if _TABLE_NAME.fullmatch(name):
        return name
    shown = repr(name) if len(name) <= 64 else f"{name[:32]!r}... ({len(name)} characters)"
    raise InvalidInputError(
        f"table name {shown} is not one DynamoDB accepts: 3-255 characters of A-Z a-z 0-9 _ . -"
    )


def validate_endpoint_url(url: str) -> str:
    """`url` when it is an http(s) URL botocore accepts; InvalidInputError naming it if not."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # ValueError when the port is not a number in 0..65535
        valid = (
            parts.scheme in ("http", "https")
            and bool(parts.hostname)
            and (is_valid_endpoint_url(url) or bool(is_valid_ipv6_endpoint_url(url)))
        )
    except ValueError:
        valid = False
    if not valid:
        raise InvalidInputError(
            f"{url!r} is not an endpoint URL: expected http(s)://host[:port], "
            "e.g. http://localhost:8000"
        )
    return url


def table_name_option(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    """click callback of --table: a name DynamoDB accepts, or absent (empty: absent too)."""
    if not value:
        return value
    try:
        return validate_table_name(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


def endpoint_url_option(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """click callback of every --...endpoint-url: an http(s) URL, or absent. A bad value read
    from the option's environment variable is refused naming that variable."""
    if not value:
        return None
    try:
        return validate_endpoint_url(value)
    except InvalidInputError as err:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is ParameterSource.ENVIRONMENT and isinstance(param.envvar, str):
            raise click.BadParameter(f"${param.envvar}: {err}") from None
        raise click.BadParameter(str(err)) from None


def service_endpoint_option(
    service: str, env_suffix: str, label: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The `--<service>-endpoint-url` option of another AWS service than DynamoDB (its own
    endpoint, never --endpoint-url), read from $AWS_ENDPOINT_URL_<env_suffix>, botocore's
    service-specific variable, and validated like every endpoint."""
    envvar = f"AWS_ENDPOINT_URL_{env_suffix}"
    return click.option(
        f"--{service}-endpoint-url",
        envvar=envvar,
        default=None,
        callback=endpoint_url_option,
        help=f"{label} endpoint, an http(s) URL, e.g. a local server [env {envvar}]. Never "
        "--endpoint-url, which is DynamoDB's.",
    )


def check_global_endpoint_env(environ: Mapping[str, str] | None = None) -> str | None:
    """$AWS_ENDPOINT_URL, which botocore applies to every client without an endpoint of its own
    (CloudWatch, Step Functions, CloudFormation, Lambda and STS included; DynamoDB too without
    --endpoint-url or $AWS_ENDPOINT_URL_DYNAMODB). None when unset or ignored
    ($AWS_IGNORE_CONFIGURED_ENDPOINT_URLS true); else InvalidInputError naming it when it is not
    an http(s) URL (botocore would raise ValueError building the first client), or one warning
    that names the service-specific variables to use instead, and its value."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_GLOBAL_ENDPOINT)
    if not value or ensure_boolean(env.get(ENV_IGNORE_CONFIGURED_ENDPOINTS, "false")):
        return None
    try:
        validate_endpoint_url(value)
    except InvalidInputError as err:
        raise InvalidInputError(f"${ENV_GLOBAL_ENDPOINT}: {err}") from None
    log.warning(
        "$%s=%s is set: botocore sends EVERY AWS service without an endpoint of its own there "
        "(CloudWatch, Step Functions, CloudFormation, Lambda and STS included; DynamoDB too "
        "without --endpoint-url). Prefer the service-specific variables: %s",
        ENV_GLOBAL_ENDPOINT,
        value,
        ", ".join(SERVICE_ENDPOINT_VARIABLES),
    )
    return value


class FiniteFloatRange(click.FloatRange):
    """click.FloatRange that also refuses nan (which compares false with both bounds)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        converted = super().convert(value, param, ctx)
        if isinstance(converted, float) and math.isnan(converted):
            self.fail(
                f"{value!r} is not a number in the range {self._describe_range()}.", param, ctx
            )
        return converted


def is_table_missing(err: BaseException) -> bool:
    """Whether DynamoDB's ResourceNotFoundException is behind `err`: its cause or context, or
    one of a fan-out's partition failures (EnumerationError.failures)."""
    seen: set[int] = set()
    pending: list[BaseException] = [err]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if (
            isinstance(current, ClientError)
            and current.response.get("Error", {}).get("Code") == "ResourceNotFoundException"
        ):
            return True
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            pending.extend(f for f in failures.values() if isinstance(f, BaseException))
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def local_identity() -> str:
    """$USER@host: who runs this shell, when AWS cannot say."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def caller_identity(cli: CliContext) -> str:
    """The caller's STS ARN when AWS answers; $USER@host otherwise (a local endpoint, no
    credentials, no network). The record's `changedBy`."""
    if cli.endpoint_url:
        return local_identity()
    try:
        sts = cli.aws_client("sts", config=_STS_CONFIG)
        return str(sts.get_caller_identity()["Arn"])
    except (BotoCoreError, ClientError, KeyError) as err:
        log.debug("no STS identity (%s): using $USER@host", err)
        return local_identity()


@dataclass(frozen=True)
class CliHooks:
    """What tests and the demo inject through `main(argv, hooks=...)`: who changes the record,
    the wall clock, and T (effectiveAt = changedAt + T + grace + margin). Production keeps the
    defaults: a shorter T here than the deployed functions' would make effectiveAt a lie."""

    identity: Callable[[CliContext], str] = caller_identity
    clock: WallClock = utc_now
    timing: ControlTiming = DEFAULT_TIMING


@dataclass
class CliContext:
    table: str | None
    endpoint_url: str | None
    region: str | None
    # READ overrides (None: follow the record).
    phase_override: StatePhase | None
    shards_override: int | None
    max_attempts: int
    hooks: CliHooks = field(default_factory=CliHooks)
    _client: Any = field(default=None, repr=False)
    _state: ControlState | None = field(default=None, repr=False)

    def require_table(self) -> str:
        if not self.table:
            raise click.UsageError(
                "no table given: pass --table NAME or set SAGA_TABLE_NAME", ctx=None
            )
        return self.table

    def aws_client(
        self, service: str, *, endpoint_url: str | None = None, config: Config | None = None
    ) -> Any:
        """A client of another AWS service (CloudWatch, Step Functions, CloudFormation, ...).

        Its endpoint is its own: `endpoint_url` (a command's --<service>-endpoint-url), else
        botocore's resolution ($AWS_ENDPOINT_URL_<SERVICE>, then $AWS_ENDPOINT_URL, then AWS).
        Never --endpoint-url, which is DynamoDB's only. `config` (timeouts, a shorter retry
        policy) is merged over the --max-attempts retry policy.
        """
        base = retry_config(self.max_attempts)
        return boto3.client(
            service,
            region_name=self.region,
            endpoint_url=endpoint_url,
            config=base if config is None else base.merge(config),
        )

    @property
    def client(self) -> Any:
        """The DynamoDB client: --endpoint-url (or $AWS_ENDPOINT_URL_DYNAMODB) when given."""
        if self._client is None:
            self._client = make_client(
                region=self.region, endpoint_url=self.endpoint_url, max_attempts=self.max_attempts
            )
        return self._client

    # ---- the record ----------------------------------------------------------------------

    def table_not_found(self) -> TableNotFoundError:
        """The error naming the table DynamoDB says does not exist, and where it looked."""
        meta = self.client.meta
        return TableNotFoundError(
            f"table {self.table!r} does not exist in region {meta.region_name} at "
            f"{meta.endpoint_url}: check --table (or SAGA_TABLE_NAME), --region and "
            "--endpoint-url, and that the stack is deployed there"
        )

    def control_store(self) -> ControlStore:
        return ControlStore(self.client, self.require_table())

    def read_state(self) -> ControlState:
        """The record (strongly consistent), read once per invocation."""
        if self._state is None:
            store = self.control_store()
            try:
                self._state = store.read()
            except (ClientError, BotoCoreError) as err:
                raise ControlRecordUnavailableError(
                    f"could not read the control record of table {store.table_name!r} "
                    f"({type(err).__name__}: {err}). Every command follows it: check the table "
                    "name, region and access; a read can bypass it with both --phase and "
                    "--shards"
                ) from err
        return self._state

    def now(self) -> datetime:
        return self.hooks.clock()

    def changed_by(self) -> str:
        return self.hooks.identity(self)

    @property
    def overridden(self) -> bool:
        return self.phase_override is not None or self.shards_override is not None

    def require_overrides_agree(self, state: ControlState) -> None:
        """For commands that write: a --phase/--shards that disagrees with the record is exit 2
        (the operator believes something the record does not say)."""
        where = f"(phase {state.phase.value}, version {state.version})"
        if self.phase_override is not None and self.phase_override is not state.phase:
            raise OverrideDisagreesError(
                f"--phase {self.phase_override.value} disagrees with the record {where}: "
                "commands that write follow the record; drop --phase (see `saga-index phase show`)"
            )
        if self.shards_override is not None:
            record_n = record_shard_count(state)
            if record_n != self.shards_override:
                held = "no shard count" if record_n is None else f"shard count {record_n}"
                hint = (
                    " (N of legacy -> migrating is `phase set migrating --shards N`)"
                    if record_n is None
                    else ""
                )
                raise OverrideDisagreesError(
                    f"--shards {self.shards_override} disagrees with the record, which holds "
                    f"{held} {where}: commands that write follow the record; drop the global "
                    f"--shards{hint}"
                )

    # ---- reads ---------------------------------------------------------------------------

    def routing(self) -> Routing:
        """The record's routing, or the one a reader in --phase (with --shards) would follow.
        Both overrides given: the record is not read at all."""
        if not self.overridden:
            return routing_for(self.read_state())
        phase = self.phase_override
        shards = self.shards_override
        if phase is None or shards is None:
            state = self.read_state()
            phase = phase or state.phase
            shards = shards or record_shard_count(state) or DEFAULT_SHARD_COUNT
        routing = Routing.between(*layouts_for_phase(phase, shards))
        log.info(
            "reading as a reader in phase %s would (read override): %s",
            phase.value,
            describe_routing(routing),
        )
        return routing

    def repository(self) -> SagaRepository:
        table = self.require_table()
        return SagaRepository(self.client, table, routing=self.routing())

    def shard_count_for_keys(self) -> int:
        """N for `shard`: --shards, else the record's N when a table is given, else the default
        N of `phase set migrating`."""
        if self.shards_override is not None:
            return self.shards_override
        if not self.table:
            return DEFAULT_SHARD_COUNT
        return record_shard_count(self.read_state()) or DEFAULT_SHARD_COUNT


def record_shard_count(state: ControlState) -> int | None:
    """The N a state names: its target's when sharded (migrating, resharding), else its current
    layout's (sharded, rolling-back); None when it names no sharded layout (legacy)."""
    return state.target.shard_count or state.layout.shard_count


def describe_routing(routing: Routing) -> str:
    if not routing.moving:
        return f"writes and reads {routing.source}"
    return f"writes {routing.target}; reads {routing.source}, then {routing.target}"


def shards_option(_: click.Context, __: click.Parameter, value: int | None) -> int | None:
    """click callback of every --shards: a power of two 1..1024, or absent."""
    if value is None:
        return None
    try:
        return validate_shard_count(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


pass_cli = click.make_pass_decorator(CliContext)

# Every command's --json: stdout then carries one JSON object, the same data as the human report.
json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object on stdout instead."
)


def emit(obj: Any) -> None:
    """One JSON value per line on stdout: the data channel, nothing else goes there."""
    sys.stdout.write(json.dumps(to_plain_json(obj), ensure_ascii=False, sort_keys=True) + "\n")
