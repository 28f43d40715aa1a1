"""The runtime migration state (docs/control-contract.md): one control item in the saga table
that every reader and writer follows, changed only through guarded transitions.

  phase     the operator's name for a state
  state     what one read of the record says, as values (pure)
  errors    the record's errors, each naming what the operator can do next
  schema    the STATE and HISTORY attributes, declared once: what each holds, optional or not
  items     the STATE / HISTORY / EVENT items: their keys and attribute names
  times     the record's fixed-width UTC times
  encode    states, transitions, leases, completions and events as item attributes
  decode    items back into states and transitions, strictly
  store     the items in DynamoDB: consistent reads, compare-and-set, history
  timing    T and effectiveAt: how stale a view may be, and when a change reached everyone
  provider  the cached view every process reads (at most T seconds old)
  routing   pure: the write key, by-person read keys and enumeration keys of a state
"""
