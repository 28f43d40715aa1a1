"""The backfill lease (docs/control-contract.md, "The backfill lease"): one run at a time, held
in the STATE item, with the run-time throttle and pause flag the holder follows.

  grant     the lease's conditional writes: acquire, heartbeat, release (with the completion)
  controls  the operator's throttle, pause and resume of the running backfill
  events    the EVENT item each of those writes leaves behind (an audit trail)
  keeper    a run under its lease: taken, heartbeated (applying the throttle and pause),
            released with the run's completion

None of these writes bump `version`: a heartbeat must never make a racing `phase set` lose its
compare-and-set.
"""
