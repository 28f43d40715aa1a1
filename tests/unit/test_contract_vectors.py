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
from saga_index import SagaIndex
from saga_index.index import InvalidInputError
from saga_index.index.model import OPEN_STATES
from saga_index.layout_change.record import ControlState, Routing
from saga_index.layout_change.record.errors import (
    ControlItemInvalidError,
    ControlRecordLostError,
    Refusal,
)
from saga_index.layout_change.record.history import needs_lost_record_probe
from saga_index.layout_change.record.routing import routing_for
from saga_index.layout_change.record.schema import PARTS
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import parse_time

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

    assert set(document) == {
        "description",
        "attributes",
        "grammar",
        "routing",
        "records",
        "missing",
        "missingRecord",
        "openStates",
        "openIndex",
        "openIndexRecords",
        "timing",
    }
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


def test_given_the_vectors_then_every_refusal_is_a_kind_and_an_attribute_of_the_schema() -> None:
    document = _load()
    declared = {a["name"] for a in document["attributes"]}

    refusals = [c["refusal"] for c in document["records"] if not c["valid"]]

    assert all(set(r) == {"kind", "attribute"} for r in refusals)
    # Every kind of refusal is exercised, each naming an attribute of the item.
    assert {r["kind"] for r in refusals} == {k.value for k in Refusal}
    assert {r["attribute"] for r in refusals} <= declared | {"PK", "SK", "entityType"}
    assert all(c["refusal"] is None for c in document["records"] if c["valid"])


def test_given_the_vectors_then_their_attributes_are_the_schema_in_its_order() -> None:
    attributes = _load()["attributes"]

    assert [a["name"] for a in attributes] == [a.name for part in PARTS for a in part.attributes]
    by_name = {a["name"]: a for a in attributes}
    assert by_name["version"] == {
        "name": "version",
        "part": "transition",
        "items": ["STATE", "HISTORY"],
        "type": "N",
        "value": "integer",
        "optional": False,
        "requiredWith": None,
        "absent": None,
        "count": None,
    }
    assert by_name["movingToLayout"]["count"] == "movingToShardCount"
    assert by_name["checksPassed"]["absent"] == []
    assert by_name["applied"]["absent"] is True
    assert by_name["leaseHolder"]["optional"] is True
    assert by_name["leaseHolder"]["requiredWith"] == "leaseToken"
    assert by_name["applied"]["items"] == ["HISTORY"]


class _StoredItems:
    """A DynamoDB client holding one case's control items: the GetItem of STATE and the
    newest-first HISTORY Query `ControlStore.read` makes (its Limit honoured)."""

    def __init__(
        self,
        state: dict[str, Any] | None,
        history: list[dict[str, Any]],
        shard_rows: bool = False,
    ) -> None:
        self.state = state
        self.history = history
        self.shard_rows = shard_rows  # every probed shard key carries a row
        self.limits: list[int] = []
        self.probes = 0

    def get_item(self, **request: Any) -> dict[str, Any]:
        assert request["Key"]["SK"] == {"S": "STATE"}
        assert request["ConsistentRead"]
        return {} if self.state is None else {"Item": self.state}

    def query(self, **request: Any) -> dict[str, Any]:
        if "IndexName" in request:  # the lost-record probe of shard keys
            self.probes += 1
            pk = request["ExpressionAttributeValues"][":pk"]
            return {"Items": [{"GSI4PK": pk, "PK": {"S": "RSAGA#s1"}}] if self.shard_rows else []}
        assert request["ScanIndexForward"] is False
        assert request["ConsistentRead"]
        self.limits.append(request["Limit"])
        return {"Items": self.history[: request["Limit"]]}


@pytest.mark.parametrize("case", _load()["missingRecord"], ids=lambda case: str(case["name"]))
def test_given_the_stored_items_of_a_case_then_the_store_follows_the_state_it_names(
    case: dict[str, Any],
) -> None:
    client = _StoredItems(case["state"], case["history"])
    store = ControlStore(client, "t")  # type: ignore[arg-type]

    expect = case["expect"]
    if "refusal" in expect:
        with pytest.raises(ControlItemInvalidError) as refused:
            store.read()
        assert {"kind": refused.value.kind.value, "attribute": refused.value.attribute} == (
            expect["refusal"]
        )
        return
    state = store.read()
    assert (state.condition.value, state.version, state.phase.value) == (
        expect["condition"],
        expect["version"],
        expect["phase"],
    )
    routing = routing_for(state, parse_time(case["now"]))
    assert [routing.write_key(p["personId"]) for p in expect["persons"]] == [
        p["writeKey"] for p in expect["persons"]
    ]
    assert [list(stage) for stage in routing.enumeration_stages()] == expect["stages"]


