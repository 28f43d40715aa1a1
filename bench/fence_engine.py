"""The fenced backfill at the production rate on the fast engine, beside the unfenced run, as
`make bench` runs it: `python -m bench.fence --engine` with its defaults (1,000 writes/s on 64
segments over 3,000 rows, time dilated to ENGINE_TIME_SCALE; bench/fence.py says what each
column means and what dilation does and does not show) and a verdict.

    python -m bench --only fence_engine
    python -m bench.fence_engine [--tiny]

Verdict: the product's per-segment fence holds at least STEADY_TARGET of its cap in the steady
state (re-stamps per engine second while the run moved from 10 % to 90 % of its rows; the
arming of the lease and the fence slots is reported apart), every row moved and the lease held.
The unfenced run beside it is the comparison, not judged.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from bench import fence
from bench.output import save

NAME = "fence_engine"
# The scale `make test` runs it at (tests/component/test_benches.py): the engine's tiny runs.
TINY: dict[str, Any] = dict(fence.ENGINE_TINY)
STEADY_TARGET = 0.95
JUDGED = "per-segment"


def verdict(result: dict[str, Any]) -> bool:
    """Whether every run of the judged fence held STEADY_TARGET of its cap in the steady state,
    moved every row and kept its lease."""
    judged = [r for r in result["runs"] if r["fence"] == JUDGED]
    return bool(judged) and all(
        (r.get("steady_over_cap") or 0.0) >= STEADY_TARGET
        and r["restamped"] == r["rows"]
        and r["lease_lost"] is None
        for r in judged
    )


def run(**kwargs: Any) -> dict[str, Any]:
    """bench.fence's engine runs (its run's arguments; its engine defaults), judged."""
    result = fence.run(
        **{
            "segments": fence.ENGINE_SEGMENTS,
            "caps": fence.ENGINE_CAPS,
            "max_rows": fence.ENGINE_MAX_ROWS,
            **kwargs,
            "on_engine": True,
        }
    )
    result["steady_target"] = STEADY_TARGET
    result["ok"] = verdict(result)
    return result


def render(result: dict[str, Any]) -> None:
    fence.render(result)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fence_engine", description=__doc__)
    parser.add_argument("--tiny", action="store_true", help="TINY: seconds, verdict meaningless")
    args = parser.parse_args(argv)
    result = run(**(TINY if args.tiny else {}))
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
