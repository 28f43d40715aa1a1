"""Who changes the control record (its `changedBy`): the caller's STS ARN when AWS answers, else
$USER@host."""

from __future__ import annotations

import getpass
import logging
import socket
from typing import Any, Protocol

from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

log = logging.getLogger("saga_index.cli")

# STS answers in well under a second; an operator's shell without network must not wait long.
_STS_CONFIG = Config(
    connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1, "mode": "standard"}
)


class AwsCaller(Protocol):
    """What the identity needs of the CLI's context (context.py, whose hook calls it): the
    DynamoDB endpoint given, and a client of another service."""

    @property
    def endpoint_url(self) -> str | None: ...

    def aws_client(
        self, service: str, *, endpoint_url: str | None = None, config: Config | None = None
    ) -> Any: ...


def local_identity() -> str:
    """$USER@host: who runs this shell, when AWS cannot say."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def caller_identity(cli: AwsCaller) -> str:
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
