"""Generate docs/contract-corpus.json: control records mutated at random from valid ones, with
what the Python reader makes of each, which every other reader must make of it too.

    python -m devkit.contract_corpus            rewrite the file
    python -m devkit.contract_corpus --check    exit 1 if the file is not what this would write

The contract vectors (devkit.contract_vectors) hold chosen cases; this corpus holds many more
that nobody chose: from a fixed seed, a few thousand copies of valid STATE and HISTORY items,
each with one or two attributes changed to another DynamoDB type, NULL, nothing, an edge value
of its kind (Unicode or fullwidth digits, year 0000, a number with spaces, in hexadecimal, past
2^53 or past a double, a word in capitals or with spaces), or another attribute's value. The
TypeScript package reads every one (clients/typescript/test/corpus.test.ts) and must route it
the same way, refuse it with the same kind and attribute, or refuse it as naming more than two
layouts; tests/unit/test_contract_corpus.py reads every one through the Python store.

Layout of the file: `bases` are the valid records (a STATE item, or no STATE and the newest
HISTORY items), `cases` one per line: the base, the item changed ("state" or the index of a
HISTORY item), the attributes set (DynamoDB JSON; null: removed), the reader's wall clock, and
`expect`: {"route": condition, version, phase, source, target, writes} or {"refusal": kind,
attribute} or {"error": "more than two layouts"}. `openIndexBases` and `openIndexCases` are the
same for records of the open-saga index (its attributes mutated too), each route with
`openIndex` (the state followed, e.g. "adding(16)"), `openWrites` (the open index whose
OpenSagaPK writers stamp now, or null) and `openReads` (the one enumerations read, or null: GSI4).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from devkit.contract_states import MS, OPEN_INDEX_STATES, OPENED, STATES, dynamo_json
from devkit.contract_vectors import OPEN_INDEX_MISSING, RECORD_CASES
from devkit.vectors_file import vectors_main
from saga_index.layout_change.record import (
    PARTS,
    ControlItemInvalidError,
    ControlRecordInvalidError,
    ControlState,
    Routing,
    Value,
    deserialize_control_item,
    followed_state,
    format_time,
    routing_for,
    state_item,
)

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "docs" / "contract-corpus.json"
SEED = 20261206
CASES = 3000
OPEN_INDEX_SEED = 20261207
OPEN_INDEX_CASES = 1000
THREE_LAYOUTS = "more than two layouts"

_DIGITS = ("\u0660\u0661\u0662\u0666", "\uff10\uff11\uff12\uff16", "\u0966\u0967\u0968\u096c")
_N_TEXTS = (
    " 16", "16 ", "+16", "0x10", "1_6", "\u0661\u0666", "16.0", "1.6e1", "1.6E+1", "160e-1",
    "16.5", "-16", "0", "-0", "", "NaN", "Infinity", "-Infinity", "1e400", "1e-400", "1e1000",
    ".5", "5.", "016", "9007199254740991", "9007199254740992", "9007199254740993",
    "-9007199254740993", "1.0000000000000001", "12345678901234567890123456789012345678",
)  # fmt: skip
_OTHER_TYPES: tuple[dict[str, Any], ...] = (
    {"S": "x"}, {"S": ""}, {"N": "1"}, {"BOOL": True}, {"BOOL": False}, {"L": []},
    {"L": [{"S": "a"}]}, {"M": {}}, {"SS": ["a"]}, {"NS": ["1"]}, {"NULL": True},
)  # fmt: skip
_WORDS = {
    Value.LAYOUT: ("legacy", "sharded", "Legacy", "SHARDED", " legacy", "sharded ", "hashed", ""),
    Value.DIRECTION: ("forward", "rollback", " forward", "FORWARD", "Rollback", "forward\u00a0"),
    Value.PHASE: ("legacy", "migrating", "sharded", "rolling-back", "resharding", "Migrating"),
    Value.STRING: ("", " ", "ops@example", "\U0001f600", "x" * 300),
    Value.OPEN_INDEX: ("off", "adding", "open", "removing", "Adding", " open", "enabled", ""),
}
_COUNTS = ("0", "1", "2", "3", "16", "32", "64", "1024", "2048", "-16", "16.0", "1.6e1", " 16")
_INTEGERS = ("0", "1", "2", "3", "-1", "9007199254740991", "9007199254740992", "1e0", "1.5")


def _bases(*, open_index: bool = False) -> list[dict[str, Any]]:
    states = OPEN_INDEX_STATES if open_index else STATES
    bases: list[dict[str, Any]] = [
        {"name": name, "state": dynamo_json(state_item(build())), "history": []}
        for name, build in states
    ]
    records: list[tuple[str, Callable[[], dict[str, Any] | None], Callable[[], Any]]] = (
        [(name, lambda: None, history_of) for name, history_of in OPEN_INDEX_MISSING]
        if open_index
        else list(RECORD_CASES)
    )
    for name, state_of, history_of in records:
        history = [dynamo_json(h) for h in history_of()]
        # Records a reader follows from history alone (the state it follows routes).
        if state_of() is None and history and "route" in outcome(None, history, OPENED):
            bases.append({"name": name, "state": None, "history": history})
    return bases


# The open index's attributes are mutated in the open index's own cases only, so the cases
# drawn before it existed stay what they were.
_OPEN_INDEX_ATTRIBUTES = frozenset(
    name for a in PARTS[0].attributes if a.value is Value.OPEN_INDEX for name in (a.name, a.count)
)


def _attributes(target: str, *, open_index: bool = False) -> list[tuple[str, Value | None]]:
    on = "STATE" if target == "state" else "HISTORY"
    declared = [
        (a.name, a.value)
        for p in PARTS
        if on in p.items
        for a in p.attributes
        if open_index or a.name not in _OPEN_INDEX_ATTRIBUTES
    ]
    return [*declared, ("PK", None), ("SK", None), ("entityType", None)]


def _time_edge(rng: random.Random, text: str) -> str:
    edits: tuple[Callable[[str], str], ...] = (
        lambda t: rng.choice(("0000", "0001", "9999")) + t[4:],
        lambda t: t[:5] + rng.choice(("00", "13")) + t[7:],
        lambda t: t[:8] + rng.choice(("00", "31", "32")) + t[10:],
        lambda t: rng.choice(("2025-02-29", "2024-02-29")) + t[10:],
        lambda t: t[:11] + rng.choice(("24", "23")) + t[13:],
        lambda t: t[:17] + rng.choice(("60", "59")) + t[19:],
        lambda t: t[:19] + "Z",
        lambda t: t[:-1] + rng.choice(("z", "+00:00", "Z ", "Z\n")),
        lambda t: " " + t,
        lambda t: t[:10] + " " + t[11:],
        lambda t: _unicode_digit(rng, t),
        lambda t: format_time(OPENED + timedelta(seconds=rng.choice((-1, 0, 74, 75, 76)))),
    )
    return rng.choice(edits)(text)


def _unicode_digit(rng: random.Random, text: str) -> str:
    places = [i for i, c in enumerate(text) if c.isdigit()]
    at = rng.choice(places)
    return text[:at] + rng.choice(_DIGITS)[rng.randrange(4)] + text[at + 1 :]


def _edge(rng: random.Random, value: Value | None, current: dict[str, Any] | None) -> Any:
    """A value of the attribute's own kind that a reader may get wrong."""
    if value in (Value.INTEGER, Value.NUMBER, Value.SHARD_COUNT):
        pool = _COUNTS if value is Value.SHARD_COUNT else _INTEGERS
        return {"N": rng.choice(pool + _N_TEXTS)}
    if value is Value.TIME:
        text = current.get("S") if current else None
        return {"S": _time_edge(rng, text if isinstance(text, str) else format_time(OPENED))}
    if value is Value.STRINGS:
        lists: tuple[list[dict[str, Any]], ...] = (
            [],
            [{"S": "a"}],
            [{"S": "a"}, {"N": "1"}],
            [{"NULL": True}],
            [{"S": ""}],
        )
        return {"L": rng.choice(lists)}
    if value is Value.BOOLEAN:
        return {"BOOL": rng.random() < 0.5}
    words = _WORDS.get(value or Value.STRING, _WORDS[Value.STRING])
    return {"S": rng.choice(words)}


