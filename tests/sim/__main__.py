"""`python -m tests.sim --seeds N [--start S] [--plan P]`: run more seeds (`make simulate`).
Exit 1 on the first violation, printing its seed and trace."""

from __future__ import annotations

import argparse
import sys
import time

from tests.sim.harness import simulated_aws
from tests.sim.runbook import ALL_PLANS
from tests.sim.world import Scenario, simulate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.sim")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=1000, help="the first seed")
    parser.add_argument("--seed", type=int, help="run this one seed (a replay)")
    parser.add_argument(
        "--plan", choices=sorted(ALL_PLANS), help="one plan (default: each in turn)"
    )
    parser.add_argument("--trace", action="store_true", help="print the whole trace")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    seeds = (
        [args.seed] if args.seed is not None else list(range(args.start, args.start + args.seeds))
    )
    plans = [args.plan] if args.plan else sorted(ALL_PLANS)
    started = time.monotonic()
    for n, seed in enumerate(seeds):
        plan = plans[n % len(plans)]
        with simulated_aws():
            outcome = simulate(seed, Scenario(plan=plan))
        print(
            f"seed {seed} ({plan}): {'ok' if outcome.ok else 'VIOLATION'} "
            f"({outcome.steps} steps, {outcome.reads_checked} reads; "
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
