"""The schedules `python -m tests.sim` cycles through: each plan's default world, and the
backfill at production rate.

FORWARD_AT_1000 is the forward plan with the backfill at the production cap (1,000 writes/s)
in virtual time: 16 segments side by side sharing the run's bucket (one segment's fenced
re-stamps wait for each transaction's in-flight time, 10 ms, so only side by side do they reach
the cap), requests short enough (0.3 ms mean) for the world to carry them, 200 sagas so that
the run lasts a fifth of a second, and the service writers writing in a burst as it starts (a
sweep claiming its sagas: Scenario.writer_burst says why), their back-off on the virtual clock.
Its pinned seeds meet TransactionConflicts (tests/sim/test_production_rate.py). Its pages are
larger than the default worlds' (reads of 100 items, Scans of 25) and its quiet period shorter,
so that one seed costs about 10 s of CPU on this machine kind.
"""

from __future__ import annotations

from tests.sim.runbook import ALL_PLANS
from tests.sim.world import Scenario

FORWARD_AT_1000 = Scenario(
    plan="forward",
    schedule="forward-at-1000",
    backfill_rate=1000.0,
    segments=16,
    concurrent_segments=True,
    seeded_sagas=200,
    request_seconds=0.0002,
    request_floor=0.0001,
    readers=1,
    writers=2,
    writer_burst=40,
    virtual_backoff=True,
    read_page_size=100,
    scan_page_size=25,
    quiet_seconds=60.0,
)

SCHEDULES: dict[str, Scenario] = {
    **{plan: Scenario(plan=plan) for plan in sorted(ALL_PLANS)},
    FORWARD_AT_1000.schedule: FORWARD_AT_1000,
}
