"""The Python package as another Python service installs it (README, "Python services"): the wheel
built from the checkout, installed into a FRESH virtual environment beside a boto3 other than the
pinned one, the resolver's check clean, and the README's Python block run there, as written,
against a real DynamoDB-compatible server (dynalite) with a clean environment.

uv (the development environment's installer) builds and installs: from its cache when it can
(`--offline`), else from the package index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import make_backend

pytestmark = [pytest.mark.conformance, pytest.mark.packaging]

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
# Not the pinned 1.44.8 / 2.14.4: a service that stayed on older releases, the lower bounds of
# the library's ranges (pyproject.toml).
OTHER_BOTO3 = "1.40.0"
OTHER_PYDANTIC = "2.7.0"
README_TABLE = "propflow-prod"


def _run(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )


def readme_python_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python services\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the README's Python services section has one Python block"
    return blocks[0]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """(the scratch environment's python, the installer's environment)."""
    if not UV.exists():
        pytest.fail("uv is not installed beside this interpreter: run `make deps` (it installs uv)")
    base = tmp_path_factory.mktemp("python-package")
    source = base / "source"
    # What the wheel is built from, copied: the build writes build/ and *.egg-info beside it.
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source / "pyproject.toml")
    ignore = shutil.ignore_patterns("__pycache__")
    for package in ("saga_index", "saga_index_cli"):
        shutil.copytree(ROOT / "lambdas" / package, source / "lambdas" / package, ignore=ignore)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
    }
    dist = base / "dist"
    build = _installer(
        [str(UV), "build", "--wheel", "--quiet", "--out-dir", str(dist), str(source)], base, env
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = dist.glob("renewal_saga_index-*.whl")
    venv = base / "venv"
    made = _run(
        [str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)], cwd=base, env=env
    )
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    install = _installer(
        [str(UV), "pip", "install", "--quiet", "--python", str(python), str(wheel),
         f"boto3=={OTHER_BOTO3}", f"botocore=={OTHER_BOTO3}", f"pydantic=={OTHER_PYDANTIC}"],
        base,
        env,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    return python, env


def _installer(argv: list[str], cwd: Path, env: Mapping[str, str]) -> Any:
    """The command from uv's cache alone, else again with the package index."""
    offline = _run([*argv[:2], "--offline", *argv[2:]], cwd=cwd, env=env, timeout=300)
    if offline.returncode == 0:
        return offline
    return _run(argv, cwd=cwd, env=env, timeout=300)


def test_the_wheel_installs_beside_another_boto3_and_the_resolver_check_is_clean(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    python, env = installed

    check = _run([str(UV), "pip", "check", "--python", str(python)], cwd=tmp_path, env=env)
    probe = _run(
        [
            str(python),
            "-c",
            "import boto3, botocore, importlib.util, pathlib, pydantic, saga_index; "
            "print(boto3.__version__, botocore.__version__, pydantic.VERSION); "
            "print((pathlib.Path(saga_index.__file__).parent / 'py.typed').is_file()); "
            "print([m for m in ('click', 'rich') if importlib.util.find_spec(m)]); "
            # The library's pydantic models, defined under the older pydantic.
            "import saga_index.layout_change.backfill.wire, saga_index.store.repair",
        ],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )

    assert check.returncode == 0, check.stdout + check.stderr
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == [
        f"{OTHER_BOTO3} {OTHER_BOTO3} {OTHER_PYDANTIC}",
        "True",
        "[]",
    ]


def test_the_readmes_python_block_runs_against_a_local_server(
    installed: tuple[Path, dict[str, str]],
    tmp_path: Path,
    synthesized_template: dict[str, Any],
    dynalite_endpoint: str,
) -> None:
    python, _ = installed
    backend = make_backend("dynalite", synthesized_template, endpoint_url=dynalite_endpoint)
    script = tmp_path / "service.py"
    block = readme_python_block()
    assert f'"{README_TABLE}"' in block
    script.write_text(block.replace(f'"{README_TABLE}"', f'"{backend.table_name}"'))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_ENDPOINT_URL_DYNAMODB": dynalite_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }

    result = _run([str(python), str(script)], cwd=tmp_path, env=env)

    assert result.returncode == 0, result.stderr
    assert result.stdout == "legacy RenewalSaga 1 1 1\n"
    stored = backend.get("RSAGA#saga-42", "META")
    assert stored is not None
    assert stored["GSI4PK"] == {"S": "RenewalSaga"}


def test_the_console_script_without_the_cli_extra_says_how_to_install_it(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    python, _ = installed

    result = _run(
        [str(python.parent / "saga-index"), "--version"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )

    assert result.returncode == 1
    assert "pipx install '.[cli]'" in result.stderr
    assert "Traceback" not in result.stderr
