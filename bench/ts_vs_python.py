"""The TypeScript package (clients/typescript) against the Python library, side by side on one
dynalite: a by-person read and the open-saga enumeration, at today's history (the seed's 1,681
saga rows) and at 10x, in today's layout (legacy) and the sharded one (16).

    python -m bench.ts_vs_python [--scales 1,10] [--layouts legacy,sharded(16)] [--rounds 5]
                                 [--persons 20] [--tiny]

Both sides read the same table in the same state: the Python side in this process
(SagaRepository along the record's routing), the package's in a Node process
(clients/typescript/bench/runner.mjs, the built package imported by its name). Each round reads
every sampled person once, then enumerates the open sagas once; a first round is read untimed
on both sides (the control record's read, the connections, a JIT's first compilations). The
sides take turns round by round, the first alternating, so a change in the machine's load
(other processes) falls on both.
Requests and RCU are the index Queries' (ReturnConsumedCapacity TOTAL, as dynalite prices
them), per call. `ok` requires the TS/Python ratio of the latency medians to
be at most MAX_RATIO for both reads in every configuration, the requests and RCU per call to be
equal, and both sides to return the same number of rows.

Needs the package built (`make ts-client`, or `npm ci` in clients/typescript).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from bench.output import emit, num, progress, save
from bench.server import Tables, local_server
from devkit.dynalite import REPO_ROOT
from devkit.local_env import local_credentials
from devkit.seed import SeedSpec, build_dataset
from saga_index.layout_change.record import ControlStore, routing_for
from saga_index.layout_change.transitions import change_phase
from saga_index.store import SagaRepository
from saga_index.store.dynamo import make_client

NAME = "ts_vs_python"
PACKAGE = REPO_ROOT / "clients" / "typescript"
RUNNER = PACKAGE / "bench" / "runner.mjs"
MAX_RATIO = 1.1
LAYOUTS = ("legacy", "sharded(16)")
# A run of seconds: a small history, figures meaningless (what the tests run).
TINY: dict[str, Any] = {"scales": (1,), "rounds": 2, "persons": 3, "spec": SeedSpec(150, 300, 200)}


def run(
    *,
    scales: Sequence[int] = (1, 10),
    rounds: int = 5,
    persons: int = 20,
    layouts: Sequence[str] = LAYOUTS,
    spec: SeedSpec | None = None,
    endpoint_url: str | None = None,
) -> dict[str, Any]:
    """Measure both sides at every scale and layout; the JSON-serialisable result."""
    unknown = [layout for layout in layouts if layout not in LAYOUTS]
    if unknown:
        raise ValueError(f"unknown layout(s) {unknown}; known: {list(LAYOUTS)}")
    if not RUNNER.is_file() or not (PACKAGE / "dist" / "esm" / "index.js").is_file():
        raise RuntimeError(f"build the package first: make ts-client (or npm ci in {PACKAGE})")
    if rounds < 1 or persons < 1:
        raise ValueError(f"rounds and persons must be >= 1, got {rounds} and {persons}")
    base = spec or SeedSpec()
    rows: list[dict[str, Any]] = []
    if endpoint_url is not None:
        with local_credentials():
            rows = _measure_all(endpoint_url, base, scales, layouts, rounds, persons)
    else:
        with local_server() as url:
            rows = _measure_all(url, base, scales, layouts, rounds, persons)
    ok = all(
        row[read]["ratio"] <= MAX_RATIO and row[read]["same_cost"] and row[read]["same_rows"]
        for row in rows
        for read in ("by_person", "open")
    )
    return {"rows": rows, "rounds": rounds, "persons": persons, "max_ratio": MAX_RATIO, "ok": ok}


def _measure_all(
    url: str,
    base: SeedSpec,
    scales: Sequence[int],
    layouts: Sequence[str],
    rounds: int,
    persons: int,
) -> list[dict[str, Any]]:
    tables = Tables(url)
    rows: list[dict[str, Any]] = []
    for scale in scales:
        dataset = build_dataset(base.scaled(scale))
        sample = sorted({s.person_id for s in dataset.sagas if s.person_id})[:persons]
        for layout in layouts:
            shards = 16 if layout != "legacy" else None
            progress(f"{NAME}: seeding {len(dataset.sagas):,} saga rows ({layout}, {scale}x)")
            table, _ = tables.seeded(
                "ts-vs-py", dataset, shard_count=shards, include_other_entities=False
            )
            if shards is not None:
                _plant_sharded(tables.client, table, shards)
            rows.append(
                {
                    "scale": scale,
                    "layout": layout,
                    "saga_rows": len(dataset.sagas),
                    **_measure(url, table, sample, rounds),
                }
            )
    return rows


def _plant_sharded(client: Any, table: str, shards: int) -> None:
    """The record of a finished migration to sharded(shards) (forced: the rows are seeded so)."""
    store = ControlStore(client, table)
    # The move opened long enough ago that its switch has settled (effectiveAt plus the
    # in-flight margin), which a completing move waits for even when forced.
    now = datetime.now(UTC)
    for phase, at in (("migrating", now - timedelta(minutes=10)), ("sharded", now)):
        change_phase(
            store,
            phase,
            changed_by="bench",
            reason=f"{NAME}: at rest in sharded({shards})",
            shard_count=shards if phase == "migrating" else None,
            force=True,
            clock=partial(_fixed, at),
        )


def _fixed(at: datetime) -> datetime:
    return at


class _QueryMeter:
    """Index Queries of one boto3 client: their count and the RCU DynamoDB reports for them."""

    def __init__(self, client: Any) -> None:
        self.requests = 0
        self.rcu = 0.0
        client.meta.events.register("before-parameter-build.dynamodb.Query", self._before)
        client.meta.events.register("after-call.dynamodb.Query", self._after)

    def _before(self, params: dict[str, Any], **_: Any) -> None:
        if "IndexName" in params:
            params["ReturnConsumedCapacity"] = "TOTAL"

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        if consumed is not None:
            self.requests += 1
            self.rcu += float(consumed.get("CapacityUnits", 0))


class _PythonSide:
    """The Python library's reads of one table, along the record's routing, metered."""

    def __init__(self, url: str, table: str, persons: Sequence[str]) -> None:
        client = make_client(endpoint_url=url)
        self.meter = _QueryMeter(client)
        self.repo = SagaRepository(
            client, table, plan=routing_for(ControlStore(client, table).read())
        )
        self.persons = list(persons)
        self.round(_empty(), _empty())

    def round(self, by_person: dict[str, Any], open_sagas: dict[str, Any]) -> None:
        for person in self.persons:
            _timed(
                by_person,
                self.meter,
                functools.partial(_count, self.repo.get_sagas_by_person, person),
            )
        _timed(open_sagas, self.meter, lambda: len(self.repo.get_all_open_sagas()))


def _count(read: Callable[[str], Any], person: str) -> int:
    return len(read(person))


def _empty() -> dict[str, Any]:
    return {"ms": [], "requests": 0, "rcu": 0.0, "rows": 0}


def _timed(total: dict[str, Any], meter: _QueryMeter, call: Callable[[], int]) -> None:
    requests, rcu = meter.requests, meter.rcu
    started = time.perf_counter()
    rows = call()
    total["ms"].append((time.perf_counter() - started) * 1000)
    total["requests"] += meter.requests - requests
    total["rcu"] += meter.rcu - rcu
    total["rows"] += rows


class _TypeScriptSide:
    """The package's reads of one table, in a Node process (RUNNER) that answers line by line."""

    def __init__(self, url: str, table: str, persons: Sequence[str]) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node (>= 20) must be on PATH")
        self.process = subprocess.Popen(
            [node, str(RUNNER), "--endpoint", url, "--table", table],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=PACKAGE,
        )
        if self.process.stdin is None or self.process.stdout is None:
            raise RuntimeError("the package's runner has no pipes")
        self._stdin, self._stdout = self.process.stdin, self.process.stdout
        self._ask({"persons": list(persons)})

    def round(self, by_person: dict[str, Any], open_sagas: dict[str, Any]) -> None:
        answer = self._ask({"round": True})
        for total, part in ((by_person, answer["byPerson"]), (open_sagas, answer["open"])):
            total["ms"].extend(part["ms"])
            for name in ("requests", "rcu", "rows"):
                total[name] += part[name]

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self._stdin.write(json.dumps(request) + "\n")
        self._stdin.flush()
        line = self._stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"the package's runner failed: {self._stderr()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _stderr(self) -> str:
        return "" if self.process.stderr is None else self.process.stderr.read().strip()

    def close(self) -> None:
        if not self._stdin.closed:
            self._stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _measure(url: str, table: str, persons: Sequence[str], rounds: int) -> dict[str, Any]:
    """Both sides, round by round in turn (the order alternating), so a change in the
    machine's load falls on both; per read, the comparison of the two."""
    python = _PythonSide(url, table, persons)
    typescript = _TypeScriptSide(url, table, persons)
    try:
        totals = {side: (_empty(), _empty()) for side in ("python", "typescript")}
        sides = {"python": python.round, "typescript": typescript.round}
        for n in range(rounds):
            order = ("python", "typescript") if n % 2 == 0 else ("typescript", "python")
            for side in order:
                sides[side](*totals[side])
    finally:
        typescript.close()
    return {
        read: _compare(totals["python"][at], totals["typescript"][at])
        for at, read in enumerate(("by_person", "open"))
    }


