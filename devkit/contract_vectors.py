"""Generate docs/contract-vectors.json, the cross-language vectors of the control contract.

    python -m devkit.contract_vectors            rewrite the file
    python -m devkit.contract_vectors --check    exit 1 if the file is not what this would write

Unlike docs/shard-vectors.json (an independent reading of the shard contract), these vectors are
what the Python code does: every STATE and HISTORY item is written by
saga_index.layout_change.record.encode from states the transition rules build, and every
expected routing is saga_index.layout_change.record.routing's answer at the given wall clock.
Another implementation (clients/typescript, the TypeScript services' package) that agrees
with every case parses the record, switches its writers at effectiveAt and reads the same keys
in the same stages as the Python services.

Top-level keys (kept stable: other packages read them):
  attributes   every STATE / HISTORY attribute (record/schema.py): name, part, items, DynamoDB
               type, what it holds, whether an item may lack it (requiredWith: the attribute
               whose presence makes it required), what it then reads as, a layout's count
  grammar      what a value of each kind is on the wire (record/grammar.py): the time and
               number patterns, the first year, the largest integer, the words
  routing      STATE item + wall clock -> per person the write key and read keys, and the stages
  records      items that parse (phase, version) and items a strict reader refuses: the
               refusal's kind and the attribute it names (errors.Refusal), never its wording
  missing      no STATE item: the newest HISTORY item (or none) + wall clock -> the routing
  missingRecord  the one missing-record rule: the STATE item (or none) and the newest two
               HISTORY items as stored (applied, intents, abandoned intents, none) -> the state
               followed (condition, version, phase), its routing, and `probe`: whether a reader
               probes the shard keys before it follows that state (the lost-record rule: no
               STATE item and a state that reads only the legacy key; rows there refuse it); or
               the refusal (its kind and attribute) of an item no reader follows
  openStates   the saga states an open-saga enumeration returns, in order
  openIndex    the open-saga index (docs/control-contract.md, "The open-saga index"): the STATE
               item (or none) and the newest HISTORY items as stored + wall clock -> the state
               followed (condition, version, phase, openIndex, openIndexShardCount), per person
               `openWriteKey` (the OpenSagaPK a writer stamps on an OPEN saga, null: none, and
               it removes any; a closed saga never carries one) and `openReadKeys` (the
               OpenSagaPKs an enumeration of open sagas reads, one stage; null: it reads GSI4
               as `routing` says)
  openIndexRecords  like `records`, for the open index's attributes, with `openIndex`
  timing       T, the stale grace and changedAt -> effectiveAt, in seconds
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from devkit.contract_records import OPEN_INDEX_RECORDS, record_cases
from devkit.contract_states import (
    DELAY,
    MS,
    OPEN_INDEX_STATES,
    OPENED,
    S16,
    STATES,
    dynamo_json,
    path_through,
)
from devkit.vectors_file import vectors_main
from saga_index.index import LEGACY, OPEN_STATES
from saga_index.layout_change.record import (
    DEFAULT_TIMING,
    HISTORY_ABANDONED,
    HISTORY_APPLIED,
    ControlItemInvalidError,
    ControlRecordInvalidError,
    ControlState,
    RecordCondition,
    Routing,
    Transition,
    attributes_document,
    deserialize_control_item,
    followed_state,
    format_time,
    grammar_document,
    history_item,
    needs_lost_record_probe,
    parse_history_item,
    parse_state_item,
    routing_for,
    state_item,
)
from saga_index.store.dynamo import deserialize

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "contract-vectors.json"

DESCRIPTION = (
    "Vectors of the control contract (docs/control-contract.md), generated from the Python "
    "code by `python -m devkit.contract_vectors`; do not edit by hand. Items are DynamoDB JSON. "
    "`now` is the wall clock of the process that routes: writers stamp priorWriteLayout while "
    "now < effectiveAt and the target (movingTo, else the current layout) from effectiveAt on; "
    "readers read source then target from the moment they read the state. Stages are read in "
    "order, the keys of one stage in any order."
)

# From docs/shard-vectors.json. "p-1" is shard 14 of 16 and 30 of 32; "alice" is shard 9 of
# both 16 and 32, so a re-shard between them gives her one key to write and to read.
PERSONS: tuple[str, ...] = (
    "p-1",
    "alice",
    "person_01J8ZC6Q3YB0W5N4T7K2M9XRVA",
    "0b7f5c3e-9a1d-4f62-8e4b-2d5c7a9e1f30",
    "Jos\u00e9",
    "tenant#42",
    "\U0001f600",
)


def _routing_document(routing: Routing) -> dict[str, Any]:
    return {
        "persons": [
            {
                "personId": person,
                "writeKey": routing.write_key(person),
                "readKeys": list(routing.read_keys(person)),
            }
            for person in PERSONS
        ],
        "stages": [list(stage) for stage in routing.enumeration_stages()],
    }


def _moments(transition: Transition) -> tuple[tuple[str, datetime], ...]:
    return (
        ("before effectiveAt", transition.effective_at - MS),
        ("from effectiveAt", transition.effective_at),
    )


def _routing_case(name: str, item: dict[str, Any], now: datetime) -> dict[str, Any]:
    state = parse_state_item(item)
    return {
        "name": name,
        "item": dynamo_json(item),
        "now": format_time(now),
        **_routing_document(routing_for(state, now)),
    }


def routing_cases() -> list[dict[str, Any]]:
    cases = []
    for name, build in STATES:
        state = build()
        assert state.transition is not None
        for when, now in _moments(state.transition):
            cases.append(_routing_case(f"{name}: {when}", state_item(state), now))
    # An item written before the writers' switch existed has no prior pair: the source.
    old = state_item(path_through(("migrating", 0, 16)))
    del old["priorWriteLayout"]
    for when, now in (
        ("before effectiveAt", OPENED + DELAY - MS),
        ("from effectiveAt", OPENED + DELAY),
    ):
        cases.append(_routing_case(f"migrating(16) item without the prior pair: {when}", old, now))
    return cases


# ---- no STATE item ---------------------------------------------------------------------------


def _missing_case(name: str, history: Transition | None, now: datetime) -> dict[str, Any]:
    if history is None:
        state = ControlState.never_migrated()
        item = None
    else:
        item = dynamo_json(history_item(history))
        state = ControlState(
            transition=parse_history_item(deserialize(item)), condition=RecordCondition.MISSING
        )
    expect: dict[str, Any] = {"condition": state.condition.value}
    try:
        expect.update(_routing_document(routing_for(state, now)))
    except ControlRecordInvalidError as err:
        if "more than two layouts" not in str(err):
            raise
        expect = {"error": "more than two layouts"}
    return {"name": name, "history": item, "now": format_time(now), "expect": expect}


def _three_layouts() -> Transition:
    """A history item no transition writes: resharding 16 -> 32 coming from migrating(16)."""
    resharding = STATES[4][1]().transition
    assert resharding is not None
    return replace(resharding, previous_layout=LEGACY, previous_moving_to=S16)


def missing_cases() -> list[dict[str, Any]]:
    cases = [_missing_case("never migrated: no STATE, no HISTORY", None, OPENED)]
    deleted = (
        ("STATE deleted in rolling-back(16) after sharded", STATES[3][1]),
        ("STATE deleted after the abort before migrating's effectiveAt", STATES[6][1]),
        ("STATE deleted in resharding 16 -> 32", STATES[4][1]),
        ("STATE deleted after sharded(16)", STATES[2][1]),
    )
    for name, build in deleted:
        transition = build().transition
        assert transition is not None
        for when, now in _moments(transition):
            cases.append(_missing_case(f"{name}: {when}", transition, now))
    three = _three_layouts()
    cases.append(_missing_case("history naming three layouts", three, three.effective_at))
    return cases


# ---- the one missing-record rule: STATE and the newest HISTORY items as stored -----------------


def _history(state: ControlState, status: str = "applied") -> dict[str, Any]:
    """The HISTORY item of `state`'s transition: applied, an intent (`pending`), `abandoned`,
    written before intents existed (`unflagged`: no `applied` attribute), hand-edited to a NULL
    flag (`null`: counts as absent), or to a flag no reader accepts (`worded`: a string)."""
    assert state.transition is not None
    item = history_item(state.transition)
    flags: dict[str, dict[str, Any]] = {
        "applied": {HISTORY_APPLIED: True},
        "pending": {HISTORY_APPLIED: False},
        "abandoned": {HISTORY_APPLIED: False, HISTORY_ABANDONED: True},
        "unflagged": {},
        "null": {HISTORY_APPLIED: None, HISTORY_ABANDONED: None},
        "worded": {HISTORY_APPLIED: "true"},
    }
    return {**item, **flags[status]}


_V1 = STATES[1][1]  # migrating(16)
_V2 = STATES[2][1]  # sharded(16)
_V3 = STATES[4][1]  # resharding 16 -> 32 (split)
_BACK = STATES[3][1]  # rolling-back(16) from sharded
_LEGACY = STATES[0][1]  # legacy after a rollback (v3)
_ROLLBACK_STEPS = (("migrating", 0, 16), ("rolling-back", 3600.0, None), ("legacy", 7200.0, None))


def _migrating_again() -> ControlState:
    """migrating(16) again (v4) after the completed rollback `_LEGACY`."""
    return path_through(*_ROLLBACK_STEPS, ("migrating", 10800.0, 16))


_StateOf = Callable[[], dict[str, Any] | None]
_HistoryOf = Callable[[], list[dict[str, Any]]]
# (name, STATE item or None, HISTORY items newest first)
RECORD_CASES: tuple[tuple[str, _StateOf, _HistoryOf], ...] = (
    ("STATE and HISTORY missing: never migrated", lambda: None, lambda: []),
    ("HISTORY missing, STATE present: the STATE item", lambda: state_item(_V2()), lambda: []),
    ("both present, a newer intent: the STATE item",
     lambda: state_item(_V2()), lambda: [_history(_V3(), "pending"), _history(_V2())]),
    ("STATE missing, newest applied", lambda: None, lambda: [_history(_V2()), _history(_V1())]),
    ("STATE missing, newest written before intents existed",
     lambda: None, lambda: [_history(_V2(), "unflagged"), _history(_V1(), "unflagged")]),
    ("STATE missing, newest an opening intent: followed (it reads every layout before it)",
     lambda: None, lambda: [_history(_V3(), "pending"), _history(_V2())]),
    ("STATE missing, newest an aborting intent: followed",
     lambda: None, lambda: [_history(_BACK(), "pending"), _history(_V2())]),
    ("STATE missing, newest a completing intent: the state before it",
     lambda: None, lambda: [_history(_V2(), "pending"), _history(_V1())]),
    ("STATE missing, newest abandoned: the applied one before it",
     lambda: None, lambda: [_history(_V3(), "abandoned"), _history(_V2())]),
    ("STATE missing, the first intent abandoned: never migrated",
     lambda: None, lambda: [_history(_V1(), "abandoned")]),
    ("STATE missing, the first intent pending: followed (an opening move)",
     lambda: None, lambda: [_history(_V1(), "pending")]),
    ("STATE missing, newest with NULL flags: they count as absent (applied, followed)",
     lambda: None, lambda: [_history(_V3(), "null"), _history(_V2())]),
    ("STATE missing, newest with a flag as a string: refused, naming it",
     lambda: None, lambda: [_history(_V3(), "worded"), _history(_V2())]),
    ("STATE missing, a completed rollback newest: legacy, probed first",
     lambda: None, lambda: [_history(_LEGACY()), _history(path_through(*_ROLLBACK_STEPS[:2]))]),
    ("STATE missing, migrating again abandoned after a rollback: legacy, probed first",
     lambda: None, lambda: [_history(_migrating_again(), "abandoned"), _history(_LEGACY())]),
    ("STATE present, legacy after a rollback: the STATE item, no probe",
     lambda: state_item(_LEGACY()), lambda: [_history(_LEGACY())]),
)  # fmt: skip


def _followed(raw_state: dict[str, Any] | None, history: list[dict[str, Any]]) -> dict[str, Any]:
    """What a reader follows from the items as stored (read from their wire form, as the store
    reads them): the state and its routing, or the refusal's kind and attribute."""
    try:
        state = followed_state(
            None if raw_state is None else deserialize_control_item(raw_state),
            [deserialize_control_item(item) for item in history],
        )
    except ControlItemInvalidError as err:
        return {"refusal": {"kind": err.kind.value, "attribute": err.attribute}}
    now = OPENED if state.transition is None else state.transition.effective_at
    return {
        "now": format_time(now),
        "expect": {
            "condition": state.condition.value,
            "version": state.version,
            "phase": state.phase.value,
            "probe": needs_lost_record_probe(state),
            **_routing_document(routing_for(state, now)),
        },
    }


