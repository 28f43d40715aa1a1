"""The machinery a layout change needs (legacy <-> sharded(N), sharded(N) <-> sharded(2N)).

  record       the control record: its items, store, cached provider and routing (the key plan)
  transitions  the allowed moves, their checks and the executor of `phase set`
  lease        the backfill's run lock, throttle and pause flag
  backfill     moving rows from the source layout's keys to the target's
  checks       what judges a move: drift, parity, repair, watch

It imports the permanent index (saga_index.index, saga_index.store); nothing there imports it.
"""