def _compare(python: dict[str, Any], typescript: dict[str, Any]) -> dict[str, Any]:
    calls = len(python["ms"])
    py_ms = statistics.median(python["ms"])
    ts_ms = statistics.median(typescript["ms"])
    per_call = {
        side: {"requests": data["requests"] / calls, "rcu": data["rcu"] / calls}
        for side, data in (("python", python), ("typescript", typescript))
    }
    return {
        "calls": calls,
        "python_median_ms": py_ms,
        "typescript_median_ms": ts_ms,
        "ratio": ts_ms / py_ms if py_ms > 0 else float("inf"),
        "per_call": per_call,
        "same_cost": per_call["python"] == per_call["typescript"],
        "rows_per_call": python["rows"] / calls,
        "same_rows": python["rows"] == typescript["rows"],
    }


def render(result: dict[str, Any]) -> None:
    headers = (
        "history",
        "layout",
        "read",
        "Python median",
        "TS median",
        "TS/Python",
        "requests/call (Py, TS)",
        "RCU/call (Py, TS)",
        "rows/call",
    )
    table = []
    for row in result["rows"]:
        for read, label in (("by_person", "by person"), ("open", "open sagas")):
            r = row[read]
            py, ts = r["per_call"]["python"], r["per_call"]["typescript"]
            table.append(
                (
                    f"{row['scale']}x ({row['saga_rows']:,} sagas)",
                    row["layout"],
                    label,
                    num(r["python_median_ms"], 2, " ms"),
                    num(r["typescript_median_ms"], 2, " ms"),
                    num(r["ratio"], 2) + ("" if r["ratio"] <= result["max_ratio"] else " (over)"),
                    f"{num(py['requests'], 2)}, {num(ts['requests'], 2)}",
                    f"{num(py['rcu'], 1)}, {num(ts['rcu'], 1)}",
                    num(r["rows_per_call"], 1) + ("" if r["same_rows"] else " (differ)"),
                )
            )
    emit(
        f"TypeScript package vs Python library on dynalite ({result['rounds']} rounds, "
        f"{result['persons']} persons; goal TS/Python <= {result['max_ratio']})",
        headers,
        table,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m bench.{NAME}", description=__doc__)
    parser.add_argument("--scales", default="1,10", help="history multiples (default 1,10)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="legacy and/or sharded(16)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--persons", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="a run of seconds (TINY)")
    args = parser.parse_args(argv)
    if args.tiny:
        result = run(**TINY)
    else:
        scales = tuple(int(s) for s in args.scales.split(","))
        result = run(
            scales=scales,
            layouts=tuple(args.layouts.split(",")),
            rounds=args.rounds,
            persons=args.persons,
        )
    render(result)
    save(NAME, result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