@pytest.mark.parametrize("case", _load()["missingRecord"], ids=lambda case: str(case["name"]))
def test_given_rows_on_shard_keys_then_a_routing_store_refuses_exactly_the_probed_cases(
    case: dict[str, Any],
) -> None:
    # The lost-record rule: a reader that would follow a state reading only the legacy key,
    # with no STATE item, probes the shard keys first and refuses when rows sit there.
    if "refusal" in case["expect"]:
        return  # an item no reader follows: refused before any probe
    client = _StoredItems(case["state"], case["history"], shard_rows=True)
    store = ControlStore(client, "t", refuse_lost=True)  # type: ignore[arg-type]
    plain = ControlStore(_StoredItems(case["state"], case["history"]), "t")  # type: ignore[arg-type]

    assert needs_lost_record_probe(plain.read()) is case["expect"]["probe"]
    if case["expect"]["probe"]:
        with pytest.raises(ControlRecordLostError, match="RenewalSaga#0"):
            store.read()
        assert client.probes == 1
    else:
        assert store.read().version == case["expect"]["version"]
        assert client.probes == 0


def test_given_the_missing_record_cases_then_the_lost_record_rule_is_covered() -> None:
    cases = [c for c in _load()["missingRecord"] if "refusal" not in c["expect"]]
    probed = [c for c in cases if c["expect"]["probe"]]
    # No control item at all; only an abandoned first intent; a legacy state from history.
    assert any(not c["history"] for c in probed)
    assert any(c["history"] and c["expect"]["condition"] == "never-migrated" for c in probed)
    assert any(c["expect"]["condition"] == "missing" for c in probed)
    assert any(not c["expect"]["probe"] and c["expect"]["phase"] == "legacy" for c in cases)


def test_given_the_missing_record_cases_then_each_status_of_a_history_item_is_covered() -> None:
    history = [item for case in _load()["missingRecord"] for item in case["history"]]
    flags = {(item.get("applied", {}).get("BOOL"), "abandoned" in item) for item in history}
    assert flags >= {(True, False), (False, False), (False, True), (None, False)}
    # A NULL flag (counts as absent) and a flag of another type (refused, naming it).
    assert any(item.get("applied") == {"NULL": True} for item in history)
    assert any(
        c["expect"].get("refusal") == {"kind": "wrong-type", "attribute": "applied"}
        for c in _load()["missingRecord"]
    )
    cases = _load()["missingRecord"]
    assert any(c["state"] is None and not c["history"] for c in cases)
    assert any(c["state"] is not None and not c["history"] for c in cases)
    assert any(c["state"] is None and c["history"] for c in cases)


class _Followed:
    """The state a case's stored items read as, routed at the case's wall clock: what a
    SagaIndex's provider serves a process whose clock reads `now`."""

    def __init__(self, case: dict[str, Any]) -> None:
        self._state = ControlStore(_StoredItems(case["state"], case["history"]), "t").read()  # type: ignore[arg-type]
        self._now = parse_time(case["now"])

    def state(self) -> ControlState:
        return self._state

    def routing(self) -> Routing:
        return routing_for(self._state, self._now)


@pytest.mark.parametrize("case", _load()["openIndex"], ids=lambda case: str(case["name"]))
def test_given_an_open_index_case_then_the_python_library_keys_a_write_as_the_vectors_say(
    case: dict[str, Any],
) -> None:
    # The public SagaIndex a Python service writes with, as the TypeScript writeKeys is held to
    # the same cases: OpenSagaPK on an open saga's write as `openWriteKey` says, never on a
    # closed one's, and an UpdateItem told to REMOVE it whenever the write carries none.
    index = SagaIndex(_StoredItems(None, []), "t", provider=_Followed(case))  # type: ignore[arg-type]
    opened_at = "2026-07-10T12:00:00.000Z"
    for person in case["expect"]["persons"]:
        person_id, expected = person["personId"], person["openWriteKey"]
        assert index.keys_for(person_id).open_write_key == expected
        for state in (None, "OPENED", "NEGOTIATING"):
            written = index.write_keys(person_id, opened_at, saga_state=state)
            assert written.open_saga_pk == expected
            assert written.as_item().get("OpenSagaPK") == (
                None if expected is None else {"S": expected}
            )
            update = index.key_update(person_id, opened_at, saga_state=state)
            assert update.remove == (() if expected is not None else ("OpenSagaPK",))
        for closed in ("SIGNED", "DECLINED", "EXPIRED"):
            written = index.write_keys(person_id, opened_at, saga_state=closed)
            assert written.open_saga_pk is None
            assert "OpenSagaPK" not in written.as_item()
            assert index.key_update(person_id, opened_at, saga_state=closed).remove == (
                "OpenSagaPK",
            )


def test_given_a_saga_state_that_is_not_a_string_then_write_keys_refuses_it() -> None:
    case = _load()["openIndex"][0]
    index = SagaIndex(_StoredItems(None, []), "t", provider=_Followed(case))  # type: ignore[arg-type]
    for bad in (7, ""):
        with pytest.raises(InvalidInputError, match="saga_state"):
            index.write_keys("p-1", "2026-07-10T12:00:00.000Z", saga_state=bad)  # type: ignore[arg-type]
