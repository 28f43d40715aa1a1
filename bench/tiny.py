"""The tiny scale: a dataset and a traffic mix small enough that every benchmark runs in seconds.

Each benchmark's TINY (keyword arguments of its `run`) uses them, and
tests/component/test_benches.py runs every benchmark at that scale on the test session's server:
a benchmark broken by a change to the product fails the tests, not the next `make bench`. The
figures at this scale mean nothing; the paths they take are the full run's.
"""

from __future__ import annotations

from devkit.seed import SeedSpec
from devkit.traffic.mix import TrafficMix

# 24 open sagas among 60 persons and as many terminal ones: every shard of 16 holds some rows.
TINY_SPEC = SeedSpec(open_sagas=24, terminal_sagas=24, persons=60, property_managers=2)
TINY_MIX = TrafficMix(transitions_per_s=0.5, cohort_size=4, inbound_messages_per_s=0.5)
