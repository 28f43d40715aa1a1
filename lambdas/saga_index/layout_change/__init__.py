"""The machinery a layout change needs (legacy <-> sharded(N), sharded(N) <-> sharded(2N)).

  backfill     moving rows from the source layout's keys to the target's, under the lease
  lease        the backfill's run lock, throttle and pause flag
  transitions  the allowed moves, their checks and the executor of `phase set`
  checks       what judges a move: drift, parity, repair, watch
  record       the control record: its items, store, cached provider and routing (the key plan)

It imports the permanent index (saga_index.index, saga_index.store); nothing there imports it.
The rooms import one way, top down in the order above: a room imports only those below it
(pyproject.toml's import contracts). Each room's __init__ is its front; this package
re-exports nothing of its own.
"""

__all__: list[str] = []
