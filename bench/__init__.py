"""Benchmarks: each prints a table of ratios measured side by side in one run, and writes its
raw numbers to results/bench/<NAME>.json. `python -m bench` runs them all (see __main__.py).

A benchmark is a module with:
    NAME: str                       the result file's name
    run() -> dict                   measure with the module's defaults; JSON-serialisable result
    render(result: dict) -> None    print the result's table on stdout
    TINY: dict                      run's keyword arguments for a run of seconds (the tests')
and optionally `"ok": bool` in its result, which the runner reports as the verdict. To add one,
add its module name to BENCHMARKS: nothing else changes.
"""

from __future__ import annotations

BENCHMARKS: tuple[str, ...] = ("bench.backfill_rate",)
BENCHMARKS += ("bench.hot_key",)
BENCHMARKS += ("bench.choose_n",)
BENCHMARKS += ("bench.fanout_latency",)
BENCHMARKS += ("bench.by_person_requests",)
BENCHMARKS += ("bench.backfill_scale",)
BENCHMARKS += ("bench.memory",)
BENCHMARKS += ("bench.layouts",)
BENCHMARKS += ("bench.reshard",)
BENCHMARKS += ("bench.tracing",)
BENCHMARKS += ("bench.ts_vs_python",)
BENCHMARKS += ("bench.fence",)
BENCHMARKS += ("bench.fence_engine",)
BENCHMARKS += ("bench.pacing",)
BENCHMARKS += ("bench.pacing_engine",)
BENCHMARKS += ("bench.engine",)
