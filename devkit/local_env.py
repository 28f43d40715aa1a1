"""Dummy AWS credentials for a local server: nothing run with them can reach AWS."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

LOCAL_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# Never reach AWS: no profile, no session token, no endpoint but the local server's.
UNSET_ENVIRONMENT = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
)


@contextmanager
def local_credentials() -> Iterator[None]:
    """Dummy credentials for the local server only; the caller's environment is restored."""
    names = (*LOCAL_ENVIRONMENT, *UNSET_ENVIRONMENT)
    saved = {name: os.environ.get(name) for name in names}
    for name in UNSET_ENVIRONMENT:
        os.environ.pop(name, None)
    os.environ.update(LOCAL_ENVIRONMENT)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
