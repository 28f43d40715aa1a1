"""Build the directories a deployed function imports from, besides its own asset.

The stack attaches the published Powertools layer (infra/functions.py), and Lambda's Python
runtime provides boto3. The deploy rehearsal (tests/rehearsal) starts every function with its
asset plus exactly these two directories, so it must have them built the same way:

  build/lambda-layer/python    aws-lambda-powertools[parser] + pydantic, the pinned versions
                               (the published layer carries Powertools, pydantic, aws-xray-sdk
                               and their dependencies, but NOT boto3; the code imports no
                               tracer, so the rehearsal's layer leaves the X-Ray SDK out)
  build/lambda-runtime/python  boto3 + botocore, pinned (what the Lambda runtime provides)

Both are `uv pip install --target` (pip's when the environment has no uv) from PyPI with
constraints.txt, for the interpreter the rehearsal starts functions under (`lambda_python()`):
the Lambda runtime's Python (LAMBDA_PYTHON_VERSION) when this machine has one, else the running
interpreter. Binary wheels (pydantic-core) only import under the Python they were built for, so
the build uses that interpreter's tags, for this machine's platform (x86_64 here, not the
functions' arm64). A stamp file records the Python version and the exact requirement lines: an
unchanged build is never redone; `python -m devkit.layer` rebuilds only what is stale.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO_ROOT / "build"
REQUIREMENTS = REPO_ROOT / "requirements.txt"
CONSTRAINTS = REPO_ROOT / "constraints.txt"
STAMP_NAME = ".built"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(?P<version>\S+)\s*$")
# The functions' runtime (infra/functions.py RUNTIME, python3.13); the rehearsal checks that every
# synthesised function names it.
LAMBDA_PYTHON_VERSION = "3.13"
_PROBE = (
    "import sys, sysconfig; print(sys.executable); print('%d.%d' % sys.version_info[:2]); "
    "print(sysconfig.get_paths()['stdlib'])"
)


class LayerBuildError(RuntimeError):
    """A pin is missing from requirements.txt, or pip failed (its output is in the message)."""


@dataclass(frozen=True)
class Interpreter:
    path: Path
    version: str  # "3.13"
    stdlib: Path  # its standard library: what a function may import besides its directories

    @property
    def is_lambda_runtime(self) -> bool:
        return self.version == LAMBDA_PYTHON_VERSION

    def describe(self) -> str:
        if self.is_lambda_runtime:
            return f"{self.path} (Python {self.version}, the functions' runtime)"
        return (
            f"{self.path} (Python {self.version}: no python{LAMBDA_PYTHON_VERSION} on this "
            "machine, so the running interpreter; the functions run on "
            f"python{LAMBDA_PYTHON_VERSION})"
        )


def _probe(candidate: str) -> Interpreter | None:
    """The interpreter `candidate` really is (a pyenv shim resolves to its target, or fails)."""
    try:
        result = subprocess.run(
            [candidate, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != 3:
        return None
    return Interpreter(Path(lines[0]), lines[1], Path(lines[2]))


def running_python() -> Interpreter:
    """The interpreter running this code."""
    found = _probe(sys.executable)
    if found is None:
        raise LayerBuildError(f"cannot probe the running interpreter {sys.executable}")
    return found


def _candidates(version: str) -> list[str]:
    found: list[str] = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        found.append(on_path)
    try:
        prefix = subprocess.run(
            ["pyenv", "prefix", version], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        prefix = None
    if prefix is not None and prefix.returncode == 0:
        found += [
            f"{line}/bin/python{version}" for line in prefix.stdout.strip().split(":") if line
        ]
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    # Newest patch release first: 3.13.10 after 3.13.9.
    installed = glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}")
    found += sorted(installed, key=_patch_level, reverse=True)
    return found


def _patch_level(path: str) -> tuple[int, ...]:
    release = Path(path).parent.parent.name
    return tuple(int(part) if part.isdigit() else -1 for part in release.split("."))


@functools.cache
def lambda_python() -> Interpreter:
    """The interpreter functions are started under: python LAMBDA_PYTHON_VERSION where this
    machine has one (on PATH, `pyenv prefix`, or pyenv's versions directory), else this one."""
    for candidate in _candidates(LAMBDA_PYTHON_VERSION):
        found = _probe(candidate)
        if found is not None and found.version == LAMBDA_PYTHON_VERSION:
            return found
    return Interpreter(
        Path(sys.executable),
        f"{sys.version_info.major}.{sys.version_info.minor}",
        Path(sysconfig.get_paths()["stdlib"]),
    )


@dataclass(frozen=True)
class DependencyDir:
    name: str
    root: Path  # what sys.path gets: the `python/` directory, as Lambda mounts /opt/python
    requirements: tuple[str, ...]
    python: Interpreter
    # The project's constraints.txt holds every transitive version; None for a pin set that is
    # complete by itself (resolve_dependencies False: exactly these packages, pip adds none).
    constraints: Path | None = CONSTRAINTS
    resolve_dependencies: bool = True

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
        return "\n".join((f"python {self.python.version}", *self.requirements)) + "\n"

    def build(self, *, quiet: bool = True) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)
        self.root.mkdir(parents=True)
        command, env = _installer(self.python)
        command += [
            "--target",
            str(self.root),
            *(["-c", str(self.constraints)] if self.constraints is not None else []),
            *([] if self.resolve_dependencies else ["--no-deps"]),
            *(["--quiet"] if quiet else []),
            *self.requirements,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if result.returncode != 0:
            shutil.rmtree(self.root.parent, ignore_errors=True)
            raise LayerBuildError(
                f"building {self.name} in {self.root} failed (exit {result.returncode}): "
                f"{' '.join(command)}\n--- stdout ---\n{result.stdout}\n"
                f"--- stderr ---\n{result.stderr}"
            )
        # uv's lock of the target directory is no file of the packages.
        (self.root / ".lock").unlink(missing_ok=True)
        self.stamp.write_text(self._stamp_text(), encoding="utf-8")

    def ensure(self) -> Path:
        if not self.is_current():
            self.build()
        return self.root


def _installer(python: Interpreter) -> tuple[list[str], dict[str, str]]:
    """The install command's start, for `python`'s wheel tags, and its environment.

    uv beside this interpreter (the development environment installs it) resolves and unpacks
    the same pins about five times faster than pip (~1 s of CPU for the layer instead of ~6 s);
    pip when there is none. Both compile what they install to bytecode beside it, as the
    deployed layer ships it (the functions start with -B, never writing any), so no cache prefix
    from this environment (the Makefile's PYTHONPYCACHEPREFIX) may send it elsewhere."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    uv = Path(sys.executable).parent / "uv"
    if uv.is_file():
        # uv reads no pip.conf: a pip index or certificate set in the environment is passed on,
        # as the Makefile passes them to the environment's own install.
        if "PIP_INDEX_URL" in env:
            env.setdefault("UV_DEFAULT_INDEX", env["PIP_INDEX_URL"])
        if "PIP_CERT" in env:
            env.setdefault("SSL_CERT_FILE", env["PIP_CERT"])
        command = [str(uv), "pip", "install", "--python", str(python.path), "--compile-bytecode"]
        return command, env
    # This pip, run under the target interpreter (`pip --python`): its tags pick the wheels.
    command = [sys.executable, "-m", "pip", "--python", str(python.path), "install"]
    return [*command, "--disable-pip-version-check", "--no-input"], env


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


def layer_dir(
    pins: dict[str, str] | None = None, python: Interpreter | None = None
) -> DependencyDir:
    """The Powertools layer: the version infra/functions.py resolves (POWERTOOLS_VERSION)."""
    pins = pinned_versions() if pins is None else pins
    return DependencyDir(
        name="the Powertools layer",
        root=BUILD_DIR / "lambda-layer" / "python",
        requirements=(
            f"aws-lambda-powertools[parser]=={_pin(pins, 'aws-lambda-powertools')}",
            f"pydantic=={_pin(pins, 'pydantic')}",
        ),
        python=python or lambda_python(),
    )


def runtime_dir(
    pins: dict[str, str] | None = None, python: Interpreter | None = None
) -> DependencyDir:
    """boto3/botocore as the Lambda Python runtime provides them (pinned to requirements.txt)."""
    pins = pinned_versions() if pins is None else pins
    return DependencyDir(
        name="the runtime's boto3",
        root=BUILD_DIR / "lambda-runtime" / "python",
        requirements=(f"boto3=={_pin(pins, 'boto3')}", f"botocore=={_pin(pins, 'botocore')}"),
        python=python or lambda_python(),
    )


def ensure_all() -> tuple[Path, Path]:
    """(layer root, runtime root) for `lambda_python()`, built when missing or stale.

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
    print(f"for {lambda_python().describe()}", file=sys.stderr)
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
