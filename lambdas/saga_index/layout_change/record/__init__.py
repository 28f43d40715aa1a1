"""The runtime migration state (docs/control-contract.md): one control item in the saga table
that every reader and writer follows, changed only through guarded transitions.

  phase     the operator's name for a state
  state     what one read of the record says, as values (pure)
  errors    the record's own errors (a reader's refusal, a lost compare-and-set), each naming
            what the operator can do next
  schema    the STATE and HISTORY attributes, declared once: what each holds, optional or not
            (attribute: the kinds of value and the table's shape)
  grammar   what a value of each kind is on the wire, one rule for every reader's language
  items     the STATE / HISTORY / EVENT items: their keys and attribute names
  times     the record's fixed-width UTC times
  encode    states, transitions, leases, completions and events as item attributes
  decode    items back into states and transitions, strictly
  history   HISTORY items applied, pending or abandoned, and the one a restore follows
  store     the items in DynamoDB: consistent reads, compare-and-set, history; and the
            operations a caller would otherwise assemble: `restore_point` (the history item a
            restore follows), `refuse_if_lost` (the lost-record rule for a state as read)
  lost      the lost-record rule's probe: a few shard keys read before "never migrated"
  timing    T and effectiveAt: how stale a view may be, and when a change reached everyone
  provider  the cached view every process reads (at most T seconds old)
  routing   pure: the write key, by-person read keys and enumeration keys of a state
  open_index  the sparse open-saga index's state: the record's second dimension
"""

from saga_index.layout_change.record.conditions import STATE_EXISTS, STILL_THE_VERSION_READ
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import (
    ControlEvent,
    completion_attributes,
    history_item,
    lease_attributes,
    present,
    state_item,
)
from saga_index.layout_change.record.errors import (
    ControlError,
    ControlItemInvalidError,
    ControlRecordInvalidError,
    ControlRecordMissingError,
    ControlRecordUnavailableError,
    VersionConflictError,
)
from saga_index.layout_change.record.grammar import deserialize_control_item, grammar_document
from saga_index.layout_change.record.history import (
    HISTORY_ABANDONED,
    HISTORY_APPLIED,
    HistoryEntry,
    followed_state,
    needs_lost_record_probe,
)
from saga_index.layout_change.record.items import (
    BACKFILL_MAX_WRITES_PER_SECOND,
    BACKFILL_PAUSED,
    ENTITY_FENCE,
    ENTITY_TYPE,
    EVENT,
    FENCE_ARMED_AT,
    FENCE_ARMED_BY,
    FENCE_EPOCH,
    FENCE_SLOTS,
    LEASE_ATTRIBUTES,
    LEASE_EPOCH,
    LEASE_EXPIRES_AT,
    LEASE_HEARTBEAT_AT,
    LEASE_PACE,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    STATE_VERSION,
    VERSION,
    fence_slot_key,
    state_key,
)
from saga_index.layout_change.record.open_index import OpenIndex, OpenIndexState
from saga_index.layout_change.record.phase import SINGLE_COUNT_PHASES, Phase, layouts_for_phase
from saga_index.layout_change.record.provider import ControlProvider, StateSource
from saga_index.layout_change.record.routing import Routing, resolve_routing, routing_for
from saga_index.layout_change.record.schema import (
    COMPLETION,
    CONTROLS,
    HISTORY_FLAGS,
    LEASE,
    PARTS,
    TRANSITION,
    Attribute,
    Part,
    Value,
    attributes_document,
)
from saga_index.layout_change.record.state import (
    BackfillCompletion,
    BackfillDirection,
    BackfillKind,
    ControlState,
    Lease,
    RecordCondition,
    Transition,
)
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time, parse_time, seconds_until, to_millis
from saga_index.layout_change.record.timing import DEFAULT_TIMING, ControlTiming, WallClock, utc_now

__all__ = [
    "BACKFILL_MAX_WRITES_PER_SECOND",
    "BACKFILL_PAUSED",
    "COMPLETION",
    "CONTROLS",
    "DEFAULT_TIMING",
    "ENTITY_FENCE",
    "ENTITY_TYPE",
    "EVENT",
    "FENCE_ARMED_AT",
    "FENCE_ARMED_BY",
    "FENCE_EPOCH",
    "FENCE_SLOTS",
    "HISTORY_ABANDONED",
    "HISTORY_APPLIED",
    "HISTORY_FLAGS",
    "LEASE",
    "LEASE_ATTRIBUTES",
    "LEASE_EPOCH",
    "LEASE_EXPIRES_AT",
    "LEASE_HEARTBEAT_AT",
    "LEASE_PACE",
    "LEASE_STATE_VERSION",
    "LEASE_TOKEN",
    "PARTS",
    "SINGLE_COUNT_PHASES",
    "STATE_EXISTS",
    "STATE_VERSION",
    "STILL_THE_VERSION_READ",
    "TRANSITION",
    "VERSION",
    "Attribute",
    "BackfillCompletion",
    "BackfillDirection",
    "BackfillKind",
    "ControlError",
    "ControlEvent",
    "ControlItemInvalidError",
    "ControlProvider",
    "ControlRecordInvalidError",
    "ControlRecordMissingError",
    "ControlRecordUnavailableError",
    "ControlState",
    "ControlStore",
    "ControlTiming",
    "HistoryEntry",
    "Lease",
    "OpenIndex",
    "OpenIndexState",
    "Part",
    "Phase",
    "RecordCondition",
    "Routing",
    "StateSource",
    "Transition",
    "Value",
    "VersionConflictError",
    "WallClock",
    "attributes_document",
    "completion_attributes",
    "deserialize_control_item",
    "fence_slot_key",
    "followed_state",
    "format_time",
    "grammar_document",
    "history_item",
    "layouts_for_phase",
    "lease_attributes",
    "needs_lost_record_probe",
    "parse_history_item",
    "parse_state_item",
    "parse_time",
    "present",
    "resolve_routing",
    "routing_for",
    "seconds_until",
    "state_item",
    "state_key",
    "to_millis",
    "utc_now",
]