def _mutation(
    rng: random.Random, item: dict[str, Any], target: str, *, open_index: bool = False
) -> dict[str, Any]:
    changes: dict[str, Any] = {}
    attributes = _attributes(target, open_index=open_index)
    for _ in range(1 if rng.random() < 0.8 else 2):
        name, value = rng.choice(attributes)
        roll = rng.random()
        if roll < 0.15:
            changes[name] = None
        elif roll < 0.3:
            changes[name] = {"NULL": True}
        elif roll < 0.45:
            changes[name] = rng.choice(_OTHER_TYPES)
        elif roll < 0.55:
            changes[name] = item.get(rng.choice(attributes)[0])
        else:
            changes[name] = _edge(rng, value, item.get(name))
    return changes


def outcome(
    state: dict[str, Any] | None,
    history: list[dict[str, Any]],
    now: datetime,
    *,
    open_index: bool = False,
) -> Any:
    """What the Python reader makes of the items as stored, at the wall clock `now`
    (`open_index`: with the open index's state and routing in `route`)."""
    try:
        followed = followed_state(
            None if state is None else deserialize_control_item(state),
            [deserialize_control_item(item) for item in history],
        )
        routing = routing_for(followed, now)
    except ControlItemInvalidError as err:
        return {"refusal": {"kind": err.kind.value, "attribute": err.attribute}}
    except ControlRecordInvalidError as err:
        if THREE_LAYOUTS not in str(err):
            raise
        return {"error": THREE_LAYOUTS}
    route = route_of(followed, routing)
    if open_index:
        route["route"].update(open_route_of(followed, routing))
    return route


