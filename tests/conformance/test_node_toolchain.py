"""The root npm toolchain (the CDK CLI, dynalite) on the Node the README names: it runs without
a warning, and no package at the root pulls in the AWS SDK for JavaScript, whose
`NodeVersionSupportWarning` fires on Node < 22 (the TypeScript package pins its own SDK)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the README asks for Node.js 20 or newer")
    return node


def test_the_root_toolchain_is_the_cdk_cli_and_dynalite_only() -> None:
    package = json.loads((REPO_ROOT / "package.json").read_text())
    assert set(package["devDependencies"]) == {"aws-cdk", "dynalite"}
    assert package["engines"]["node"] == ">=20"
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text())
    sdk = [name for name in lock["packages"] if "node_modules/@aws-sdk/" in name]
    assert sdk == [], "the root lock pulls in the AWS SDK for JavaScript again"


def test_the_readme_names_the_node_versions_and_the_installed_one_is_among_them() -> None:
    major = int(
        subprocess.run([_node(), "--version"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .lstrip("v")
        .split(".")[0]
    )
    text = README.read_text()
    assert "Node.js 20, 22 or 24" in text
    assert major in {20, 22, 24}


@pytest.mark.parametrize(
    "argv",
    [
        ["node_modules/aws-cdk/bin/cdk", "--version"],
        ["-e", "require('dynalite'); console.log('dynalite loads')"],
    ],
)
def test_the_root_tools_run_without_a_warning(argv: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JSII_", "NODE_"))}
    env["CDK_DISABLE_VERSION_CHECK"] = "1"
    env["CDK_DISABLE_CLI_TELEMETRY"] = "1"
    done = subprocess.run(
        [_node(), *argv], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not re.search(r"warning", done.stderr, re.IGNORECASE), done.stderr
