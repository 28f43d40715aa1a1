"""docs/contract-vectors.json: current with the Python code. The TypeScript package checks the
same file in its own tests (clients/typescript/test/contract.test.ts), and
tests/conformance/test_typescript_client.py shows they fail on a tampered copy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devkit import contract_vectors
from devkit.vectors_file import render
from saga_index.index.model import OPEN_STATES

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "docs" / "contract-vectors.json"


def _load() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))
    return document


def test_given_the_committed_vectors_then_they_are_what_the_code_generates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert contract_vectors.main(["--check"]) == 0, capsys.readouterr().err


def test_given_a_stale_vectors_file_then_the_check_fails_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _load()
    document["timing"]["effectiveDelaySeconds"] = 60
    stale = tmp_path / "contract-vectors.json"
    stale.write_text(render(document), encoding="utf-8")

    assert contract_vectors.main(["--check", "--path", str(stale)]) == 1
    assert contract_vectors.main(["--check", "--path", str(tmp_path / "absent.json")]) == 1
    assert "python -m devkit.contract_vectors" in capsys.readouterr().err


def test_given_the_vectors_then_they_hold_the_keys_and_values_other_packages_read() -> None:
    document = _load()

    assert set(document) == {"description", "routing", "records", "missing", "openStates", "timing"}
    assert document["openStates"] == list(OPEN_STATES)
    assert document["timing"] == {
        "cacheSeconds": 30,
        "staleGraceSeconds": 30,
        "effectiveDelaySeconds": 75,
        "retryAfterSeconds": 1,
    }
    names = [case["name"] for case in document["routing"]]
    assert any("before effectiveAt" in n for n in names)
    assert any("from effectiveAt" in n for n in names)
    # The writers' switch is in the vectors: one state, two clocks, two write keys.
    migrating = {c["name"]: c["persons"][0]["writeKey"] for c in document["routing"]}
    assert migrating["migrating(16): before effectiveAt"] == "RenewalSaga"
    assert migrating["migrating(16): from effectiveAt"] == "RenewalSaga#14"
    assert {c["valid"] for c in document["records"]} == {True, False}
    assert any("error" in c["expect"] for c in document["missing"])
