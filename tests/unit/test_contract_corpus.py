"""docs/contract-corpus.json: control records mutated at random from valid ones, each with what
the Python reader makes of it. The TypeScript package reads every one in its own suite
(clients/typescript/test/corpus.test.ts); here each is read through the Python store, as a
deployed reader reads it, and the file is checked to be what the generator writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from devkit import contract_corpus
from saga_index.layout_change.record.errors import (
    ControlItemInvalidError,
    ControlRecordInvalidError,
    Refusal,
)
from saga_index.layout_change.record.routing import routing_for
from saga_index.layout_change.record.schema import PARTS
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import parse_time

CORPUS = contract_corpus.DEFAULT_PATH


def _load() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CORPUS.read_text(encoding="utf-8"))
    return document


class _StoredItems:
    """A DynamoDB client holding one record as stored: the GetItem of STATE and the newest-first
    HISTORY Query `ControlStore.read` makes."""

    def __init__(self, state: dict[str, Any] | None, history: list[dict[str, Any]]) -> None:
        self.state = state
        self.history = history

    def get_item(self, **request: Any) -> dict[str, Any]:
        return {} if self.state is None else {"Item": self.state}

    def query(self, **request: Any) -> dict[str, Any]:
        return {"Items": self.history[: request["Limit"]]}


def _read(case: dict[str, Any], bases: list[dict[str, Any]]) -> dict[str, Any]:
    state, history = contract_corpus.mutated(bases[case["base"]], case["item"], case["set"])
    try:
        followed = ControlStore(_StoredItems(state, history), "t").read()  # type: ignore[arg-type]
        routing = routing_for(followed, parse_time(case["now"]))
    except ControlItemInvalidError as err:
        return {"refusal": {"kind": err.kind.value, "attribute": err.attribute}}
    except ControlRecordInvalidError as err:
        if contract_corpus.THREE_LAYOUTS not in str(err):
            raise
        return {"error": contract_corpus.THREE_LAYOUTS}
    return contract_corpus.route_of(followed, routing)


def test_given_every_case_when_the_store_reads_it_then_it_makes_what_the_corpus_says() -> None:
    document = _load()

    disagreements = [
        (case, got)
        for case in document["cases"]
        if (got := _read(case, document["bases"])) != case["expect"]
    ]

    assert disagreements == [], f"{len(disagreements)} cases, first: {disagreements[:3]}"


def test_given_the_committed_corpus_then_it_is_what_the_generator_writes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert contract_corpus.main(["--check"]) == 0, capsys.readouterr().err


def test_given_a_stale_corpus_then_the_check_fails_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _load()
    case = next(c for c in document["cases"] if "route" in c["expect"])
    case["expect"] = {"refusal": {"kind": "missing", "attribute": "version"}}
    stale = tmp_path / "contract-corpus.json"
    stale.write_text(contract_corpus.render(document), encoding="utf-8")

    assert contract_corpus.main(["--check", "--path", str(stale)]) == 1
    assert "python -m devkit.contract_corpus" in capsys.readouterr().err


def test_given_the_corpus_then_it_mutates_every_attribute_and_reaches_every_outcome() -> None:
    document = _load()
    cases = document["cases"]
    changed = {name for case in cases for name in case["set"]}
    values = [v for case in cases for v in case["set"].values() if v is not None]
    texts = [v.get("S") or v.get("N") or "" for v in values]

    assert 2000 <= len(cases) <= 5000
    # The open index's attributes are mutated in its own cases (below); the rest in both.
    open_index = {"openIndex", "openIndexShardCount", "previousOpenIndex"}
    open_index |= {"previousOpenIndexShardCount"}
    declared = {a.name for p in PARTS for a in p.attributes} | {"PK", "SK", "entityType"}
    assert declared - open_index <= changed
    assert not open_index & changed
    open_cases = document["openIndexCases"]
    assert declared <= {name for case in open_cases for name in case["set"]}
    routes = [c["expect"]["route"] for c in open_cases if "route" in c["expect"]]
    assert {r["openIndex"].split("(")[0] for r in routes} == {"off", "adding", "open", "removing"}
    assert any(r["openReads"] for r in routes)
    assert any(r["openWrites"] for r in routes)
    refused = {c["expect"]["refusal"]["attribute"] for c in open_cases if "refusal" in c["expect"]}
    assert refused >= open_index
    assert {c["expect"]["refusal"]["kind"] for c in cases if "refusal" in c["expect"]} == {
        k.value for k in Refusal
    }
    assert sum("route" in c["expect"] for c in cases) > len(cases) // 5
    assert any("error" in c["expect"] for c in cases)
    assert {"NULL": True} in values
    assert any(t.startswith("0000-") for t in texts)
    assert any(
        any(ch in t for ch in "\u0660\u0661\u0662\u0666\uff10\uff11\uff12\uff16") for t in texts
    )
    assert {" 16", "9007199254740993", "1e400", "NaN"} <= set(texts)
