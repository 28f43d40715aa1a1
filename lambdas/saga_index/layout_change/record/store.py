"""The control items in DynamoDB: strongly consistent reads, compare-and-set, history, events.

Every write is a single-item conditional write (no transactions: dynalite has none). A
transition's HISTORY item is written FIRST, as an intent (`applied = false`), then the STATE
compare-and-set, then the intent is settled (`applied = true`): so no STATE ever exists without
its history, and a history item whose STATE write lost or failed is told apart from an applied
one (docs/control-contract.md, "Transitions").

Every write is sent again while DynamoDB refuses it for now (a conflict with an ongoing
transaction, a throttle: store.dynamo.retry, bounded back-off with jitter), then given up with
RetryLaterError naming the item: the heartbeat, the lease, the operator's controls and `phase
set` all write through here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from saga_index.index import (
    CONTROL_PK,
    INDEX_NAME,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
)
from saga_index.layout_change.record.conditions import (
    ITEMS_UNDER_PREFIX,
    MARK_ABANDONED,
    NO_STATE_YET,
    NO_VERSION_STORED,
    NOT_WRITTEN_YET,
    STILL_THE_UNAPPLIED_INTENT_SEEN,
    STILL_THE_VERSION_READ,
    STILL_THE_VERSION_STORED,
)
from saga_index.layout_change.record.decode import parse_state_item
from saga_index.layout_change.record.encode import (
    ControlEvent,
    event_item,
    history_item,
    state_item,
    transition_attributes,
    wire_value,
)
from saga_index.layout_change.record.grammar import deserialize_control_item
from saga_index.layout_change.record.history import (
    HISTORY_APPLIED,
    NOT_SETTLED,
    HistoryEntry,
    followed_state,
    needs_lost_record_probe,
    parse_history_entry,
    restore_point,
)
from saga_index.layout_change.record.items import (
    ENTITY_STATE,
    ENTITY_TYPE,
    EVENT_SK_PREFIX,
    HISTORY_SK_PREFIX,
    STATE_SK,
    VERSION,
    history_key,
    state_key,
)
from saga_index.layout_change.record.lost import refuse_a_lost_record
from saga_index.layout_change.record.state import ControlState, Transition
from saga_index.store.dynamo import (
    DEFAULT_POLICY,
    Expression,
    RetryPolicy,
    attribute_fragment,
    attribute_list,
    is_condition_failed,
    query_pages,
    request_expressions,
    retry_transient,
    serialize,
    update,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class ControlStore:
    """The control items of one table. The client is injected (thread-safe). `retry`: how a
    write refused for now is sent again (store.dynamo.retry)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        index_name: str = INDEX_NAME,
        refuse_lost: bool = False,
        retry: RetryPolicy = DEFAULT_POLICY,
    ) -> None:
        """`refuse_lost`: a store that readers and writers route by. Its `read` of a control
        partition that holds nothing probes a few shard keys and raises ControlRecordLostError
        when rows sit there (`refuse_if_lost`), where a plain read (the drift guard's,
        `phase set`'s own guard, `phase restore`) says never migrated and judges the rows."""
        if not table_name:
            raise ValueError("table_name is required")
        self.client = client
        self.table_name = table_name
        self.index_name = index_name
        self.refuse_lost = refuse_lost
        self.retry = retry

    # ---- reads ---------------------------------------------------------------------------

    def read(self) -> ControlState:
        """The state as the contract defines it: the STATE item; else, when history exists, a
        MISSING state built from the history item `restore_point` picks; else never migrated
        (legacy, v0), unless `refuse_lost` and rows on shard keys say the record was lost
        (ControlRecordLostError).

        Client errors propagate; a malformed item raises ControlRecordInvalidError.
        """
        raw = self.read_raw_state()
        if raw is not None:
            return parse_state_item(raw)
        history = self.newest_history_items(2)
        state = followed_state(None, history)
        if self.refuse_lost:
            self.refuse_if_lost(state, history)
        return state

    def refuse_if_lost(
        self, state: ControlState, newest_history: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        """Raise ControlRecordLostError when `state` is a record lost after a move (lost.py):
        there is no STATE item, what it follows reads only the legacy key, and rows sit on
        shard keys. `newest_history`: the newest HISTORY items as stored, newest first, when
        the caller has read them (else the newest is read here). Nothing for any other state."""
        if needs_lost_record_probe(state):
            history = self.newest_history_items(1) if newest_history is None else newest_history
            version = _newest_version(history) if history else 0
            refuse_a_lost_record(
                self.client, self.table_name, self.index_name, history_version=version
            )

    def read_raw_state(self) -> dict[str, Any] | None:
        """The STATE item as stored (deserialised, not parsed), or None when there is none."""
        response = self.client.get_item(
            TableName=self.table_name, Key=serialize(state_key()), ConsistentRead=True
        )
        raw = response.get("Item")
        return deserialize_control_item(raw) if raw else None

    def restore_point(self) -> HistoryEntry | None:
        """The HISTORY item a missing STATE is rebuilt from (history.restore_point: of the
        newest two), or None when there is no history to follow."""
        return restore_point(self.newest_history(2))

    def newest_history(self, limit: int = 1) -> list[HistoryEntry]:
        """The newest `limit` HISTORY items, newest first (one consistent Query)."""
        return [parse_history_entry(item) for item in self.newest_history_items(limit)]

    def newest_history_items(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` HISTORY items as stored (deserialised), newest first."""
        response = self.client.query(**self._history_query(), ScanIndexForward=False, Limit=limit)
        return [deserialize_control_item(raw) for raw in response.get("Items", [])]

    def history_entry(self, version: int) -> HistoryEntry | None:
        response = self.client.get_item(
            TableName=self.table_name, Key=serialize(history_key(version)), ConsistentRead=True
        )
        raw = response.get("Item")
        return parse_history_entry(deserialize_control_item(raw)) if raw else None

    def history_entries(self) -> list[HistoryEntry]:
        """Every HISTORY item with its applied flag, oldest first."""
        return [parse_history_entry(item) for item in self._query_all(self._history_query())]

    def history(self) -> list[Transition]:
        """Every HISTORY item's transition, oldest first (intents included: history_entries
        tells them apart)."""
        return [entry.transition for entry in self.history_entries()]

    def events(self) -> list[dict[str, Any]]:
        """Every EVENT item (deserialised), oldest first."""
        return self._query_all(
            {
                "TableName": self.table_name,
                **request_expressions(key_condition=_control_items(EVENT_SK_PREFIX)),
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
        condition: Expression,
        values: Mapping[str, Any] | None = None,
    ) -> ControlState | None:
        """One conditional UpdateItem of the STATE item; the state it left, or None when the
        condition failed. `values`: the condition's, by slot, as Python values."""
        sets = [
            attribute_fragment(f"#{attribute} = :v{n}", attribute, slots=(f":v{n}",)).given(
                serialize({f":v{n}": wire_value(value)})
            )
            for n, (attribute, value) in enumerate(set_values.items())
        ]
        removed = {f"#{attribute}": attribute for attribute in remove}
        removes = [attribute_list(removed)] if removed else []
        change = update(set_=sets, remove=removes)
        request = {
            "TableName": self.table_name,
            "Key": serialize(state_key()),
            **request_expressions(update=change, condition=_given(condition, values or {})),
            "ReturnValues": "ALL_NEW",
        }
        response = self._conditional(self.client.update_item, request, _STATE_ITEM)
        if response is None:
            return None
        return parse_state_item(deserialize_control_item(response["Attributes"]))

    def put_intent(self, transition: Transition) -> bool:
        """Write the HISTORY item of a transition about to be tried, as an intent
        (`applied = false`), unless an item of its version exists; True when written now."""
        return self._put_once({**history_item(transition), HISTORY_APPLIED: False})

    def take_over_intent(self, seen: HistoryEntry, transition: Transition) -> bool:
        """Replace an intent nobody confirmed with this transition's. Only the exact item seen
        is replaced (its changedAt and changedBy), and only while it is still unapplied; False
        when it changed or was settled meanwhile."""
        if seen.version != transition.version:
            raise ValueError("an intent is taken over by a transition of its own version")
        return self._put(
            {**history_item(transition), HISTORY_APPLIED: False},
            condition=STILL_THE_UNAPPLIED_INTENT_SEEN,
            values={
                ":notApplied": False,
                ":seenAt": history_item(seen.transition)["changedAt"],
                ":seenBy": seen.transition.changed_by,
            },
        )

    def settle_history(self, transition: Transition) -> bool:
        """Make the HISTORY item of the version a STATE item holds say what it holds, applied:
        write it when missing, replace an intent (ours or another's) that is not yet applied.
        Call only with a transition read from STATE. True when written now; False when the
        item was already applied."""
        return self._put(
            {**history_item(transition), HISTORY_APPLIED: True},
            condition=NOT_SETTLED,
            values={},
        )

    def abandon_intent(self, transition: Transition) -> bool:
        """Mark this transition's own unconfirmed intent abandoned (its STATE write failed and
        STATE still holds the version before); False when the slot holds something else."""
        history = history_item(transition)
        request = {
            "TableName": self.table_name,
            "Key": serialize(history_key(transition.version)),
            **request_expressions(
                update=update(set_=[MARK_ABANDONED.given(serialize({":yes": True}))]),
                condition=_given(
                    STILL_THE_UNAPPLIED_INTENT_SEEN,
                    {
                        ":notApplied": False,
                        ":seenAt": history["changedAt"],
                        ":seenBy": transition.changed_by,
                    },
                ),
            ),
        }
        written = self._conditional(self.client.update_item, request, _item_named(request["Key"]))
        return written is not None

    def put_history(self, transition: Transition) -> bool:
        """Write the HISTORY item of a transition as applied unless one exists; True when
        written now (a record restored with no history left writes its first item this way)."""
        return self._put_once({**history_item(transition), HISTORY_APPLIED: True})

    def put_event(self, event: ControlEvent) -> bool:
        return self._put_once(event_item(event))

    def restore(self, state: ControlState) -> bool:
        """Write a whole STATE item where none exists; False when one does."""
        return self._put_once(state_item(state))

    def replace_unreadable_state(self, state: ControlState, raw: Mapping[str, Any]) -> bool:
        """Overwrite a STATE item that does not parse with a whole one, only while it is still
        the item read (`raw`: its stored version, or no version at all); False when it changed."""
        stored = raw.get(VERSION)
        if stored is None:
            return self._put(state_item(state), condition=NO_VERSION_STORED, values={})
        return self._put(
            state_item(state),
            condition=STILL_THE_VERSION_STORED,
            values={":storedVersion": stored},
        )

    # ---- internals -----------------------------------------------------------------------

    def _put_once(self, item: Mapping[str, Any]) -> bool:
        return self._put(item, condition=NOT_WRITTEN_YET, values={})

    def _put(
        self, item: Mapping[str, Any], *, condition: Expression, values: Mapping[str, Any]
    ) -> bool:
        """One conditional PutItem; False when the condition failed. `values`: the
        condition's, by slot, as Python values."""
        request = {
            "TableName": self.table_name,
            "Item": serialize(item),
            **request_expressions(condition=_given(condition, values)),
        }
        written = self._conditional(self.client.put_item, request, _item_named(request["Item"]))
        return written is not None

    def _conditional(self, send: Any, request: Mapping[str, Any], what: str) -> Any:
        """One conditional write, sent again while DynamoDB refuses it for now
        (store.dynamo.retry): its response, or None when its condition failed. `what` names the
        item when the retries give up (RetryLaterError)."""
        try:
            return retry_transient(lambda: send(**request), what=what, policy=self.retry)
        except ClientError as err:
            if is_condition_failed(err):
                return None
            raise

    def _history_query(self) -> dict[str, Any]:
        return {
            "TableName": self.table_name,
            **request_expressions(key_condition=_control_items(HISTORY_SK_PREFIX)),
            "ConsistentRead": True,
        }

    def _query_all(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for page in query_pages(self.client, request):
            items.extend(deserialize_control_item(raw) for raw in page.get("Items", []))
        return items


_STATE_ITEM: Final = f"the control record's STATE item ({CONTROL_PK} / {STATE_SK})"


def _newest_version(history: Sequence[Mapping[str, Any]]) -> int:
    """The version of the newest of `history` (HISTORY items as stored, newest first)."""
    return parse_history_entry(history[0]).version


def _item_named(key: Mapping[str, Any]) -> str:
    """A control item by its key, as a give-up message names it."""
    return f"the control item {key[TABLE_PARTITION_KEY]['S']} / {key[TABLE_SORT_KEY]['S']}"


def _given(condition: Expression, values: Mapping[str, Any]) -> Expression:
    """`condition` with `values` (Python values, by slot) for its slots."""
    return condition.given(serialize({k: wire_value(v) for k, v in values.items()}))


def _control_items(prefix: str) -> Expression:
    """The control partition's items whose sort key starts with `prefix`."""
    return ITEMS_UNDER_PREFIX.given(serialize({":pk": CONTROL_PK, ":prefix": prefix}))
