"""The `records` of docs/contract-vectors.json: STATE items a strict reader accepts (their
phase and version) and items it refuses, each with the kind of the refusal and the attribute it
names (saga_index.layout_change.record.errors.Refusal), never its wording."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from devkit.contract_states import OPEN_INDEX_STATES, STATES, dynamo_json
from saga_index.layout_change.record import (
    ControlItemInvalidError,
    ControlState,
    deserialize_control_item,
    parse_state_item,
    state_item,
)


class Wire(dict[str, Any]):
    """An attribute given as DynamoDB stores it (`{"N": " 16"}`, `{"NULL": true}`): what no
    Python value serialises to, which a hand-edited item may still hold."""


def _item(build: Callable[[], ControlState], **changes: Any) -> dict[str, Any]:
    item = {**state_item(build()), **changes}
    return {k: v for k, v in item.items() if v is not None}


def wire_json(item: dict[str, Any]) -> dict[str, Any]:
    """`item` as DynamoDB JSON, its Wire attributes as given."""
    plain = dynamo_json({k: v for k, v in item.items() if not isinstance(v, Wire)})
    return {k: dict(v) if isinstance(v, Wire) else plain[k] for k, v in item.items()}


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
    # The grammar (record/grammar.py), where languages' own parsers differ.
    ("a NULL optional attribute counts as absent", None,
     lambda: _item(_MIGRATING, backfillPaused=Wire(NULL=True), checksForced=Wire(NULL=True))),
    ("a NULL required attribute is missing", ("missing", "reason"),
     lambda: _item(_MIGRATING, reason=Wire(NULL=True))),
    ("a time in Unicode digits", ("invalid-value", "changedAt"),
     lambda: _item(_MIGRATING, changedAt="\u0662\u0660\u0662\u0666-03-01T09:00:00.000Z")),
    ("a time in fullwidth digits", ("invalid-value", "effectiveAt"),
     lambda: _item(_MIGRATING, effectiveAt="2026-03-01T09:01:1\uff15.000Z")),
    ("a time in year 0000", ("invalid-value", "changedAt"),
     lambda: _item(_MIGRATING, changedAt="0000-03-01T09:00:00.000Z")),
    ("a time in year 0001", None, lambda: _item(_MIGRATING, changedAt="0001-01-01T00:00:00.000Z")),
    ("a time at hour 24", ("invalid-value", "changedAt"),
     lambda: _item(_MIGRATING, changedAt="2026-03-01T24:00:00.000Z")),
    ("a number with spaces: N ' 16'", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=Wire(N=" 16"))),
    ("a number with a sign: N '+1'", ("invalid-value", "version"),
     lambda: _item(_MIGRATING, version=Wire(N="+1"))),
    ("a number in hexadecimal: N '0x10'", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=Wire(N="0x10"))),
    ("a number in Unicode digits", ("invalid-value", "movingToShardCount"),
     lambda: _item(_MIGRATING, movingToShardCount=Wire(N="\u0661\u0666"))),
    ("a rate that is not a number: N 'NaN'", ("invalid-value", "backfillMaxWritesPerSecond"),
     lambda: _item(_MIGRATING, backfillMaxWritesPerSecond=Wire(N="NaN"))),
    ("a rate beyond any double: N '1e400'", ("invalid-value", "backfillMaxWritesPerSecond"),
     lambda: _item(_MIGRATING, backfillMaxWritesPerSecond=Wire(N="1e400"))),
    ("an integer written with an exponent and a fraction", None,
     lambda: _item(_MIGRATING, version=Wire(N="0.1e1"), movingToShardCount=Wire(N="1.6E+1"))),
    ("an integer one digit past a double's precision", ("invalid-value", "version"),
     lambda: _item(_MIGRATING, version=Wire(N="1.0000000000000001"))),
    ("a version of 2^53 - 1, exact", None, lambda: _item(_MIGRATING, version=2**53 - 1)),
    ("a version above 2^53", ("invalid-value", "version"),
     lambda: _item(_MIGRATING, version=2**53 + 1)),
    ("a count above 2^53", ("invalid-value", "lastBackfillScanned"),
     lambda: _item(_MIGRATING, **{**_COMPLETION, "lastBackfillScanned": 10**20})),
    ("a direction with spaces", ("invalid-value", "leaseDirection"),
     lambda: _item(_MIGRATING, **{**_LEASE, "leaseDirection": " forward"})),
    ("a direction in capitals", ("invalid-value", "lastBackfillDirection"),
     lambda: _item(_MIGRATING, **{**_COMPLETION, "lastBackfillDirection": "FORWARD"})),
)  # fmt: skip


_ADDING = OPEN_INDEX_STATES[0][1]
_REMOVING = OPEN_INDEX_STATES[4][1]
# The open index's attributes (record/open_index.py), as `RECORDS`.
OPEN_INDEX_RECORDS: tuple[tuple[str, _Refusal, Callable[[], dict[str, Any]]], ...] = (
    ("open index adding(16)", None, lambda: _item(_ADDING)),
    ("open index removing(16), from adding(16)", None, lambda: _item(_REMOVING)),
    ("no open index attributes: off", None, lambda: _item(_MIGRATING)),
    ("openIndex written as off, no count", None,
     lambda: _item(_MIGRATING, openIndex="off", previousOpenIndex="off")),
    ("openIndex NULL: off", None, lambda: _item(_MIGRATING, openIndex=Wire(NULL=True))),
    ("openIndex in capitals", ("invalid-value", "openIndex"),
     lambda: _item(_ADDING, openIndex="Adding")),
    ("openIndex with a space", ("invalid-value", "openIndex"),
     lambda: _item(_ADDING, openIndex="adding ")),
    ("openIndex an unknown word", ("invalid-value", "openIndex"),
     lambda: _item(_ADDING, openIndex="enabled")),
    ("openIndex as a number", ("wrong-type", "openIndex"), lambda: _item(_ADDING, openIndex=1)),
    ("open index adding without its count", ("missing", "openIndexShardCount"),
     lambda: _item(_ADDING, openIndexShardCount=None)),
    ("open index count not a power of two", ("invalid-value", "openIndexShardCount"),
     lambda: _item(_ADDING, openIndexShardCount=12)),
    ("open index count as a string", ("wrong-type", "openIndexShardCount"),
     lambda: _item(_ADDING, openIndexShardCount="16")),
    ("open index count while off", ("unexpected", "openIndexShardCount"),
     lambda: _item(_MIGRATING, openIndexShardCount=16)),
    ("open index count with openIndex written as off", ("unexpected", "openIndexShardCount"),
     lambda: _item(_MIGRATING, openIndex="off", openIndexShardCount=16)),
    ("previousOpenIndex an unknown word", ("invalid-value", "previousOpenIndex"),
     lambda: _item(_REMOVING, previousOpenIndex="sideways")),
    ("previous open index without its count", ("missing", "previousOpenIndexShardCount"),
     lambda: _item(_REMOVING, previousOpenIndexShardCount=None)),
    ("a transition moving the layout and the open index", ("inconsistent", "openIndex"),
     lambda: _item(_MIGRATING, openIndex="adding", openIndexShardCount=16)),
)  # fmt: skip


def record_cases(
    records: tuple[tuple[str, _Refusal, Callable[[], dict[str, Any]]], ...] = RECORDS,
    *,
    with_open_index: bool = False,
) -> list[dict[str, Any]]:
    """The cases of `records`; `with_open_index` adds the open index's state to each."""
    cases = []
    for name, expected, build in records:
        item = wire_json(build())
        try:
            state = parse_state_item(deserialize_control_item(item))
        except ControlItemInvalidError as err:
            seen = (err.kind.value, err.attribute)
            if seen != expected:
                detail = f"record {name!r}: refused as {seen} ({err}), expected {expected}"
                raise ValueError(detail) from err
            refusal = {"kind": err.kind.value, "attribute": err.attribute}
            result = {"valid": False, "refusal": refusal, "phase": None, "version": None}
            if with_open_index:
                result["openIndex"] = None
        else:
            if expected is not None:
                raise ValueError(f"record {name!r} parsed; expected a refusal {expected}")
            result = {
                "valid": True,
                "refusal": None,
                "phase": state.phase.value,
                "version": state.version,
            }
            if with_open_index:
                result["openIndex"] = str(state.open_index)
        cases.append({"name": name, "item": item, **result})
    return cases
