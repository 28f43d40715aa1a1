"""The open-saga index's move under deterministic simulation (tests/sim): `open-index set adding`,
the open-index backfill, `open-index set open`, and the rollback before the end (`removing`
while the stamping run goes, the removing backfill, `off`), through the real operations the CLI
runs, with readers enumerating open sagas (over GSI4, then over the open index) among sagas
opening and closing, under the world's interleavings, index lag and faults.

The checker counts because it is shown to catch the bugs it is for, on known-bad variants:
- reads switched to the open index before the backfill is verified (`open` forced, without its
  parity check, as soon as the settled switch allows, the backfill not waited for): an
  enumeration of open sagas from the open index misses an open saga the backfill has not
  stamped yet;
- a writer that forgets to remove OpenSagaPK when it closes a saga: a closed saga stays in the
  open index (the reads' open-state filter hides it from the sweeps; the invariant that a close
  removes the key does not).

`python -m tests.sim --seed S --plan open --trace` replays a run step for step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from saga_index.layout_change.record import ControlTiming
from tests.sim.harness import explain, first_violation, simulated_aws
from tests.sim.world import Scenario, simulate

pytestmark = pytest.mark.simulation

# A small world (two readers, two writers, six older sagas, a shorter quiet period) with the
# default faults, on for a minute after the last move: each clean run stays under about 20 s
# on a quiet machine.
OPEN_WORLD = Scenario(plan="open", readers=2, writers=2, seeded_sagas=6, quiet_seconds=30.0)
# The rollback has two moves to wait out: its clean run keeps the same shape on a third of the
# default bounds (T 10 s, grace 10 s, margin 5 s: the contract's bounds are parameters, and
# clocks and held writes reach the smaller margin as they reach the default one), and a slow
# stamping run, so that `removing` lands while it goes.
ROLLBACK_WORLD = replace(OPEN_WORLD, plan="open-abort", backfill_rate=0.5, open_linger_seconds=20.0)
SHORT_BOUNDS = ControlTiming(
    cache_seconds=10.0, stale_grace_seconds=10.0, in_flight_margin_seconds=5.0
)
FORCED_EARLY = replace(OPEN_WORLD, open_completion="forced")
KEEPS_KEY_ON_CLOSE = replace(OPEN_WORLD, close_removes_open_key=False)


@pytest.fixture
def world() -> Iterator[None]:
    with simulated_aws():
        yield


def test_the_open_index_move_holds_under_faults(world: None) -> None:
    outcome = simulate(1, OPEN_WORLD)
    assert outcome.ok, explain(outcome)
    assert outcome.phases[-1].split("@")[0] == "open index open"
    assert any("open index run released" in line for line in outcome.trace), explain(outcome)
    assert outcome.open_index_reads > 5, "too few enumerations read the open index"
    assert outcome.reads_checked > 50, "too few reads were checked for the run to mean much"


def test_the_open_index_rollback_holds_under_faults(world: None) -> None:
    outcome = simulate(1, ROLLBACK_WORLD, timing=SHORT_BOUNDS)
    assert outcome.ok, explain(outcome)
    phases = [p.split("@")[0] for p in outcome.phases]
    assert phases[1:] == ["open index adding", "open index removing", "open index off"]
    assert any("stamper" in line and "run stopped" in line for line in outcome.trace), (
        "`removing` did not land while the stamping run went"
    )
    assert outcome.open_index_reads == 0, "readers read the open index it never opened"


def test_it_finds_reads_switched_to_the_open_index_before_the_backfill_is_verified() -> None:
    outcome = first_violation(FORCED_EARLY, range(1, 4), {"visibility"})
    assert outcome is not None, "open sagas missed by reads of an unfilled open index went unseen"
    first = str(outcome.violations[0])
    assert "from open index" in first, explain(outcome)
    assert "missed" in first


def test_it_finds_a_writer_that_keeps_the_open_key_when_it_closes_a_saga() -> None:
    outcome = first_violation(KEEPS_KEY_ON_CLOSE, range(1, 4), {"open-key"})
    assert outcome is not None, "a closed saga left in the open index went unnoticed"
    assert "a closed saga stays in the open index" in str(outcome.violations[0]), explain(outcome)


# More seeds of both plans in the default world (three readers, eight older sagas): a few
# minutes, so `make simulate` runs them and `make test` does not.
@pytest.mark.simulation_long
@pytest.mark.parametrize("plan", ["open", "open-abort"])
@pytest.mark.parametrize("seed", range(2, 6))
def test_more_seeds_of_the_open_index_plans_hold(world: None, plan: str, seed: int) -> None:
    outcome = simulate(seed, Scenario(plan=plan))
    assert outcome.ok, explain(outcome)
    final = "open index open" if plan == "open" else "open index off"
    assert outcome.phases[-1].split("@")[0] == final
