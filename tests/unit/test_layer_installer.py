"""devkit.layer's installer: uv beside the interpreter when there is one (the development
environment's), pip otherwise; either way for the target interpreter's wheel tags, with
bytecode compiled beside the packages and the environment's pip index passed on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from devkit import layer

TARGET = layer.Interpreter(Path("/opt/python3.13/bin/python3.13"), "3.13", Path("/opt/lib"))


def _fake_venv(tmp_path: Path, *, with_uv: bool) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if with_uv:
        (bin_dir / "uv").write_text("")
    return bin_dir / "python"


def test_uv_beside_the_interpreter_installs_for_the_target_with_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _fake_venv(tmp_path, with_uv=True)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/elsewhere")
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    monkeypatch.setenv("PIP_CERT", "/etc/mirror.pem")
    monkeypatch.delenv("UV_DEFAULT_INDEX", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)

    command, env = layer._installer(TARGET)

    assert command == [
        str(python.parent / "uv"),
        "pip",
        "install",
        "--python",
        str(TARGET.path),
        "--compile-bytecode",
    ]
    assert "PYTHONPYCACHEPREFIX" not in env
    assert env["UV_DEFAULT_INDEX"] == "https://mirror.example/simple"
    assert env["SSL_CERT_FILE"] == "/etc/mirror.pem"


def test_without_uv_pip_installs_under_the_target_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _fake_venv(tmp_path, with_uv=False)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/elsewhere")

    command, env = layer._installer(TARGET)

    assert command[:6] == [str(python), "-m", "pip", "--python", str(TARGET.path), "install"]
    assert "PYTHONPYCACHEPREFIX" not in env
