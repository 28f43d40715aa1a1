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
               whose presence makes it required)
  routing      STATE item + wall clock -> per person the write key and read keys, and the stages
  records      items that parse (phase, version) and items a strict reader refuses: the
               refusal's kind and the attribute it names (errors.Refusal), never its wording
  missing      no STATE item: the newest HISTORY item (or none) + wall clock -> the routing
  openStates   the saga states an open-saga enumeration returns, in order
  timing       T, the stale grace and changedAt -> effectiveAt, in seconds
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from devkit.vectors_file import vectors_main
from saga_index.index.layout import LEGACY, Layout
from saga_index.index.model import OPEN_STATES
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import history_item, state_item
from saga_index.layout_change.record.errors import (
    ControlItemInvalidError,
    ControlRecordInvalidError,
)
from saga_index.layout_change.record.routing import Routing, routing_for
from saga_index.layout_change.record.schema import attributes_document
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.layout_change.record.times import format_time
from saga_index.layout_change.record.timing import DEFAULT_TIMING
from saga_index.layout_change.transitions.rules import plan_move, prior_write_for
from saga_index.store.dynamo.codec import deserialize, serialize

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

OPENED = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
DELAY = DEFAULT_TIMING.effective_delay
MS = timedelta(milliseconds=1)
S16, S32 = Layout.sharded(16), Layout.sharded(32)


# ---- states built as `phase set` builds them ---------------------------------------------------


def _move(
    previous: ControlState, phase: str, at: datetime, shards: int | None = None
) -> ControlState:
    plan = plan_move(previous, phase, shard_count=shards)
    return ControlState(
        transition=Transition(
            version=previous.version + 1,
            layout=plan.layout,
            moving_to=plan.moving_to,
            previous_layout=previous.layout,
            previous_moving_to=previous.moving_to,
            changed_at=at,
            changed_by="ops@example",
            reason=f"to {phase}",
            effective_at=at + DELAY,
            checks_passed=("backfill-verified",) if plan.completes else (),
            prior_write=prior_write_for(previous, plan, at),
        )
    )


def _path(*steps: tuple[str, float, int | None]) -> ControlState:
    """The state after `steps` (phase, seconds after OPENED, --shards) from never migrated."""
    state = ControlState.never_migrated()
    for phase, seconds, shards in steps:
        state = _move(state, phase, OPENED + timedelta(seconds=seconds), shards)
    return state


_LATE = 3600.0  # a step taken long after the one before it became effective
STATES: tuple[tuple[str, Callable[[], ControlState]], ...] = (
    ("legacy after a rollback", lambda: _path(
        ("migrating", 0, 16), ("rolling-back", _LATE, None), ("legacy", 2 * _LATE, None))),
    ("migrating(16)", lambda: _path(("migrating", 0, 16))),
    ("sharded(16)", lambda: _path(("migrating", 0, 16), ("sharded", _LATE, None))),
    ("rolling-back(16) from sharded", lambda: _path(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("rolling-back", 2 * _LATE, None))),
    ("resharding 16 -> 32 (split)", lambda: _path(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 32))),
    ("resharding 32 -> 16 (merge)", lambda: _path(
        ("migrating", 0, 32), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 16))),
    ("abort: rolling-back 10 s after migrating, before its effectiveAt", lambda: _path(
        ("migrating", 0, 16), ("rolling-back", 10, None))),
    ("abort: rolling-back after migrating became effective", lambda: _path(
        ("migrating", 0, 16), ("rolling-back", _LATE, None))),
    ("abort: migrating again 5 s after a rolling-back that was effective", lambda: _path(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("rolling-back", 2 * _LATE, None),
        ("migrating", 2 * _LATE + 5, None))),
    ("abort: resharding 32 -> 16 5 s after a split, before its effectiveAt", lambda: _path(
        ("migrating", 0, 16), ("sharded", _LATE, None), ("resharding", 2 * _LATE, 32),
        ("resharding", 2 * _LATE + 5, 16))),
)  # fmt: skip


def _dynamo_json(item: dict[str, Any]) -> dict[str, Any]:
    wire: dict[str, Any] = serialize(item)
    return wire


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
        "item": _dynamo_json(item),
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
    old = state_item(_path(("migrating", 0, 16)))
    del old["priorWriteLayout"]
    for when, now in (
        ("before effectiveAt", OPENED + DELAY - MS),
        ("from effectiveAt", OPENED + DELAY),
    ):
        cases.append(_routing_case(f"migrating(16) item without the prior pair: {when}", old, now))
    return cases


# ---- strict parsing --------------------------------------------------------------------------


def _item(build: Callable[[], ControlState], **changes: Any) -> dict[str, Any]:
    item = {**state_item(build()), **changes}
    return {k: v for k, v in item.items() if v is not None}


