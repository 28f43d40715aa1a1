"""How fast the fast engine serves simple writes: dynalite alone, and behind the semantics proxy
with its rules on (the ceilings price each write from the item before it, one more read) and
off (forwarding only), side by side in one run.

    python -m bench.engine [--requests 3000] [--concurrency 32]

Each mode starts its own engine and table and sends `requests` PutItems of distinct 1 KB items
(no key past its ceiling) from `concurrency` concurrent callers of one asyncio client: a client
that costs little, so the engine is what is measured, not boto3 (whose own cost per call, about
a millisecond of CPU, would cap one Python process's callers first). All three processes (the
client, the proxy, dynalite) share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from bench.output import emit, num, pct, progress, save
from devkit.engine import Engine, ProxyOptions
from devkit.engine.upstream import Upstream

NAME = "engine"
TINY: dict[str, Any] = {"requests": 60, "concurrency": 4}
REQUESTS = 3000
CONCURRENCY = 32
TABLE = "engine-bench"
MODES: dict[str, tuple[bool, ProxyOptions]] = {
    "dynalite alone": (True, ProxyOptions()),
    "proxy, rules off": (False, ProxyOptions(conflicts=False, ceilings=False)),
    "proxy, rules on": (False, ProxyOptions()),
}


async def _writes(endpoint_url: str, requests: int, concurrency: int) -> float:
    """PutItems per second of wall time, `concurrency` at a time."""
    upstream = Upstream(endpoint_url, pool_size=concurrency)
    await upstream.open()
    try:
        created = await upstream.call(
            "CreateTable",
            {
                "TableName": TABLE,
                "BillingMode": "PAY_PER_REQUEST",
                "AttributeDefinitions": [{"AttributeName": "PK", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}],
            },
        )
        assert created.ok, created.body
        pad = "x" * 900

        async def caller(first: int) -> None:
            for n in range(first, requests, concurrency):
                reply = await upstream.call(
                    "PutItem", {"TableName": TABLE, "Item": {"PK": {"S": f"k{n}"}, "p": {"S": pad}}}
                )
                assert reply.ok, reply.body

        started = time.perf_counter()
        await asyncio.gather(*(caller(first) for first in range(concurrency)))
        return requests / (time.perf_counter() - started)
    finally:
        await upstream.close()


def run(requests: int = REQUESTS, concurrency: int = CONCURRENCY) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    for mode, (raw, options) in MODES.items():
        progress(f"engine: {mode}, {requests} writes, {concurrency} at a time")
        with Engine(raw=raw, options=options) as engine:
            rate = asyncio.run(_writes(engine.endpoint_url, requests, concurrency))
        results.append({"mode": mode, "writesPerSecond": rate})
    alone = results[0]["writesPerSecond"]
    for row in results:
        row["vsDynaliteAlone"] = row["writesPerSecond"] / alone if alone else None
    return {"requests": requests, "concurrency": concurrency, "runs": results}


def render(result: dict[str, Any]) -> None:
    emit(
        f"Simple writes on the engine ({result['requests']} PutItems of 1 KB, "
        f"{result['concurrency']} at a time, one asyncio client)",
        ("mode", "writes/s", "vs dynalite alone"),
        [[r["mode"], num(r["writesPerSecond"]), pct(r["vsDynaliteAlone"])] for r in result["runs"]],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__)
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.concurrency < 1:
        parser.error("--requests and --concurrency must be positive")
    result = run(args.requests, args.concurrency)
    render(result)
    save(NAME, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
