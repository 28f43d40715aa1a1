"""`python -m bench [--only NAME,...] [--list] [--tiny] [--endpoint-url URL]`: run every
benchmark in bench.BENCHMARKS.

Each benchmark prints its own table; at the end a summary table lists every benchmark with its
verdict, wall time and result file, also when one of them raised. Exit 1 if any benchmark failed
or reported `"ok": false`. `--tiny` runs each at its TINY scale (seconds, figures meaningless:
what the tests run); `--endpoint-url` gives the benchmarks that use a server one already running.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import BENCHMARKS
from bench.output import RESULTS, save


def _name(module_path: str) -> str:
    return module_path.rsplit(".", 1)[-1]


def run_one(
    module: ModuleType, directory: Path, *, tiny: bool = False, endpoint_url: str | None = None
) -> tuple[str, float, str]:
    """(verdict, seconds, file) of one benchmark; it prints its own table."""
    started = time.monotonic()
    kwargs: dict[str, Any] = dict(module.TINY) if tiny else {}
    if endpoint_url is not None and "endpoint_url" in inspect.signature(module.run).parameters:
        kwargs["endpoint_url"] = endpoint_url
    result = module.run(**kwargs)
    module.render(result)
    path = save(str(module.NAME), result, directory)
    ok = result.get("ok")
    verdict = "-" if ok is None else ("ok" if ok else "FAILED")
    return verdict, time.monotonic() - started, str(path)


def summary_table(rows: Sequence[tuple[str, str, float, str]]) -> str:
    headers = ("benchmark", "verdict", "seconds", "result")
    cells = [headers, *[(n, v, f"{s:.1f}", f) for n, v, s, f in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--results", type=Path, default=RESULTS, help="result directory")
    parser.add_argument("--tiny", action="store_true", help="each benchmark at its TINY scale")
    parser.add_argument("--endpoint-url", help="a running local server (default: one per run)")
    args = parser.parse_args(argv)
    names = {_name(m): m for m in BENCHMARKS}
    if args.list:
        print("\n".join(names))
        return 0
    selected = list(names) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in selected if n not in names]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(names)}")
    rows: list[tuple[str, str, float, str]] = []
    for name in selected:
        sys.stderr.write(f"bench: running {name}\n")
        started = time.monotonic()
        try:
            verdict, seconds, path = run_one(
                importlib.import_module(names[name]),
                args.results,
                tiny=args.tiny,
                endpoint_url=args.endpoint_url,
            )
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others
            traceback.print_exc()
            verdict, seconds, path = "ERROR", time.monotonic() - started, "-"
        rows.append((name, verdict, seconds, path))
    print(f"\n{summary_table(rows)}")
    return 0 if all(v in ("ok", "-") for _, v, _, _ in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
