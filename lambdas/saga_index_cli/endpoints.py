"""Where each AWS service's client goes: --endpoint-url is DynamoDB's only (env
AWS_ENDPOINT_URL_DYNAMODB); every other service has its own `--<service>-endpoint-url`. botocore
applies the global $AWS_ENDPOINT_URL to every client without an endpoint of its own, so the CLI
validates it and warns once. docs/cli.md, Endpoints."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import click
from botocore.utils import ensure_boolean, is_valid_endpoint_url, is_valid_ipv6_endpoint_url
from click.core import ParameterSource

from saga_index.index import InvalidInputError

log = logging.getLogger("saga_index.cli")

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
