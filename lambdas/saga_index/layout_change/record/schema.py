"""The control record's attributes, declared once (docs/control-contract.md, "The record").

Each row names an attribute, what it holds, whether an item may lack it, what it means, and the
field of the state's dataclass it is written from and read into. encode writes the rows,
decode reads them back strictly (each value under record/grammar.py), devkit.record_table
renders the docs' attribute tables from them, devkit.contract_vectors puts them into
docs/contract-vectors.json, and devkit.ts_record writes them into the TypeScript package
(clients/typescript/src/record-schema.ts, which its parser reads items with). Adding an
attribute is one row here (plus the field on the dataclass, and a name in items when other code
names it), then `python -m devkit.contract_vectors`, `python -m devkit.record_table`,
`python -m devkit.ts_record` and `python -m devkit.contract_corpus`; tests fail until each
generated file is current.

What the rows cannot say, and decode and encode therefore spell out:
  - a layout is two attributes (its kind and its shard count) read and written as one value,
    and so is the open-saga index's state (`openIndex` and `openIndexShardCount`, the count
    present iff the state is not `off`; absent reads as `off`, which writers omit, so every
    item written before the open index existed reads as `off`);
  - `phase` and `previousPhase` are derived from the layouts: written for readers'
    convenience; a reader checks `phase` against its layouts and ignores `previousPhase`;
  - `priorWriteLayout` is written as the layout writers stamp until effectiveAt (never absent)
    and read as Transition.prior_write, where absent means `layout` (items older than it);
  - a lease (a completed backfill) is on the item as a whole or not at all: its attributes are
    optional on the item, and required once `leaseToken` (`lastBackfillDirection`) is there.
"""

from __future__ import annotations

from typing import Any, Final

from saga_index.layout_change.record import items as n
from saga_index.layout_change.record.attribute import Attribute, Part, Value

__all__ = [
    "COMPLETION",
    "CONTROLS",
    "HISTORY",
    "HISTORY_FLAGS",
    "LEASE",
    "PARTS",
    "STATE",
    "TRANSITION",
    "Attribute",
    "Part",
    "Value",
    "attributes_document",
]

STATE: Final = "STATE"
HISTORY: Final = "HISTORY"


def _layout(
    kind: str, count: str, field: str, what: str, *, optional: bool
) -> tuple[Attribute, ...]:
    return (
        Attribute(kind, Value.LAYOUT, what, field, optional=optional, count=count),
        Attribute(count, Value.SHARD_COUNT, f"its N, present iff `{kind} = sharded`", field, True),
    )


def _open_index(kind: str, count: str, field: str, what: str) -> tuple[Attribute, ...]:
    return (
        Attribute(kind, Value.OPEN_INDEX, what, field, optional=True, count=count),
        Attribute(
            count,
            Value.SHARD_COUNT,
            f"the open index's own N, present iff `{kind}` is not `off`",
            field,
            True,
        ),
    )


