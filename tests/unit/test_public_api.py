"""The library's public front (`saga_index.__all__`, README "Python services"): every name it
exports resolves, and loading it on first use keeps the key scheme's users (infra imports
`saga_index.index.names`) free of boto3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import saga_index

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"


@pytest.mark.parametrize("name", saga_index.__all__)
def test_every_exported_name_resolves_from_the_package(name: str) -> None:
    value = getattr(saga_index, name)

    assert value is not None
    assert name in dir(saga_index)


def test_every_exported_name_has_a_home_and_nothing_else_does() -> None:
    assert sorted(saga_index._HOMES) == sorted(saga_index.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = saga_index.Nope  # type: ignore[attr-defined]


def test_importing_the_key_scheme_loads_neither_boto3_nor_the_public_api() -> None:
    probe = (
        "import sys; import saga_index.index.names; "
        "print(sorted(m for m in ('boto3', 'botocore', 'saga_index.api') if m in sys.modules))"
    )

    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PYTHONPATH": str(LAMBDAS), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )

    assert result.stdout == "[]\n"
