"""The control record as `phase show --json` prints it, and as its human lines: the keys are a
contract (runbook, demo, `status`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from saga_index.index import Layout
from saga_index.layout_change.record import (
    ControlState,
    HistoryEntry,
    RecordCondition,
    Transition,
    format_time,
    routing_for,
    seconds_until,
)
from saga_index.layout_change.transitions import allowed_moves


def layout_document(layout: Layout | None) -> dict[str, Any] | None:
    return None if layout is None else {"layout": layout.kind, "shardCount": layout.shard_count}


def _time(at: datetime | None) -> str | None:
    return None if at is None else format_time(at)


def transition_change(transition: Transition) -> str:
    """What a transition moved, as an operator reads it: `migrating -> sharded` for a layout
    move, `openIndex off -> adding(16)` for an open index move (its phase is the same on both
    sides, so `sharded -> sharded` would hide it)."""
    if transition.changes_open_index:
        return f"openIndex {transition.previous_open_index} -> {transition.open_index}"
    return f"{transition.previous_phase.value} -> {transition.phase.value}"


def transition_document(transition: Transition) -> dict[str, Any]:
    """One HISTORY item: what changed, who, when, why, which checks passed or were forced."""
    return {
        "version": transition.version,
        "from": transition.previous_phase.value,
        "to": transition.phase.value,
        "layout": transition.layout.kind,
        "shardCount": transition.layout.shard_count,
        "movingTo": layout_document(transition.moving_to),
        "changedAt": format_time(transition.changed_at),
        "changedBy": transition.changed_by,
        "reason": transition.reason,
        "effectiveAt": format_time(transition.effective_at),
        "checksPassed": list(transition.checks_passed),
        "checksForced": list(transition.checks_forced),
        # The open-saga index's state after and before (the same unless the move was its).
        "openIndex": str(transition.open_index),
        "previousOpenIndex": str(transition.previous_open_index),
        # Which of the record's two dimensions the transition moved, and the move as text.
        "moved": "open-index" if transition.changes_open_index else "layout",
        "change": transition_change(transition),
    }


def history_document(entry: HistoryEntry, state: ControlState) -> dict[str, Any]:
    """One HISTORY item with what a reader makes of it: applied (a STATE write of it was
    confirmed, or the STATE item holds it now), an intent whose STATE write is not confirmed,
    or abandoned (its STATE write failed; never applied)."""
    doc = transition_document(entry.transition)
    held = state.condition is RecordCondition.PRESENT and state.transition == entry.transition
    applied = entry.applied or held
    doc["applied"] = applied
    doc["status"] = "applied" if applied else ("abandoned" if entry.abandoned else "intent")
    # The flags as stored: an item the STATE item holds can still be stored as an intent, or
    # marked abandoned, when the answer of its STATE write was lost (the same `phase set`
    # settles it).
    doc["storedApplied"] = entry.applied
    doc["storedAbandoned"] = entry.abandoned
    return doc


def history_line(item: dict[str, Any]) -> str:
    """One history_document as `phase show --history` prints it."""
    forced = f" FORCED {','.join(item['checksForced'])}" if item["checksForced"] else ""
    status = "" if item["status"] == "applied" else f" [{item['status'].upper()}]"
    if item["applied"] and not item["storedApplied"]:
        stored = "ABANDONED" if item["storedAbandoned"] else "AN INTENT"
        status = (
            f" [the STATE item holds it, but its history item is stored as {stored}: "
            "the same `phase set` settles it]"
        )
    return (
        f"  v{item['version']}: {item['change']} at {item['changedAt']} "
        f"by {item['changedBy']}: {item['reason']}{forced}{status}"
    )


def record_document(state: ControlState, table: str, now: datetime) -> dict[str, Any]:
    """The record as `phase show --json` prints it (the keys are a contract: runbook, demo).

    shardCount is the CURRENT layout's N (null while legacy or migrating: see
    movingTo.shardCount), exactly as the STATE item holds it.
    """
    transition = state.transition
    effective_at = state.effective_at
    routing = routing_for(state, now)
    missing = state.condition is RecordCondition.MISSING
    return {
        "table": table,
        "condition": state.condition.value,
        "phase": state.phase.value,
        "version": state.version,
        "layout": state.layout.kind,
        "shardCount": state.layout.shard_count,
        "movingTo": layout_document(state.moving_to),
        "changedAt": _time(transition.changed_at if transition else None),
        "changedBy": transition.changed_by if transition else None,
        "reason": transition.reason if transition else None,
        "effectiveAt": _time(effective_at),
        "effective": effective_at is None or now >= effective_at,
        "secondsUntilEffective": round(seconds_until(effective_at, now), 3),
        "previousPhase": transition.previous_phase.value if transition else None,
        "checksPassed": list(transition.checks_passed) if transition else [],
        "checksForced": list(transition.checks_forced) if transition else [],
        "routing": {
            # What writers stamp NOW (the prior write layout before effectiveAt), and the
            # switch still ahead of them, if any.
            "writes": str(routing.writes),
            "reads": list(dict.fromkeys((str(routing.source), str(routing.target)))),
            "switchesTo": None if routing.switched else str(routing.target),
            "switchesAt": None if routing.switched else _time(effective_at),
        },
        "allowedMoves": [] if missing else list(allowed_moves(state.phase)),
        "openIndex": open_index_summary(state, now),
    }


def open_index_summary(state: ControlState, now: datetime) -> dict[str, Any]:
    """The open-saga index's state (`open-index show` has the whole of it): off | adding |
    open | removing, its N, whether writers stamp OpenSagaPK now, and which index open-saga
    enumerations read."""
    routing = routing_for(state, now)
    return {
        "state": state.open_index.state.value,
        "shardCount": state.open_index.shard_count,
        "stamps": None if routing.open_writes is None else str(routing.open_writes),
        "enumerations": "gsi4" if routing.open_enumeration_keys() is None else "open-index",
    }


def writes_now(routing: dict[str, Any]) -> str:
    """ "legacy until <effectiveAt>, then sharded(16)": what writers stamp now, and from when
    they stamp something else."""
    if routing.get("switchesTo") is None:
        return str(routing["writes"])
    return f"{routing['writes']} until {routing['switchesAt']}, then {routing['switchesTo']}"


def record_lines(doc: dict[str, Any]) -> list[str]:
    moving = doc["movingTo"]
    layout = doc["layout"] + (f"({doc['shardCount']})" if doc["shardCount"] else "")
    if moving:
        layout += f" -> {moving['layout']}" + (
            f"({moving['shardCount']})" if moving["shardCount"] else ""
        )
    lines = [
        f"phase {doc['phase']}  (version {doc['version']}, record {doc['condition']})",
        f"  layout:       {layout}",
        f"  routing:      writers stamp {writes_now(doc['routing'])}; readers read "
        + ", then ".join(doc["routing"]["reads"]),
    ]
    if doc["version"]:
        wait = doc["secondsUntilEffective"]
        lines += [
            f"  changed:      {doc['changedAt']} by {doc['changedBy']} "
            f"(from {doc['previousPhase']})",
            f"  reason:       {doc['reason']}",
            f"  effectiveAt:  {doc['effectiveAt']} "
            + ("(passed)" if doc["effective"] else f"(in {wait:.0f} s)"),
        ]
        if doc["checksPassed"]:
            lines.append(f"  checks passed: {', '.join(doc['checksPassed'])}")
        if doc["checksForced"]:
            lines.append(f"  checks FORCED: {', '.join(doc['checksForced'])}")
    else:
        lines.append("  never migrated: no record yet (the first `phase set` writes it)")
    moves = doc["allowedMoves"]
    lines.append(f"  allowed moves: {', '.join(moves) if moves else 'none'}")
    lines.append(f"  open index:   {open_index_line(doc['openIndex'])}")
    return lines


def open_index_line(summary: dict[str, Any]) -> str:
    n = summary["shardCount"]
    stamps = summary["stamps"] or "no"
    return (
        f"{summary['state']}{f'({n})' if n else ''}; writers stamp OpenSagaPK: {stamps}; "
        f"open-saga enumerations read {summary['enumerations']} "
        "(saga-index open-index show)"
    )