TRANSITION: Final = Part(
    "transition",
    (STATE, HISTORY),
    (
        *_layout(
            n.LAYOUT,
            n.SHARD_COUNT,
            "layout",
            "current layout kind: `legacy` \\| `sharded`",
            optional=False,
        ),
        *_layout(
            n.MOVING_TO_LAYOUT,
            n.MOVING_TO_SHARD_COUNT,
            "moving_to",
            "the layout rows are moving to; absent when not moving",
            optional=True,
        ),
        Attribute(
            n.PHASE,
            Value.PHASE,
            "derived from the two layouts (below), stored for readers' convenience; a reader "
            "refuses an item whose `phase` disagrees with them",
            None,
            written_from="phase",
        ),
        *_layout(
            n.PREVIOUS_LAYOUT,
            n.PREVIOUS_SHARD_COUNT,
            "previous_layout",
            "the current layout of the state this transition came from",
            optional=False,
        ),
        *_layout(
            n.PREVIOUS_MOVING_TO_LAYOUT,
            n.PREVIOUS_MOVING_TO_SHARD_COUNT,
            "previous_moving_to",
            "the layout that state was moving to",
            optional=True,
        ),
        Attribute(
            n.PREVIOUS_PHASE,
            Value.PHASE,
            "that state's phase (derived from its layouts; readers do not read it)",
            None,
            written_from="previous_phase",
        ),
        Attribute(
            n.VERSION,
            Value.INTEGER,
            "+1 on every layout transition, and only then; 1 is the first transition",
            "version",
        ),
        Attribute(n.CHANGED_AT, Value.TIME, "when the transition was written", "changed_at"),
        Attribute(n.CHANGED_BY, Value.STRING, "who (operator identity)", "changed_by"),
        Attribute(n.REASON, Value.STRING, "why (required)", "reason"),
        Attribute(
            n.EFFECTIVE_AT,
            Value.TIME,
            '`changedAt + T + grace + margin` (see "T and effectiveAt"); writers switch to the '
            "target at it",
            "effective_at",
        ),
        Attribute(
            n.PRIOR_WRITE_LAYOUT,
            Value.LAYOUT,
            "the layout writers stamp UNTIL `effectiveAt`: `legacy` \\| `sharded`; always one of "
            "`layout` / `movingToLayout`; always written, absent only on items written before "
            "it existed (then read as `layout`)",
            "prior_write",
            optional=True,
            written_from="prior_write_layout",
            count=n.PRIOR_WRITE_SHARD_COUNT,
        ),
        Attribute(
            n.PRIOR_WRITE_SHARD_COUNT,
            Value.SHARD_COUNT,
            "its N, present iff `priorWriteLayout = sharded`",
            "prior_write",
            optional=True,
            written_from="prior_write_layout",
        ),
        Attribute(
            n.CHECKS_PASSED,
            Value.STRINGS,
            "names of the preconditions that passed (absent reads as empty)",
            "checks_passed",
            optional=True,
            absent=(),
        ),
        Attribute(
            n.CHECKS_FORCED,
            Value.STRINGS,
            "names of the preconditions skipped by `--force` (empty unless forced)",
            "checks_forced",
            optional=True,
            absent=(),
        ),
        *_open_index(
            n.OPEN_INDEX,
            n.OPEN_INDEX_SHARD_COUNT,
            "open_index",
            "the open-saga index's state: `off` \\| `adding` \\| `open` \\| `removing`; absent "
            "reads as `off` (writers omit `off`)",
        ),
        *_open_index(
            n.PREVIOUS_OPEN_INDEX,
            n.PREVIOUS_OPEN_INDEX_SHARD_COUNT,
            "previous_open_index",
            "the open index's state in the state this transition came from; absent reads as `off`",
        ),
    ),
)

LEASE: Final = Part(
    "lease",
    (STATE,),
    (
        Attribute(
            n.LEASE_HOLDER,
            Value.STRING,
            "who runs the backfill (`user@host`, an execution name)",
            "holder",
        ),
        Attribute(
            n.LEASE_TOKEN,
            Value.STRING,
            "the run's token; present iff a lease is held (live or expired)",
            "token",
        ),
        Attribute(n.LEASE_DIRECTION, Value.DIRECTION, "`forward` \\| `rollback`", "direction"),
        Attribute(n.LEASE_ACQUIRED_AT, Value.TIME, "when the lease was taken", "acquired_at"),
        Attribute(n.LEASE_HEARTBEAT_AT, Value.TIME, "its last heartbeat", "heartbeat_at"),
        Attribute(
            n.LEASE_EXPIRES_AT,
            Value.TIME,
            "live while now < `leaseExpiresAt`",
            "expires_at",
        ),
        Attribute(
            n.LEASE_STATE_VERSION,
            Value.INTEGER,
            "the `version` the lease was taken under",
            "state_version",
        ),
        Attribute(n.LEASE_PACE, Value.STRING, "the run's pace, and why", "pace", optional=True),
        Attribute(
            n.LEASE_KIND,
            Value.STRING,
            "what the run changes: `layout` (GSI4PK) \\| `open-index` (OpenSagaPK); absent "
            "reads as `layout` (runs before it existed)",
            "kind",
            optional=True,
        ),
    ),
    present_if=n.LEASE_TOKEN,
)

CONTROLS: Final = Part(
    "backfill controls",
    (STATE,),
    (
        Attribute(
            n.BACKFILL_MAX_WRITES_PER_SECOND,
            Value.NUMBER,
            "runtime write cap; absent: the run's own setting",
            "backfill_max_writes_per_second",
            optional=True,
        ),
        Attribute(
            n.BACKFILL_PAUSED,
            Value.BOOLEAN,
            "`true`: workers stop writing until resumed (absent reads as `false`)",
            "backfill_paused",
            optional=True,
            absent=False,
        ),
        Attribute(
            n.LEASE_EPOCH,
            Value.INTEGER,
            "the fencing epoch of the latest lease taken: strictly increasing (at least its "
            "acquisition time in epoch ms), kept after the release; the fence slots' `epoch`",
            "lease_epoch",
            optional=True,
        ),
    ),
)

