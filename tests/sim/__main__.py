"""`python -m tests.sim --seeds N [--start S] [--plan P | --schedule S]`: run more seeds (`make
simulate`), each seed under the next schedule in turn (each plan's default world, then the
backfill at production rate: tests/sim/schedules.py). Exit 1 on the first violation, printing
its seed and trace."""

from __future__ import annotations

import argparse
import sys
import time

from tests.sim.harness import simulated_aws
from tests.sim.runbook import ALL_PLANS
from tests.sim.schedules import SCHEDULES
from tests.sim.world import Scenario, simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=1000, help="the first seed")
    parser.add_argument("--seed", type=int, help="run this one seed (a replay)")
    parser.add_argument(
        "--plan", choices=sorted(ALL_PLANS), help="one plan (default: each in turn)"
    )
    parser.add_argument(
        "--schedule",
        choices=sorted(SCHEDULES),
        help="one schedule (default: each in turn; a plan's name is its default world)",
    )
    parser.add_argument("--trace", action="store_true", help="print the whole trace")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    seeds = (
        [args.seed] if args.seed is not None else list(range(args.start, args.start + args.seeds))
    )
    if args.plan and args.schedule:
        parser.error("--plan and --schedule name the world twice: give one")
    if args.plan:
        worlds = [Scenario(plan=args.plan)]
    elif args.schedule:
        worlds = [SCHEDULES[args.schedule]]
    else:
        worlds = list(SCHEDULES.values())
    started = time.monotonic()
    for n, seed in enumerate(seeds):
        scenario = worlds[n % len(worlds)]
        with simulated_aws():
            outcome = simulate(seed, scenario)
        print(
            f"seed {seed} ({scenario.schedule or scenario.plan}): "
            f"{'ok' if outcome.ok else 'VIOLATION'} "
            f"({outcome.steps} steps, {outcome.reads_checked} reads, "
            f"{outcome.conflicts} conflicts, {outcome.key_throttles} key throttles; "
            f"{' -> '.join(outcome.phases)})",
            flush=True,
        )
        if args.trace:
            print("\n".join(outcome.trace))
        if not outcome.ok:
            print(outcome.report(), file=sys.stderr)
            return 1
    print(f"{len(seeds)} seed(s) clean in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
