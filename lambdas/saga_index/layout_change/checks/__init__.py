"""The checks that judge a move: drift (what is wrong now), parity (reads against the base
table), repair (one anomaly row), watch (the index's throttle events)."""
