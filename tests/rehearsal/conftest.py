"""The deploy rehearsal's fixtures: the synthesised stack (no context: no migration state), the
layer and runtime directories (devkit.layer), the moto server standing in for the stack, and the
scenario that starts every function the way Lambda would (tests/support/rehearsal)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devkit import layer
from tests.support.rehearsal.scenario import Rehearsal, rehearse
from tests.support.rehearsal.server import World, moto_world
from tests.support.rehearsal.stack import Synth, synthesise


def pytest_report_header(config: pytest.Config) -> str:
    """Which Python starts the functions (shown when this directory is on the command line).
    tests/conftest.py repeats it in the summary at the end, just above pytest's closing line,
    where `-q`, `make test` and `| tail` still show it."""
    return f"rehearsal interpreter: {layer.lambda_python().describe()}"


@pytest.fixture(scope="session")
def synth() -> Synth:
    return synthesise()


@pytest.fixture(scope="session")
def dependency_paths() -> tuple[Path, Path]:
    """(layer, runtime boto3): built by `make test` first; built here if missing."""
    return layer.ensure_all()


@pytest.fixture(scope="session")
def world(synth: Synth) -> Iterator[World]:
    with moto_world(synth) as running:
        yield running


@pytest.fixture(scope="session")
def rehearsal(
    synth: Synth, world: World, dependency_paths: tuple[Path, Path]
) -> Iterator[Rehearsal]:
    with rehearse(synth, world, dependency_paths) as result:
        yield result
