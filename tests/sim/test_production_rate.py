"""The protocol with the backfill at production rate (tests/sim/schedules.py FORWARD_AT_1000):
1,000 writes/s on 16 segments side by side, in virtual time, while the service writers write
in a burst. The pinned seed must hold the protocol AND meet what only that rate brings: the
run at its cap, and a writer's write refused by a re-stamp in flight (TransactionConflict),
which the writer sends again. `python -m tests.sim --schedule forward-at-1000 --seeds N` runs
more seeds of it (of seeds 1-6, 1, 2, 3 and 6 met a conflict; none met a per-key throttle:
200 rows of under 1 KB spend at most 200 of the legacy key's 1,000 WCU a second).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.sim.harness import explain, simulated_aws
from tests.sim.outcome import Outcome
from tests.sim.schedules import FORWARD_AT_1000
from tests.sim.world import simulate

pytestmark = pytest.mark.simulation

# About 10 s of CPU on this 2-core machine kind; seed 2 meets a conflict too.
SEED = 1
RESTAMP = re.compile(r"^\s*(\d+\.\d+)\s+worker\d+\.segment\d+\s+TransactWriteItems\b")


@pytest.fixture
def world() -> Iterator[None]:
    with simulated_aws():
        yield


def restamps_sent(outcome: Outcome) -> list[float]:
    """The virtual times the run's segments sent a re-stamp (each after a token)."""
    return [float(m.group(1)) for line in outcome.trace if (m := RESTAMP.match(line))]


def busiest(times: list[float], window: float) -> int:
    """The most of `times` within any `window` seconds."""
    first, most = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_the_protocol_holds_with_the_backfill_at_production_rate(world: None) -> None:
    outcome = simulate(SEED, FORWARD_AT_1000)
    assert outcome.ok, explain(outcome)
    assert outcome.phases[-1].split("@")[0] == "sharded"
    sent = restamps_sent(outcome)
    # At its cap: a tenth of a second holds ~100 re-stamps, never more than the bucket's
    # 100 plus its 50 ms of banked tokens.
    assert 80 <= busiest(sent, 0.1) <= 150, busiest(sent, 0.1)
    # A writer's transition met a re-stamp in flight, and the world went on to a clean end.
    assert outcome.semantics.conflicts["UpdateItem"] >= 1, outcome.semantics
