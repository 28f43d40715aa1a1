"""The runtime migration state (docs/control-contract.md): one control item in the saga table
that every reader and writer follows, changed only through guarded transitions.

  phase     the operator's name for a state
  state     what one read of the record says, as values (pure)
  errors    the record's own errors (a reader's refusal, a lost compare-and-set), each naming
            what the operator can do next
  schema    the STATE and HISTORY attributes, declared once: what each holds, optional or not
  grammar   what a value of each kind is on the wire, one rule for every reader's language
  items     the STATE / HISTORY / EVENT items: their keys and attribute names
  times     the record's fixed-width UTC times
  encode    states, transitions, leases, completions and events as item attributes
  decode    items back into states and transitions, strictly
  store     the items in DynamoDB: consistent reads, compare-and-set, history
  timing    T and effectiveAt: how stale a view may be, and when a change reached everyone
  provider  the cached view every process reads (at most T seconds old)
  routing   pure: the write key, by-person read keys and enumeration keys of a state
"""

from saga_index.layout_change.record import items
from saga_index.layout_change.record.decode import parse_history_item, parse_state_item
from saga_index.layout_change.record.encode import history_item, state_item
from saga_index.layout_change.record.errors import (
    ControlItemInvalidError,
    ControlRecordInvalidError,
    ControlRecordMissingError,
    ControlRecordUnavailableError,
)
from saga_index.layout_change.record.grammar import deserialize_control_item, grammar_document
from saga_index.layout_change.record.history import (
    HISTORY_ABANDONED,
    HISTORY_APPLIED,
    HistoryEntry,
    followed_state,
    needs_lost_record_probe,
    restore_point,
)
from saga_index.layout_change.record.items import (
    LEASE_EXPIRES_AT,
    LEASE_STATE_VERSION,
    LEASE_TOKEN,
    VERSION,
    state_key,
)
from saga_index.layout_change.record.phase import SINGLE_COUNT_PHASES, Phase, layouts_for_phase
from saga_index.layout_change.record.provider import ControlProvider
from saga_index.layout_change.record.routing import Routing, routing_for
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
    ControlState,
    Lease,
    RecordCondition,
    Transition,
)
from saga_index.layout_change.record.store import ControlStore
from saga_index.layout_change.record.times import format_time, seconds_until
from saga_index.layout_change.record.timing import DEFAULT_TIMING, ControlTiming, WallClock, utc_now

__all__ = [
    "COMPLETION",
    "CONTROLS",
    "DEFAULT_TIMING",
    "HISTORY_ABANDONED",
    "HISTORY_APPLIED",
    "HISTORY_FLAGS",
    "LEASE",
    "LEASE_EXPIRES_AT",
    "LEASE_STATE_VERSION",
    "LEASE_TOKEN",
    "PARTS",
    "SINGLE_COUNT_PHASES",
    "TRANSITION",
    "VERSION",
    "Attribute",
    "BackfillCompletion",
    "BackfillDirection",
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
    "Part",
    "Phase",
    "RecordCondition",
    "Routing",
    "Transition",
    "Value",
    "WallClock",
    "attributes_document",
    "deserialize_control_item",
    "followed_state",
    "format_time",
    "grammar_document",
    "history_item",
    "items",
    "layouts_for_phase",
    "needs_lost_record_probe",
    "parse_history_item",
    "parse_state_item",
    "restore_point",
    "routing_for",
    "seconds_until",
    "state_item",
    "state_key",
    "utc_now",
]
