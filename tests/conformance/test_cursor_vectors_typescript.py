"""The TypeScript package's cursor suite (clients/typescript/test/paging.test.ts) fails on cursor
vectors it disagrees with: a fingerprint, a cursor string and a Python page's next cursor each
changed in a copy of docs/cursor-vectors.json. So its agreement with the committed vectors (a
cursor made by either language is accepted by the other) means something."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
COMPILED = ROOT / "clients" / "typescript" / "dist-test" / "test"


def test_given_tampered_cursor_vectors_when_the_paging_suite_runs_then_it_fails_naming_them(
    tmp_path: Path,
) -> None:
    node = shutil.which("node")
    assert node
    assert (COMPILED / "paging.test.js").is_file(), (
        "clients/typescript/dist-test is missing: run `npm test` in clients/typescript first"
    )
    vectors = json.loads((ROOT / "docs" / "cursor-vectors.json").read_text(encoding="utf-8"))
    vectors["fingerprints"][0]["fingerprint"] = "0" * 16
    cursor = vectors["cursors"][1]
    cursor["cursor"] = cursor["cursor"][:-2] + ("A" if cursor["cursor"][-2] != "A" else "B") + "x"
    vectors["pages"][0]["pages"][0]["next"] = vectors["pages"][0]["pages"][1]["next"]
    (tmp_path / "cursor-vectors.json").write_text(json.dumps(vectors), encoding="utf-8")
    shutil.copy2(ROOT / "docs" / "contract-vectors.json", tmp_path / "contract-vectors.json")

    result = subprocess.run(
        [node, "--test", "--test-reporter=tap", str(COMPILED / "paging.test.js")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SAGA_INDEX_VECTORS_DIR": str(tmp_path)},
    )

    assert result.returncode == 1, result.stdout
    failed = {
        line.split(" - ", 1)[1].strip()
        for line in result.stdout.splitlines()
        if line.strip().startswith("not ok") and " - " in line
    }
    assert {
        "the same fingerprint for the same stages",
        "every cursor decodes to its fields and encodes back to the same string",
        "the Python library's pages, resumed here from its cursors, are the same pages",
    } <= failed, result.stdout
    assert "any rows, N and limit: the pages concatenate to the full read, each saga once" not in (
        failed
    )
