"""docs/cursor-vectors.json: current with the Python code, and read back by it. The TypeScript
package reads the same file (clients/typescript/test/paging.test.ts): both write every cursor
byte for byte alike and refuse the same malformed ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devkit import cursor_vectors
from saga_index.index import OPEN_STATES
from saga_index.store import Position, decode_cursor, encode_cursor, plan_fingerprint
from saga_index.store.cursor import InvalidCursorError

VECTORS = Path(__file__).resolve().parents[2] / "docs" / "cursor-vectors.json"


def _load() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))
    return document


def test_given_the_committed_vectors_then_they_are_what_the_code_generates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cursor_vectors.main(["--check"]) == 0, capsys.readouterr().err


def test_given_each_cursor_then_it_decodes_to_its_fields_and_encodes_back_alike() -> None:
    for case in _load()["cursors"]:
        parsed = decode_cursor(case["cursor"])

        assert (parsed.of, parsed.plan, parsed.position) == (
            case["of"],
            case["plan"],
            Position(case["at"], case["after"]),
        )
        assert encode_cursor(case["of"], case["plan"], parsed.position) == case["cursor"]


def test_given_each_fingerprint_case_then_the_stages_give_it() -> None:
    cases = _load()["fingerprints"]

    assert len({c["fingerprint"] for c in cases}) == len(cases), "two plans share a fingerprint"
    for case in cases:
        assert plan_fingerprint(case["stages"]) == case["fingerprint"], case["name"]


@pytest.mark.parametrize("case", _load()["invalid"], ids=lambda c: c["name"])
def test_given_a_malformed_cursor_then_it_is_refused(case: dict[str, Any]) -> None:
    with pytest.raises(InvalidCursorError):
        decode_cursor(case["cursor"])


def test_given_the_paged_cases_then_the_pages_concatenate_to_every_row_once() -> None:
    for case in _load()["pages"]:
        ids = [saga for page in case["pages"] for saga in page["sagaIds"]]
        states = {i["sagaId"]["S"]: i["state"]["S"] for i in case["items"]}
        expected = [s for s, state in states.items() if case["of"] == "all" or state in OPEN_STATES]

        assert sorted(ids) == sorted(expected), case["name"]
        assert [p["cursor"] for p in case["pages"][1:]] == [p["next"] for p in case["pages"][:-1]]
