"""What an open-index run does to ONE row of a segment's Scan: the same segment worker, pacer,
fence and cursor as the layout's (segment.py, row.py), a different change (the strategy a
ticket of kind `open-index` selects; docs/control-contract.md, "The open-saga index"):

  read     PK, SK, entityType, personId, state, OpenSagaPK (strongly consistent parallel Scan)
  forward  (the open index adding or open) an open saga whose OpenSagaPK is not the key its
           person has under the index's N: SET it; a closed saga that carries one: REMOVE it
  rollback (removing) any row that carries OpenSagaPK: REMOVE it
  write    one UpdateItem, through the run's lease fence, IF the row still exists and its
           state, personId and OpenSagaPK are what the Scan read (rollback: IF it still
           carries OpenSagaPK). A saga a writer closed after the Scan read it open (its close
           removed the key) is never stamped again: the condition fails and it is counted as
           `skipped`, as a layout re-stamp that lost to a writer is
  count    `open.sagaRows` the saga rows read; `restamped` every write made (stamps and
           removals), `open.removed` the removals; in a dry run `wouldRestamp` and
           `open.wouldRemove`; `anomalies` the open sagas whose personId gives no key (left
           unstamped, listed)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from saga_index.index import OPEN_STATES, Person, keys, names
from saga_index.layout_change.backfill.fence import RowWrite
from saga_index.layout_change.backfill.row import RowRestamper
from saga_index.layout_change.backfill.wire import (
    TABLE_KEY_ATTRIBUTES,
    OpenCounts,
    plain_key,
)
from saga_index.store.dynamo import (
    Expression,
    all_of,
    attribute_list,
    request_expressions,
)

_KEY: Final = names.OPEN_INDEX_PARTITION_KEY

# What the decision reads of a row.
OPEN_ROW_ATTRIBUTES: Final = attribute_list(
    {
        "#pk": "PK",
        "#sk": "SK",
        "#entityType": "entityType",
        "#personId": "personId",
        "#state": "state",
        "#open": _KEY,
    }
)
# UpdateItem creates a missing row: a row deleted since the read must fail the condition.
ROW_STILL_EXISTS: Final = Expression("attribute_exists(#pk)", names={"#pk": "PK"})
STAMP: Final = Expression("SET #open = :key", names={"#open": _KEY}, slots=frozenset({":key"}))
REMOVE: Final = Expression("REMOVE #open", names={"#open": _KEY})
STILL_STAMPED: Final = Expression("attribute_exists(#open)", names={"#open": _KEY})
# The row's attributes the decision came from, held as the Scan read them.
_HELD: Final = (("state", "#state", ":seenState"), ("personId", "#person", ":seenPerson"))


def unchanged_since_read(raw: Mapping[str, Any]) -> Expression:
    """The row still exists, and its state, personId and OpenSagaPK are as `raw` (the typed
    values the Scan returned; an attribute read absent must still be absent)."""
    clauses = [ROW_STILL_EXISTS]
    for attribute, name, slot in (*_HELD, (_KEY, "#open", ":seenOpen")):
        if attribute in raw:
            clauses.append(
                Expression(
                    f"{name} = {slot}", names={name: attribute}, slots=frozenset({slot})
                ).given({slot: raw[attribute]})
            )
        else:
            clauses.append(Expression(f"attribute_not_exists({name})", names={name: attribute}))
    return all_of(*clauses)


class OpenRowStamper(RowRestamper):
    """The rows of one segment invocation of an open-index run, one at a time."""

    projection = OPEN_ROW_ATTRIBUTES

    def handle(self, raw: Mapping[str, Any], take_token: Callable[[], bool]) -> bool:
        """As RowRestamper.handle: False when stopped before writing this row."""
        if raw.get("entityType", {}).get("S") != keys.ENTITY_TYPE:
            return True  # not a saga: never touched
        counts = self._open_counts()
        counts.saga_rows += 1
        decided = self._decide(raw)
        if decided is None:
            return True
        change, update, condition = decided
        if len(counts.examples) < self.request.open_example_limit:
            counts.examples.append({**plain_key(raw), "change": change})
        if self.request.dry_run:
            self.result.would_restamp += 1
            counts.would_remove += change == "remove"
            return True
        if not take_token():
            return False
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": {name: raw[name] for name in TABLE_KEY_ATTRIBUTES},
            **request_expressions(update=update, condition=condition),
        }
        outcome = self._paced_write(request, raw, take_token)
        if outcome is None or outcome is RowWrite.LEASE_LOST:
            return False
        if outcome is RowWrite.ROW_CHANGED:
            self.result.skipped += 1
        elif outcome is RowWrite.WRITTEN:
            self.result.restamped += 1
            counts.removed += change == "remove"
        return True

    def _open_counts(self) -> OpenCounts:
        if self.result.open is None:
            self.result.open = OpenCounts()
        return self.result.open

    def _decide(self, raw: Mapping[str, Any]) -> tuple[str, Expression, Expression] | None:
        stamped = raw.get(_KEY, {}).get("S")
        if self.request.move.direction.value == "rollback":
            return None if stamped is None else ("remove", REMOVE, STILL_STAMPED)
        state = raw.get("state", {}).get("S")
        if state not in OPEN_STATES:
            return None if _KEY not in raw else ("remove", REMOVE, unchanged_since_read(raw))
        try:
            key = self.request.run.open_index().key_for(Person.of(raw["personId"]["S"]))
        except (KeyError, ValueError):
            self.result.anomalies += 1
            self._list_anomaly(raw, "open saga with no usable personId: no OpenSagaPK for it")
            return None
        if stamped == key:
            return None
        return ("stamp", STAMP.given({":key": {"S": key}}), unchanged_since_read(raw))
