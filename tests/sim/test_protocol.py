"""The layout-change protocol under deterministic simulation (tests/sim): a fixed set of seeds
in `make test`; `make simulate SEEDS=N` runs more.

Each test prints the seed and the trace tail when it fails; `python -m tests.sim --seed S
--plan P --trace` replays a run step for step.

The checker is trusted because it is shown to catch the bugs it is for, on deliberately
broken variants of the real code:
- writers that switch to the target key the moment they read the new state (the rule before
  the two-step switch): a stale reader misses a freshly re-stamped saga (case 1);
- a backfill without its lease fence: a worker paused between its read and its write re-stamps
  a row onto a key no reader of the final state reads (case 2);
- a completing move judged the moment its backfill is verified, without the settled switch:
  a write keyed on the legacy key just before effectiveAt (a writer clock behind, a held
  request, both within the in-flight margin) lands after the move completed, on a key no reader
  of `sharded` reads (case 3). The world reaches the bounds for it: clocks off by the whole
  margin, held requests to what the margin leaves, and an operator that completes as early as
  the refusals allow;
- a STATE write given up on after refusals reported as "not yet" (nothing applied) without
  reading STATE back: with answers dropped (the write lands, its answer is lost, its resends
  throttled), the operator is told a move that landed was not applied (case 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from unittest import mock

import pytest

from saga_index.index import RetryLaterError
from saga_index.layout_change.record import Transition
from saga_index.layout_change.transitions import apply, executor
from tests.sim.harness import explain, first_violation, simulated_aws
from tests.sim.world import Scenario, simulate

pytestmark = pytest.mark.simulation

# Fixed seeds, one per plan: each clean run takes 10-30 s on this 2-core machine.
CLEAN_RUNS = [(2, "forward"), (1, "abort")]
# The adversary of case 2: abort while the forward run goes, and pause processes right before
# their writes (a paused service writer is held within the in-flight margin; a backfill
# worker is not: that is what its fence is for), long enough for the rollback to complete.
CASE_2 = Scenario(
    # The world this case was found in: clocks within 5 s, no held service write, an operator
    # that looks every 5 s and starts a run 1 s after effectiveAt.
    max_skew=5.0,
    hold_at_write=0.0,
    operator_poll=5.0,
    start_after_effective=1.0,
    plan="abort",
    pause=0.0,
    pause_at_write=0.2,
    pause_roles=("worker",),
    max_pause=600.0,
    drift_every=600.0,
    backfill_rate=0.5,
)


# Case 3's world: quiet (no storms, lost answers, pauses or crashes: they only slow the run
# down), a backfill fast enough that the completing move follows effectiveAt within seconds (the
# runbook on a small table), and half of the service writes held as long as the margin lets.
CASE_3 = Scenario(
    plan="forward",
    backfill_rate=100.0,
    storm=0.0,
    lost_answer=0.0,
    pause=0.0,
    crash=0.0,
    hold_at_write=0.5,
)


@pytest.fixture
def world() -> Iterator[None]:
    with simulated_aws():
        yield


@pytest.mark.parametrize(("seed", "plan"), CLEAN_RUNS)
def test_the_protocol_holds_under_faults(world: None, seed: int, plan: str) -> None:
    outcome = simulate(seed, Scenario(plan=plan))
    assert outcome.ok, explain(outcome)
    assert outcome.phases[-1].split("@")[0] == ("sharded" if plan == "forward" else "legacy")
    assert outcome.reads_checked > 50, "too few reads were checked for the run to mean much"


def _writers_switch_at_once(self: Transition, now: object) -> object:
    del now
    return self.write_layout


def test_it_finds_case_1_when_writers_switch_at_once() -> None:
    with mock.patch.object(Transition, "writes_at", _writers_switch_at_once):
        outcome = first_violation(Scenario(plan="forward"), range(1, 6), {"visibility"})
    assert outcome is not None, "writers switching at once went unnoticed in seeds 1-5"
    assert "as legacy" in str(outcome.violations[0]), explain(outcome)


# A paused worker must outlive its lease (TTL) and a whole verified rollback before it writes:
# two to eight minutes of this machine per seed, so `make simulate` runs it and `make test` does
# not (there, tests/component/test_backfill_fence.py keeps the same scenario's unfenced variant
# failing on moto and dynalite). The seed is pinned: since the lease's acquire reads fence slot 0
# and lost answers are read back, the interleavings of seeds 1-16 no longer park a worker long
# enough (each ran clean with the fence off). Seed 17 did, until later changes to the processes
# shifted the interleavings: now 17-19 run clean with the fence off, 20-23 each find the
# violation, and with the fence on 20 and 21 run clean. Seed 21 finds it in seconds. A change that
# shifts the interleavings may need a new seed: `python -m tests.sim` runs more, and this test's
# scenario is CASE_2 with fence "none".
CASE_2_SEED = 21


@pytest.mark.simulation_long
def test_it_finds_case_2_when_the_backfill_is_not_fenced() -> None:
    outcome = first_violation(
        Scenario(**{**CASE_2.__dict__, "fence": "none"}),
        range(CASE_2_SEED, CASE_2_SEED + 1),
        {"unread-key"},
    )
    assert outcome is not None, f"an unfenced paused worker went unnoticed in seed {CASE_2_SEED}"
    assert "legacy" in str(outcome.violations[0]), explain(outcome)


def _completes_at_once(*_: object) -> None:
    """The rule before the settled switch: a completing move is judged at once."""


# Seed 1 of CASE_3 runs clean even with the completing move judged at once (a whole run, ~10 s
# of this machine, for nothing); seed 2 finds it. The search starts there and keeps one seed
# more in case a change shifts the interleavings; should neither find it, widen the range.
CASE_3_SEEDS = range(2, 4)


def test_it_finds_case_3_when_a_completing_move_does_not_wait_for_the_settled_switch() -> None:
    with mock.patch.object(executor, "_require_settled_switch", _completes_at_once):
        outcome = first_violation(CASE_3, CASE_3_SEEDS, {"unread-key", "visibility"})
    assert outcome is not None, "a move completed before the switch settled went unnoticed"
    assert "is on RenewalSaga, which state v2 (sharded) does not read" in str(
        outcome.violations[0]
    ), explain(outcome)


def test_case_3_holds_with_the_settled_switch(world: None) -> None:
    outcome = simulate(1, CASE_3)
    assert outcome.ok, explain(outcome)
    assert outcome.phases[-1].split("@")[0] == "sharded"
    assert any("not yet" in line for line in outcome.trace), "the refusal was never reached"


# Case 4's world: quiet but for dropped answers on the control STATE item (the write lands, its
# answer is lost, botocore's resend and every identical resend for 30 s are throttled): every
# phase set, lease acquire, heartbeat and release may meet one.
LOST_ANSWERS = Scenario(
    plan="forward",
    readers=1,
    writers=1,
    seeded_sagas=4,
    backfill_rate=100.0,
    storm=0.0,
    lost_answer=0.0,
    pause=0.0,
    crash=0.0,
    dropped_answer=0.5,
)


def _abandons_without_reading_back() -> object:
    """The rule before the read-back: a STATE write given up on after refusals (RetryLaterError)
    is reported as not applied, and its intent marked abandoned, without reading STATE."""
    original = apply._after_failed_write

    def after_failed_write(store: object, state: object, transition: object, err: Exception):  # type: ignore[no-untyped-def]
        if isinstance(err, RetryLaterError):
            apply._try(lambda: store.abandon_intent(transition))  # type: ignore[attr-defined]
            raise err
        return original(store, state, transition, err)  # type: ignore[arg-type]

    return mock.patch.object(apply, "_after_failed_write", after_failed_write)


def test_it_finds_case_4_when_a_lost_answer_is_reported_without_reading_back() -> None:
    with _abandons_without_reading_back():
        outcome = first_violation(LOST_ANSWERS, range(1, 4), {"report"})
    assert outcome is not None, "an applied move reported as not applied went unnoticed"
    assert "answered 'not yet'" in str(outcome.violations[0]), explain(outcome)
    assert "nothing was written" in str(outcome.violations[0]) or "not known here" in str(
        outcome.violations[0]
    )


def test_case_4_holds_when_lost_answers_are_read_back(world: None) -> None:
    # Seed 2: both moves (migrating, then sharded) meet a dropped answer on their STATE write.
    outcome = simulate(2, LOST_ANSWERS)
    assert outcome.ok, explain(outcome)
    assert outcome.phases[-1].split("@")[0] == "sharded"
    applied = [line for line in outcome.trace if "read back, the record holds version" in line]
    assert len(applied) == 2, "the dropped answers were not met by both moves"