def record_rule_cases() -> list[dict[str, Any]]:
    cases = []
    for name, state_of, history_of in RECORD_CASES:
        raw_state = state_of()
        state = None if raw_state is None else dynamo_json(raw_state)
        history = [dynamo_json(item) for item in history_of()]
        followed = _followed(state, history)
        if "refusal" in followed:
            followed = {"now": format_time(OPENED), "expect": followed}
        cases.append({"name": name, "state": state, "history": history, **followed})
    return cases


# ---- the open-saga index ---------------------------------------------------------------------


def _open_index_expect(state: ControlState, now: datetime) -> dict[str, Any]:
    routing = routing_for(state, now)
    keys = routing.open_enumeration_keys()
    return {
        "condition": state.condition.value,
        "version": state.version,
        "phase": state.phase.value,
        "openIndex": state.open_index.state.value,
        "openIndexShardCount": state.open_index.shard_count,
        "persons": [
            {"personId": person, "openWriteKey": routing.open_write_key(person)}
            for person in PERSONS
        ],
        "openReadKeys": None if keys is None else list(keys),
    }


def _open_index_case(
    name: str, state_item_: dict[str, Any] | None, history: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    raw_state = None if state_item_ is None else dynamo_json(state_item_)
    raw_history = [dynamo_json(item) for item in history]
    state = followed_state(
        None if raw_state is None else deserialize_control_item(raw_state),
        [deserialize_control_item(item) for item in raw_history],
    )
    return {
        "name": name,
        "state": raw_state,
        "history": raw_history,
        "now": format_time(now),
        "expect": _open_index_expect(state, now),
    }


_OPEN_ADDING = OPEN_INDEX_STATES[0][1]
_OPEN_OPEN = OPEN_INDEX_STATES[3][1]
_OPEN_REMOVING = OPEN_INDEX_STATES[4][1]
_OPEN_OFF = OPEN_INDEX_STATES[6][1]


# (name, HISTORY items newest first) with no STATE item: the missing-record rule for the open
# index (an intent completing adding -> open or removing -> off is not followed).
OPEN_INDEX_MISSING: tuple[tuple[str, _HistoryOf], ...] = (
    ("STATE missing, newest open applied: the open index is read",
     lambda: [_history(_OPEN_OPEN()), _history(_OPEN_ADDING())]),
    ("STATE missing, newest an intent completing adding -> open: adding (GSI4 read)",
     lambda: [_history(_OPEN_OPEN(), "pending"), _history(_OPEN_ADDING())]),
    ("STATE missing, newest an opening intent off -> adding: followed",
     lambda: [_history(_OPEN_ADDING(), "pending"), _history(STATES[2][1]())]),
    ("STATE missing, newest an intent completing removing -> off: removing",
     lambda: [_history(_OPEN_OFF(), "pending"), _history(_OPEN_REMOVING())]),
    ("STATE missing, newest abandoned adding -> open: adding",
     lambda: [_history(_OPEN_OPEN(), "abandoned"), _history(_OPEN_ADDING())]),
)  # fmt: skip


def open_index_cases() -> list[dict[str, Any]]:
    cases = [_open_index_case("never migrated: off", None, [], OPENED)]
    for name, build in OPEN_INDEX_STATES:
        state = build()
        assert state.transition is not None
        for when, now in _moments(state.transition):
            cases.append(_open_index_case(f"{name}: {when}", state_item(state), [], now))
    newest = _OPEN_OPEN().transition
    assert newest is not None
    for name, history_of in OPEN_INDEX_MISSING:
        cases.append(_open_index_case(name, None, history_of(), newest.effective_at))
    return cases


def build() -> dict[str, Any]:
    return {
        "description": DESCRIPTION,
        "attributes": attributes_document(),
        "grammar": grammar_document(),
        "routing": routing_cases(),
        "records": record_cases(),
        "missing": missing_cases(),
        "missingRecord": record_rule_cases(),
        "openStates": list(OPEN_STATES),
        "openIndex": open_index_cases(),
        "openIndexRecords": record_cases(OPEN_INDEX_RECORDS, with_open_index=True),
        "timing": {
            "cacheSeconds": _seconds(DEFAULT_TIMING.cache_seconds),
            "staleGraceSeconds": _seconds(DEFAULT_TIMING.stale_grace_seconds),
            "effectiveDelaySeconds": _seconds(DEFAULT_TIMING.effective_delay.total_seconds()),
            "retryAfterSeconds": _seconds(DEFAULT_TIMING.retry_after_seconds),
        },
    }


def _seconds(value: float) -> int | float:
    """Whole seconds as JSON integers (30, not 30.0), so every language reads the same value."""
    return int(value) if float(value).is_integer() else value


def main(argv: Sequence[str] | None = None) -> int:
    return vectors_main(
        argv,
        module="devkit.contract_vectors",
        description=__doc__,
        default_path=DEFAULT_PATH,
        build=build,
        summary=lambda document: f"{len(document['routing'])} routing cases",
    )


if __name__ == "__main__":
    raise SystemExit(main())
