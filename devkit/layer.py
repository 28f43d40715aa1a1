"""Build the directories a deployed function imports from, besides its own asset.

The stack attaches the published Powertools layer (infra/functions.py), and Lambda's Python
runtime provides boto3. The deploy rehearsal (tests/rehearsal) starts every function with its
asset plus exactly these two directories, so it must have them built the same way:

  build/lambda-layer/python    aws-lambda-powertools[tracer,parser] + pydantic, the pinned
                               versions (the published layer carries Powertools, pydantic,
                               aws-xray-sdk and their dependencies, but NOT boto3)
  build/lambda-runtime/python  boto3 + botocore, pinned (what the Lambda runtime provides)

Both are `pip install --target` from PyPI with constraints.txt, for the local interpreter's
platform (the rehearsal runs them here, not on arm64 Python 3.13). A stamp file records the
exact requirement lines: an unchanged build is never redone; `python -m devkit.layer` rebuilds
only what is stale.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
CONSTRAINTS = REPO_ROOT / "constraints.txt"
STAMP_NAME = ".built"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(?P<version>\S+)\s*$")


class LayerBuildError(RuntimeError):
    """A pin is missing from requirements.txt, or pip failed (its output is in the message)."""


@dataclass(frozen=True)
class DependencyDir:
    name: str
    root: Path  # what sys.path gets: the `python/` directory, as Lambda mounts /opt/python
    requirements: tuple[str, ...]

    @property
    def stamp(self) -> Path:
        return self.root.parent / STAMP_NAME

    def is_current(self) -> bool:
        return (
            self.stamp.exists()
            and self.root.is_dir()
            and self.stamp.read_text(encoding="utf-8") == self._stamp_text()
        )

    def _stamp_text(self) -> str:
        return "\n".join(self.requirements) + "\n"

    def build(self, *, quiet: bool = True) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)
        self.root.mkdir(parents=True)
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--target",
            str(self.root),
            "-c",
            str(CONSTRAINTS),
            *(["--quiet"] if quiet else []),
            *self.requirements,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(self.root.parent, ignore_errors=True)
            raise LayerBuildError(
                f"building {self.name} in {self.root} failed (exit {result.returncode}): "
                f"{' '.join(command)}\n--- stdout ---\n{result.stdout}\n"
                f"--- stderr ---\n{result.stderr}"
            )
        self.stamp.write_text(self._stamp_text(), encoding="utf-8")

    def ensure(self) -> Path:
        if not self.is_current():
            self.build()
        return self.root


def pinned_versions(path: Path = REQUIREMENTS) -> dict[str, str]:
    """name (lower case, '-' for '_') -> version of every `name==version` line."""
    pins: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[match["name"].lower().replace("_", "-")] = match["version"]
    return pins


def _pin(pins: dict[str, str], name: str) -> str:
    if name not in pins:
        raise LayerBuildError(f"{REQUIREMENTS.name} pins no version of {name!r}")
    return pins[name]


def layer_dir(pins: dict[str, str] | None = None) -> DependencyDir:
    """The Powertools layer: the version infra/functions.py resolves (POWERTOOLS_VERSION)."""
    pins = pinned_versions() if pins is None else pins
    return DependencyDir(
        name="the Powertools layer",
        root=BUILD_DIR / "lambda-layer" / "python",
        requirements=(
            f"aws-lambda-powertools[tracer,parser]=={_pin(pins, 'aws-lambda-powertools')}",
            f"pydantic=={_pin(pins, 'pydantic')}",
        ),
    )


def runtime_dir(pins: dict[str, str] | None = None) -> DependencyDir:
    """boto3/botocore as the Lambda Python runtime provides them (pinned to requirements.txt)."""
    pins = pinned_versions() if pins is None else pins
    return DependencyDir(
        name="the runtime's boto3",
        root=BUILD_DIR / "lambda-runtime" / "python",
        requirements=(f"boto3=={_pin(pins, 'boto3')}", f"botocore=={_pin(pins, 'botocore')}"),
    )


def ensure_all() -> tuple[Path, Path]:
    """(layer root, runtime root), built when missing or stale.

    Under a lock: parallel test workers (pytest-xdist) would otherwise build into one place."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with (BUILD_DIR / ".lambda-deps.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return layer_dir().ensure(), runtime_dir().ensure()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main() -> int:
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with (BUILD_DIR / ".lambda-deps.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_stale()


def _build_stale() -> int:
    for directory in (layer_dir(), runtime_dir()):
        if directory.is_current():
            print(f"{directory.name}: up to date in {directory.root}", file=sys.stderr)
            continue
        print(f"{directory.name}: building in {directory.root}", file=sys.stderr)
        try:
            directory.build()
        except LayerBuildError as err:
            print(err, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