def route_of(state: ControlState, routing: Routing) -> dict[str, Any]:
    """A case's `expect` when the record routes: the state followed and its layouts."""
    return {
        "route": {
            "condition": state.condition.value,
            "version": state.version,
            "phase": state.phase.value,
            "source": str(routing.source),
            "target": str(routing.target),
            "writes": str(routing.writes),
        }
    }


def open_route_of(state: ControlState, routing: Routing) -> dict[str, Any]:
    """The open index's part of a route: its state, whose OpenSagaPK writers stamp now and
    whose keys enumerations read (null: none, GSI4)."""
    return {
        "openIndex": str(state.open_index),
        "openWrites": None if routing.open_writes is None else str(routing.open_writes),
        "openReads": None if routing.open_reads is None else str(routing.open_reads),
    }


def mutated(base: dict[str, Any], target: str | int, changes: dict[str, Any]) -> tuple[Any, Any]:
    """The base's STATE item and HISTORY items with `changes` made to the target item."""
    state, history = base["state"], list(base["history"])
    item = dict(state if target == "state" else history[int(target)])
    for name, value in changes.items():
        if value is None:
            item.pop(name, None)
        else:
            item[name] = value
    if target == "state":
        return item, history
    history[int(target)] = item
    return state, history


def _clock(rng: random.Random, base: dict[str, Any]) -> datetime:
    """Just before or at the effectiveAt of the base's newest transition (writers switch)."""
    item = base["state"] or base["history"][0]
    effective = datetime.fromisoformat(item["effectiveAt"]["S"])
    return effective - rng.choice((MS, timedelta(0)))


def corpus_cases(
    seed: int = SEED, count: int = CASES, *, open_index: bool = False
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bases = _bases(open_index=open_index)
    cases = []
    for _ in range(count):
        index = rng.randrange(len(bases))
        base = bases[index]
        targets: list[str | int] = ["state"] if base["state"] else list(range(len(base["history"])))
        target = rng.choice(targets)
        item = base["state"] if target == "state" else base["history"][int(target)]
        changes = _mutation(
            rng, item, "state" if target == "state" else "history", open_index=open_index
        )
        now = _clock(rng, base)
        state, history = mutated(base, target, changes)
        cases.append(
            {
                "base": index,
                "item": target,
                "set": changes,
                "now": format_time(now),
                "expect": outcome(state, history, now, open_index=open_index),
            }
        )
    return cases


def build() -> dict[str, Any]:
    return {
        "description": (
            "Control records mutated at random from valid ones (python -m "
            "devkit.contract_corpus; do not edit by hand) and what the Python reader makes of "
            "each: every reader must route it alike or refuse it with the same kind and "
            "attribute. Items are DynamoDB JSON; in `set`, null removes the attribute."
        ),
        "seed": SEED,
        "bases": _bases(),
        "cases": corpus_cases(),
        "openIndexBases": _bases(open_index=True),
        "openIndexCases": corpus_cases(OPEN_INDEX_SEED, OPEN_INDEX_CASES, open_index=True),
    }


def render(document: dict[str, Any]) -> str:
    """A base and a case per line: readable diffs at a fraction of an indented file's size."""
    lines = ["{"]
    for key, value in document.items():
        if isinstance(value, list):
            rows = ",\n".join(f"  {json.dumps(row, ensure_ascii=True)}" for row in value)
            lines.append(f" {json.dumps(key)}: [\n{rows}\n ],")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=True)},")
    lines[-1] = lines[-1].removesuffix(",")
    return "\n".join([*lines, "}"]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return vectors_main(
        argv,
        module="devkit.contract_corpus",
        description=__doc__,
        default_path=DEFAULT_PATH,
        build=build,
        summary=lambda document: f"{len(document['cases'])} cases",
        render=render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
