"""The runtime migration state (docs/control-contract.md): one control item in the saga table
that every reader and writer follows, changed only through guarded transitions.

  layout       the two layouts a state is made of, and the phase a state is named by
  routing      pure: the write key, by-person read keys and enumeration keys of a state
  record       the STATE / HISTORY / EVENT items: keys, attributes, times, and their codec
  transitions  pure: the allowed phase moves and what each requires
  store        the items in DynamoDB: consistent reads, compare-and-set, history
  executor     `phase set` against the store: checks, compare-and-set, history, repair
  provider     the cached view every process reads (at most T seconds old)
  lease        the backfill's run lock, throttle and pause flag
"""
