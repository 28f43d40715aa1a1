"""Fixtures shared by every layer. Nothing here talks to AWS: credentials are dummies."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

# boto3 must never find real credentials or a real endpoint from the developer's shell.
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    CDK_DISABLE_VERSION_CHECK="1",
    CDK_DISABLE_CLI_TELEMETRY="1",
)


@pytest.fixture(scope="session")
def synthesized_template() -> dict[str, Any]:
    """The CDK app's own template: local tables are created from it, never hand-copied."""
    from devkit.schema import load_template

    return load_template()


@pytest.fixture(scope="session")
def dynalite_endpoint() -> Iterator[str]:
    from devkit.dynalite import DynaliteServer

    with DynaliteServer() as server:
        yield server.endpoint_url