_MIGRATING = STATES[1][1]
_RESHARDING = STATES[4][1]
_ABORT = STATES[6][1]
_LEASE = {
    "leaseHolder": "ops@host",
    "leaseToken": "t-1",
    "leaseDirection": "forward",
    "leaseAcquiredAt": "2026-03-01T10:00:00.000Z",
    "leaseHeartbeatAt": "2026-03-01T10:00:30.000Z",
    "leaseExpiresAt": "2026-03-01T10:05:00.000Z",
    "leaseStateVersion": 1,
}
_COMPLETION = {
    "lastBackfillDirection": "forward",
    "lastBackfillSourceLayout": "legacy",
    "lastBackfillTargetLayout": "sharded",
    "lastBackfillTargetShardCount": 16,
    "lastBackfillStateVersion": 1,
    "lastBackfillStartedAt": "2026-03-01T10:00:00.000Z",
    "lastBackfillCompletedAt": "2026-03-01T11:00:00.000Z",
    "lastBackfillScanned": 10,
    "lastBackfillRestamped": 9,
    "lastBackfillAnomalies": 1,
    "lastBackfillComplete": True,
    "lastBackfillVerified": True,
    "lastBackfillHolder": "ops@host",
    "lastBackfillLeaseToken": "t-0",
}
_Refusal = tuple[str, str] | None  # (kind, attribute)
# (name, the refusal every implementation must report: its kind and the attribute it names,
# the item). Checked against the Python decoder when generating.
RECORDS: tuple[tuple[str, _Refusal, Callable[[], dict[str, Any]]], ...] = (
    ("migrating with its prior pair", None, lambda: _item(_MIGRATING)),
    ("rolling-back with prior legacy", None, lambda: _item(_ABORT)),
    ("resharding with prior sharded(16)", None, lambda: _item(_RESHARDING)),
    ("migrating without the prior pair", None, lambda: _item(_MIGRATING, priorWriteLayout=None)),
    ("migrating with a lease, a completed backfill and the controls", None,
     lambda: _item(_MIGRATING, **_LEASE, **_COMPLETION, backfillPaused=True,
                   backfillMaxWritesPerSecond=Decimal("12.5"))),
    ("phase disagrees with its layouts", ("inconsistent", "phase"),
     lambda: _item(_MIGRATING, phase="sharded")),
    ("phase missing", ("missing", "phase"), lambda: _item(_MIGRATING, phase=None)),
    ("not a STATE item: entityType", ("wrong-item", "entityType"),
     lambda: _item(_MIGRATING, entityType="RenewalSaga")),
    ("not a STATE item: PK", ("wrong-item", "PK"),
     lambda: _item(_MIGRATING, PK="RSAGA#1")),
    ("shard count not a power of two", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=12)),
    ("shard count above 1024", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=2048)),
    ("shard count not an integer", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=Decimal("16.5"))),
    ("unknown layout kind", ("invalid-value", "layout"),
     lambda: _item(_MIGRATING, layout="hashed")),
    ("shard count on a legacy layout", ("unexpected", "shardCount"),
     lambda: _item(_MIGRATING, shardCount=16)),
    ("moving to the same layout", ("inconsistent", "movingToLayout"),
     lambda: _item(_MIGRATING, movingToLayout="legacy", movingToShardCount=None)),
    ("prior pair: unknown kind", ("invalid-value", "priorWriteLayout"),
     lambda: _item(_MIGRATING, priorWriteLayout="hashed")),
    ("prior pair: sharded without a count", ("missing", "priorWriteShardCount"),
     lambda: _item(_RESHARDING, priorWriteShardCount=None)),
    ("prior pair: bad shard count", ("invalid-value", "priorWriteShardCount"),
     lambda: _item(_RESHARDING, priorWriteShardCount=3)),
    ("prior pair: count on legacy", ("unexpected", "priorWriteShardCount"),
     lambda: _item(_MIGRATING, priorWriteShardCount=16)),
    ("prior pair: count without a kind", ("unexpected", "priorWriteShardCount"),
     lambda: _item(_MIGRATING, priorWriteLayout=None, priorWriteShardCount=16)),
    ("prior pair: a layout the state does not read", ("inconsistent", "priorWriteLayout"),
     lambda: _item(_MIGRATING, priorWriteLayout="sharded", priorWriteShardCount=32)),
    ("missing required attribute: layout", ("missing", "layout"),
     lambda: _item(_MIGRATING, layout=None)),
    ("missing required attribute: previousLayout", ("missing", "previousLayout"),
     lambda: _item(_MIGRATING, previousLayout=None)),
    ("missing required attribute: version", ("missing", "version"),
     lambda: _item(_MIGRATING, version=None)),
    ("missing required attribute: changedBy", ("missing", "changedBy"),
     lambda: _item(_MIGRATING, changedBy=None)),
    ("missing required attribute: effectiveAt", ("missing", "effectiveAt"),
     lambda: _item(_MIGRATING, effectiveAt=None)),
    ("wrong type: version as a string", ("wrong-type", "version"),
     lambda: _item(_MIGRATING, version="2")),
    ("wrong type: reason as a number", ("wrong-type", "reason"),
     lambda: _item(_MIGRATING, reason=7)),
    ("wrong type: checksPassed as a string", ("wrong-type", "checksPassed"),
     lambda: _item(_MIGRATING, checksPassed="backfill-verified")),
    ("wrong type: checksForced holding a number", ("wrong-type", "checksForced"),
     lambda: _item(_MIGRATING, checksForced=["a", 1])),
    ("wrong type: effectiveAt as a number", ("wrong-type", "effectiveAt"),
     lambda: _item(_MIGRATING, effectiveAt=1)),
    ("wrong type: priorWriteLayout as a number", ("wrong-type", "priorWriteLayout"),
     lambda: _item(_MIGRATING, priorWriteLayout=1)),
    ("effectiveAt not UTC ISO-8601", ("invalid-value", "effectiveAt"),
     lambda: _item(_MIGRATING, effectiveAt="2026-03-01T09:01:15Z")),
    ("changedAt not a day of the calendar", ("invalid-value", "changedAt"),
     lambda: _item(_MIGRATING, changedAt="2026-02-30T09:00:00.000Z")),
    ("version 0", ("invalid-value", "version"), lambda: _item(_MIGRATING, version=0)),
    ("backfillPaused as a string", ("wrong-type", "backfillPaused"),
     lambda: _item(_MIGRATING, backfillPaused="true")),
    ("backfillMaxWritesPerSecond as a string", ("wrong-type", "backfillMaxWritesPerSecond"),
     lambda: _item(_MIGRATING, backfillMaxWritesPerSecond="10")),
    ("lease without its holder", ("missing", "leaseHolder"),
     lambda: _item(_MIGRATING, **{**_LEASE, "leaseHolder": None})),
    ("lease with an unknown direction", ("invalid-value", "leaseDirection"),
     lambda: _item(_MIGRATING, **{**_LEASE, "leaseDirection": "sideways"})),
    ("lease version as a string", ("wrong-type", "leaseStateVersion"),
     lambda: _item(_MIGRATING, **{**_LEASE, "leaseStateVersion": "1"})),
    ("last backfill without its source layout", ("missing", "lastBackfillSourceLayout"),
     lambda: _item(_MIGRATING, **{**_COMPLETION, "lastBackfillSourceLayout": None})),
    ("last backfill with an unknown direction", ("invalid-value", "lastBackfillDirection"),
     lambda: _item(_MIGRATING, **{**_COMPLETION, "lastBackfillDirection": "sideways"})),
    ("last backfill: verified as a number", ("wrong-type", "lastBackfillVerified"),
     lambda: _item(_MIGRATING, **{**_COMPLETION, "lastBackfillVerified": 1})),
)  # fmt: skip