COMPLETION: Final = Part(
    "last backfill",
    (STATE,),
    (
        Attribute(
            n.LAST_BACKFILL_DIRECTION,
            Value.DIRECTION,
            "the last run that released with a result: `forward` \\| `rollback`",
            "direction",
        ),
        *_layout(
            n.LAST_BACKFILL_SOURCE_LAYOUT,
            n.LAST_BACKFILL_SOURCE_SHARD_COUNT,
            "source",
            "the layout it moved rows from",
            optional=False,
        ),
        *_layout(
            n.LAST_BACKFILL_TARGET_LAYOUT,
            n.LAST_BACKFILL_TARGET_SHARD_COUNT,
            "target",
            "the layout it moved rows to",
            optional=False,
        ),
        Attribute(
            n.LAST_BACKFILL_STATE_VERSION,
            Value.INTEGER,
            "the `version` it ran under",
            "state_version",
        ),
        Attribute(n.LAST_BACKFILL_STARTED_AT, Value.TIME, "when it started", "started_at"),
        Attribute(n.LAST_BACKFILL_COMPLETED_AT, Value.TIME, "when it released", "completed_at"),
        Attribute(n.LAST_BACKFILL_SCANNED, Value.INTEGER, "rows it read", "scanned"),
        Attribute(n.LAST_BACKFILL_RESTAMPED, Value.INTEGER, "rows it re-stamped", "restamped"),
        Attribute(n.LAST_BACKFILL_ANOMALIES, Value.INTEGER, "rows it could not key", "anomalies"),
        Attribute(n.LAST_BACKFILL_COMPLETE, Value.BOOLEAN, "it ran to the end", "complete"),
        Attribute(
            n.LAST_BACKFILL_VERIFIED,
            Value.BOOLEAN,
            "its read-back verification passed",
            "verified",
        ),
        Attribute(n.LAST_BACKFILL_HOLDER, Value.STRING, "which run it was: its holder", "holder"),
        Attribute(n.LAST_BACKFILL_LEASE_TOKEN, Value.STRING, "and its token", "lease_token"),
    ),
    present_if=n.LAST_BACKFILL_DIRECTION,
)

# On HISTORY items only (record/history.py says what an intent is).
HISTORY_FLAGS: Final = Part(
    "history flags",
    (HISTORY,),
    (
        Attribute(
            n.HISTORY_APPLIED,
            Value.BOOLEAN,
            "`false` while the item is an **intent** (written before its STATE write, which may "
            "still fail or lose); `true` once a STATE item of its version was seen holding the "
            "same transition. Items written before intents existed lack it and count as applied "
            "(they were written after their STATE write).",
            "applied",
            optional=True,
            absent=True,
        ),
        Attribute(
            n.HISTORY_ABANDONED,
            Value.BOOLEAN,
            "`true` on an intent whose writer saw its STATE write fail while STATE kept the "
            "version before: never applied, followed by no reader",
            "abandoned",
            optional=True,
            absent=False,
        ),
    ),
)

PARTS: Final = (TRANSITION, LEASE, CONTROLS, COMPLETION, HISTORY_FLAGS)


def attributes_document() -> list[dict[str, Any]]:
    """The table as data, for docs/contract-vectors.json: every attribute of a STATE or HISTORY
    item, its DynamoDB type, what it holds, whether an item may lack it, what it then reads as
    (`absent`) and, for a layout's kind, its shard-count attribute (`count`)."""
    return [
        {
            "name": attribute.name,
            "part": part.name,
            "items": list(part.items),
            "type": attribute.value.dynamo_type,
            "value": attribute.value.value,
            "optional": attribute.optional or part.present_if is not None,
            "requiredWith": part.present_if
            if part.present_if != attribute.name and not attribute.optional
            else None,
            "absent": list(attribute.absent)
            if isinstance(attribute.absent, tuple)
            else attribute.absent,
            "count": attribute.count,
        }
        for part in PARTS
        for attribute in part.attributes
    ]
