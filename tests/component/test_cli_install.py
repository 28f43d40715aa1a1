"""The slow packaging test: `saga-index` installed from the checkout into a FRESH virtual
environment outside it, as `uv tool install .` or `pipx install .` would, and run with a clean
environment (no PYTHONPATH, cwd outside the checkout).

The installer is the development environment's uv (`make deps` installs it; a few seconds from
its cache of that install) or, without one, pip (~25 s, from the package index). The build
writes build/ and *.egg-info into the directory it builds, so the test installs from a copy of
the checkout's working tree: the checkout stays untouched, and what is installed is exactly
what the working tree holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest

from saga_index.index import keys
from saga_index.index.shard import shard

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
# Never copied: environments, build output, caches, node packages, git.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "node_modules",
    "cdk.out",
    "build",
    "results",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
)


def _run(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(the fresh environment's bin/, a clean environment to run it with)."""
    base = tmp_path_factory.mktemp("cli-install")
    source = base / "checkout"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE, symlinks=True)
    venv = base / "venv"
    uv = Path(sys.executable).parent / "uv"
    # The installer keeps its own configuration (index, cache) from HOME and PIP_*/UV_*;
    # nothing of this interpreter's path leaks in.
    installer_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    installer_env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    python = str(venv / "bin" / "python")
    if uv.exists():
        subprocess.run(
            [str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)],
            check=True,
            timeout=120,
            env=installer_env,
        )
        install_command = [str(uv), "pip", "install", "--quiet", "--python", python]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        install_command = [python, "-m", "pip", "install", "--quiet"]
    install = _run(
        [*install_command, "-c", str(ROOT / "constraints.txt"), f"{source}[cli]"],
        cwd=base,
        env=installer_env,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(base), "LANG": "C.UTF-8"}
    return venv / "bin", clean


def test_the_installed_cli_prints_the_packages_version(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    result = _run([str(bin_dir / "saga-index"), "--version"], cwd=tmp_path, env=env)

    assert (result.returncode, result.stdout) == (0, f"saga-index, version {version}\n")
    assert result.stderr == ""


def test_the_installed_cli_shows_its_help_with_the_phase_choices(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed

    result = _run([str(bin_dir / "saga-index"), "--help"], cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stderr
    assert "--phase [legacy|migrating|sharded|rolling-back]" in result.stdout
    for command in ("phase", "status", "backfill", "drift", "verify", "shard", "sagas"):
        assert f"\n  {command} " in result.stdout


def test_the_installed_cli_runs_a_real_command(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    persons = ["p-1", "José", "a#b"]

    result = _run(
        [str(bin_dir / "saga-index"), "--shards", "32", "shard", *persons], cwd=tmp_path, env=env
    )

    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"personId": p, "shard": shard(p, 32), "gsi4pk": keys.sharded_gsi4pk(shard(p, 32))}
        for p in persons
    ]


def test_the_installed_entry_point_prints_its_bash_completion_script(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed

    result = _run(
        [str(bin_dir / "saga-index")],
        cwd=tmp_path,
        env={**env, "_SAGA_INDEX_COMPLETE": "bash_source"},
    )

    assert result.returncode == 0, result.stderr
    assert "complete -o nosort -F _saga_index_completion saga-index" in result.stdout


def test_the_environment_holds_the_cli_and_not_the_demo_or_the_checkouts_other_code(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_dir, env = installed
    probe = (
        "import importlib.util, json, saga_index_cli; print(json.dumps({"
        "'cli': saga_index_cli.__file__, "
        "'absent': [m for m in ('matplotlib', 'numpy', 'PIL', 'handlers', 'devkit', 'infra', "
        "'bench', 'aws_cdk', 'aws_lambda_powertools') if importlib.util.find_spec(m) is None]}))"
    )

    result = _run([str(bin_dir / "python"), "-c", probe], cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["cli"].startswith(str(bin_dir.parent))  # the installed copy, not the checkout
    assert found["absent"] == [
        "matplotlib",
        "numpy",
        "PIL",
        "handlers",
        "devkit",
        "infra",
        "bench",
        "aws_cdk",
        "aws_lambda_powertools",
    ]