def record_cases() -> list[dict[str, Any]]:
    cases = []
    for name, expected, build in RECORDS:
        item = build()
        try:
            state = parse_state_item(deserialize(_dynamo_json(item)))
        except ControlItemInvalidError as err:
            seen = (err.kind.value, err.attribute)
            if seen != expected:
                detail = f"record {name!r}: refused as {seen} ({err}), expected {expected}"
                raise ValueError(detail) from err
            refusal = {"kind": err.kind.value, "attribute": err.attribute}
            result = {"valid": False, "refusal": refusal, "phase": None, "version": None}
        else:
            if expected is not None:
                raise ValueError(f"record {name!r} parsed; expected a refusal {expected}")
            result = {
                "valid": True,
                "refusal": None,
                "phase": state.phase.value,
                "version": state.version,
            }
        cases.append({"name": name, "item": _dynamo_json(item), **result})
    return cases


# ---- no STATE item ---------------------------------------------------------------------------


def _missing_case(name: str, history: Transition | None, now: datetime) -> dict[str, Any]:
    if history is None:
        state = ControlState.never_migrated()
        item = None
    else:
        item = _dynamo_json(history_item(history))
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


def build() -> dict[str, Any]:
    return {
        "description": DESCRIPTION,
        "attributes": attributes_document(),
        "routing": routing_cases(),
        "records": record_cases(),
        "missing": missing_cases(),
        "openStates": list(OPEN_STATES),
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
