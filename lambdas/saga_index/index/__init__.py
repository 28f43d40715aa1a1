"""The permanent key scheme of the renewal-saga index: what every service needs forever.

  names    every name more than one layer spells (no dependencies: infra imports it)
  errors   the domain errors
  shard    the shard contract: SHA-256(personId)[0:4] mod N
  keys     every key string of a saga row, built and parsed
  layout   a layout: where a row's GSI4PK points (legacy, or sharded(N))
  model    saga states

Nothing here knows that layouts change: that is saga_index.layout_change.
"""
