"""What the control-record tests (the store contract, `phase`, `status`) share: the injected wall
clock, so nothing waits for effectiveAt or a lease's TTL, and a fresh moto table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from moto import mock_aws

from tests.support.backends import Backend, make_backend

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@contextmanager
def moto_backend(name: str, template: dict[str, Any]) -> Iterator[Backend]:
    """A fresh table from the synthesised template, inside moto for the duration."""
    with mock_aws():
        yield make_backend(name, template, endpoint_url=None)
