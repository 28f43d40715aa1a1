"""The control items in DynamoDB: strongly consistent reads, compare-and-set, history, events.

Every write is a single-item conditional write (no transactions: dynalite has none, and a
state write that carries its transition's details makes the history write repeatable instead).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from saga_index.index.names import CONTROL_PK, TABLE_PARTITION_KEY, TABLE_SORT_KEY
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import (
    ControlEvent,
    event_item,
    history_item,
    state_item,
    transition_attributes,
    wire_value,
)
from saga_index.layout_change.record.items import (
    ENTITY_STATE,
    ENTITY_TYPE,
    EVENT_SK_PREFIX,
    HISTORY_SK_PREFIX,
    LAYOUT,
    VERSION,
    state_key,
)
from saga_index.layout_change.record.state import ControlState, RecordCondition, Transition
from saga_index.store.dynamo.codec import deserialize, serialize
from saga_index.store.dynamo.conditions import all_of, is_condition_failed
from saga_index.store.dynamo.pages import query_pages

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# ---- condition fragments (placeholders: "#" + attribute name, ":" + value name) ---------------
# The first transition creates the STATE item; a second operator doing the same must lose.
NO_STATE_YET: Final = f"attribute_not_exists(#{TABLE_PARTITION_KEY})"
# Compare-and-set: nobody changed the layout since this writer read version :expectedVersion.
STILL_THE_VERSION_READ: Final = f"#{VERSION} = :expectedVersion"
# Backfill controls change an existing record only: an update would otherwise create a STATE
# item without a layout, which no reader could follow.
STATE_EXISTS: Final = f"attribute_exists(#{LAYOUT})"
# A HISTORY item is written once per version and never overwritten (repeats are no-ops).
NOT_WRITTEN_YET: Final = f"attribute_not_exists(#{TABLE_PARTITION_KEY})"

_PLACEHOLDER = re.compile(r"#([A-Za-z0-9_]+)")


class ControlStore:
    """The control items of one table. The client is injected (thread-safe)."""

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        if not table_name:
            raise ValueError("table_name is required")
        self.client = client
        self.table_name = table_name

    # ---- reads ---------------------------------------------------------------------------

    def read(self) -> ControlState:
        """The state as the contract defines it: the STATE item; else, when history exists, a
        MISSING state built from the newest HISTORY item; else never migrated (legacy, v0).

        Client errors propagate; a malformed item raises ControlRecordInvalidError.
        """
        response = self.client.get_item(
            TableName=self.table_name, Key=serialize(state_key()), ConsistentRead=True
        )
        raw = response.get("Item")
        if raw:
            return parse_state_item(deserialize(raw))
        newest = self.newest_history()
        if newest is None:
            return ControlState.never_migrated()
        return ControlState(transition=newest, condition=RecordCondition.MISSING)

    def newest_history(self) -> Transition | None:
        response = self.client.query(**self._history_query(), ScanIndexForward=False, Limit=1)
        items = response.get("Items", [])
        return parse_history_item(deserialize(items[0])) if items else None

    def history(self) -> list[Transition]:
        """Every HISTORY item, oldest first."""
        return [parse_history_item(item) for item in self._query_all(self._history_query())]

    def events(self) -> list[dict[str, Any]]:
        """Every EVENT item (deserialised), oldest first."""
        return self._query_all(
            {
                "TableName": self.table_name,
                "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
                "ExpressionAttributeNames": {"#pk": TABLE_PARTITION_KEY, "#sk": TABLE_SORT_KEY},
                "ExpressionAttributeValues": serialize(
                    {":pk": CONTROL_PK, ":prefix": EVENT_SK_PREFIX}
                ),
                "ConsistentRead": True,
            }
        )

    # ---- writes --------------------------------------------------------------------------

    def compare_and_set(self, expected_version: int, transition: Transition) -> bool:
        """Write a transition onto the STATE item if it is still at expected_version (0: no
        item yet). Only transition attributes change: lease, throttle, pause and the last
        backfill are left as they are. False when the condition failed."""
        attributes = transition_attributes(transition)
        condition = NO_STATE_YET if expected_version == 0 else STILL_THE_VERSION_READ
        values = {} if expected_version == 0 else {":expectedVersion": expected_version}
        written = self.update(
            set_values={
                ENTITY_TYPE: ENTITY_STATE,
                **{k: v for k, v in attributes.items() if v is not None},
            },
            remove=[k for k, v in attributes.items() if v is None],
            condition=condition,
            values=values,
        )
        return written is not None

    def update(
        self,
        *,
        set_values: Mapping[str, Any],
        remove: Sequence[str] = (),
        condition: str,
        values: Mapping[str, Any] | None = None,
    ) -> ControlState | None:
        """One conditional UpdateItem of the STATE item; the state it left, or None when the
        condition failed. `condition` spells attributes "#name" and values ":name"."""
        names: dict[str, str] = {}
        wire_values: dict[str, Any] = {}
        clauses: list[str] = []
        for n, (attribute, value) in enumerate(set_values.items()):
            names[f"#{attribute}"] = attribute
            wire_values[f":v{n}"] = wire_value(value)
            clauses.append(f"#{attribute} = :v{n}")
        actions = [f"SET {', '.join(clauses)}"] if clauses else []
        if remove:
            names.update({f"#{attribute}": attribute for attribute in remove})
            actions.append("REMOVE " + ", ".join(f"#{attribute}" for attribute in remove))
        if not actions:
            raise ValueError("an update must set or remove at least one attribute")
        names.update({f"#{a}": a for a in _PLACEHOLDER.findall(condition)})
        wire_values.update({k: wire_value(v) for k, v in (values or {}).items()})
        optional: dict[str, Any] = (
            {"ExpressionAttributeValues": serialize(wire_values)} if wire_values else {}
        )
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key=serialize(state_key()),
                UpdateExpression=" ".join(actions),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ReturnValues="ALL_NEW",
                **optional,
            )
        except ClientError as err:
            if is_condition_failed(err):
                return None
            raise
        return parse_state_item(deserialize(response["Attributes"]))

    def put_history(self, transition: Transition) -> bool:
        """Write the HISTORY item of a transition unless it exists; True when written now."""
        return self._put_once(history_item(transition))

    def put_event(self, event: ControlEvent) -> bool:
        return self._put_once(event_item(event))

    def restore(self, state: ControlState) -> bool:
        """Write a whole STATE item where none exists; False when one does."""
        return self._put_once(state_item(state))

    # ---- internals -----------------------------------------------------------------------

    def _put_once(self, item: Mapping[str, Any]) -> bool:
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=serialize(item),
                ConditionExpression=NOT_WRITTEN_YET,
                ExpressionAttributeNames={f"#{TABLE_PARTITION_KEY}": TABLE_PARTITION_KEY},
            )
        except ClientError as err:
            if is_condition_failed(err):
                return False
            raise
        return True

    def _history_query(self) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": TABLE_PARTITION_KEY, "#sk": TABLE_SORT_KEY},
            "ExpressionAttributeValues": serialize(
                {":pk": CONTROL_PK, ":prefix": HISTORY_SK_PREFIX}
            ),
            "ConsistentRead": True,
        }

    def _query_all(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in query_pages(self.client, request):
            items.extend(deserialize(raw) for raw in page.get("Items", []))
        return items


def all_conditions(*fragments: str) -> str:
    """Fragments joined with AND, each parenthesised (a fragment may hold an OR)."""
    return all_of(*(f"({f})" for f in fragments))
