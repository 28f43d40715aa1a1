"""The paused-worker scenario (a backfill that loses its lease while paused), driven step by
step so every run takes the same path, on any backend (moto: the transactional fence; dynalite:
no transactions, the clock fence).

  1  a forward run (one segment, in a thread, its own client) re-stamps a few rows in
     `migrating`; then its process "stops": the worker blocks between its fence check and its
     next write (a botocore before-call hook), and the run's heartbeats block too (SIGSTOP
     stops every thread)
  2  the operator, with its own client and the CLI: `phase set rolling-back`, a rollback
     backfill once the paused run's lease has expired (the injected clock: no test waits),
     `phase set legacy` with all its checks
  3  the process "resumes": its in-flight write is sent; the heartbeats stay blocked until the
     worker has stopped or made two more writes, so a worker that checks nothing gets its
     chance to write
Then the test reads what happened: which rows sit on shard keys (strays), `sagas all`, drift.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from saga_index.index import keys, names
from saga_index.layout_change.backfill import BackfillRequest, TokenBucket
from saga_index.layout_change.backfill.local import LocalBackfill, backfill_locally
from saga_index.layout_change.record.state import BackfillDirection
from saga_index.layout_change.record.store import ControlStore
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.backfill_contract import Clock, plant

SAGAS = [f"f{n:02}" for n in range(30)]
PAUSE_AT_WRITE = 5  # the worker stops before its 5th re-stamp
LATER = 600.0  # seconds the operator's steps take (past effectiveAt and the old lease's TTL)


@dataclass
class PausedWorld:
    """The run's client hooks: where the worker blocks, and what it wrote.

    A re-stamp is one TransactWriteItems where the server has transactions (moto), else the
    row's own UpdateItem (dynalite answers the fence's first transaction
    UnknownOperationException; that one is not a write)."""

    transactions: bool
    writes: int = 0
    # Writes begun after the resume (the one in flight at the pause began before it).
    writes_after_resume: int = 0
    paused: threading.Event = field(default_factory=threading.Event)
    resume_write: threading.Event = field(default_factory=threading.Event)
    resume_heartbeats: threading.Event = field(default_factory=threading.Event)
    resumed: bool = False

    def install(self, client: Any) -> None:
        client.meta.events.register(
            "before-parameter-build.dynamodb.TransactWriteItems", self._transact
        )
        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", self._update)

    def _transact(self, **_: Any) -> None:
        if self.transactions:
            self._row_write()

    def _update(self, params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["PK"]["S"] == names.CONTROL_PK:
            if self.paused.is_set():  # a stopped process sends no heartbeat
                self.resume_heartbeats.wait(timeout=60)
            return
        if not self.transactions:
            self._row_write()

    def _row_write(self) -> None:
        self.writes += 1
        if self.resumed:
            self.writes_after_resume += 1
        if self.writes == PAUSE_AT_WRITE and not self.paused.is_set():
            self.paused.set()
            self.resume_write.wait(timeout=60)  # past the fence's check, before the write


class Cli:
    def __init__(self, dynamo: Backend, clock: Clock, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys
        self.clock = clock
        self.argv = ["--table", dynamo.table_name]
        if dynamo.endpoint_url is not None:
            self.argv += ["--endpoint-url", dynamo.endpoint_url, "--region", "us-east-1"]
        self.hooks = CliHooks(identity=lambda _: "ops@host", clock=clock)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main([*self.argv, *argv], hooks=self.hooks)
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err

    def sagas_all(self) -> list[str]:
        code, out, err = self("sagas", "all")
        assert code == 0, err
        return sorted(json.loads(line)["sagaId"] for line in out.splitlines() if line.strip())

    def drift(self) -> int:
        return self("drift")[0]


@dataclass
class Outcome:
    run: LocalBackfill
    strays: list[str]  # sagas on a shard key once the record says legacy
    writes_after_resume: int


def on_shard_keys(dynamo: Backend) -> list[str]:
    return sorted(
        raw["sagaId"]["S"]
        for raw in dynamo.scan_all()
        if raw.get("entityType", {}).get("S") == keys.ENTITY_TYPE
        and keys.is_sharded_gsi4pk(raw.get("GSI4PK", {}).get("S"))
    )


def run_paused_worker_scenario(
    dynamo: Backend,
    capsys: pytest.CaptureFixture[str],
    *,
    transactional: bool,
    server_has_transactions: bool,
) -> tuple[Outcome, Cli]:
    for n, saga_id in enumerate(SAGAS):
        dynamo.put_saga(saga_id, f"person-{n}")
    plant(dynamo, "migrating")
    clock = Clock()
    cli = Cli(dynamo, clock, capsys)
    world = PausedWorld(transactions=transactional and server_has_transactions)
    run_client = dynamo.new_client()
    world.install(run_client)
    stop = threading.Event()
    box: dict[str, Any] = {}

    def forward() -> None:
        request = BackfillRequest(
            direction=BackfillDirection.FORWARD,
            total_segments=1,
            max_writes_per_second=1000.0,
            dry_run=False,
        )
        box["run"] = backfill_locally(
            run_client,
            dynamo.table_name,
            request,
            holder="paused-worker",
            store=ControlStore(run_client, dynamo.table_name),
            clock=clock,
            poll_seconds=0.05,
            # Heartbeat ages on a clock that stands still: however slow the loaded machine's
            # heartbeat thread, the refusal comes from the fence under test, not the clock.
            monotonic=lambda: 100.0,
            # The run's pace on real time: a bucket on the frozen clock would never refill.
            bucket=TokenBucket(request.max_writes_per_second),
            stop=stop,
            transactional_fence=transactional,
        )

    thread = threading.Thread(target=forward, name="paused-worker")
    thread.start()
    assert world.paused.wait(timeout=30), "the worker never reached its pause"

    # The operator aborts, rolls back (once the paused run's lease expired) and completes.
    clock.advance(LATER)
    code, _, err = cli("phase", "set", "rolling-back", "--reason", "abort")
    assert code == 0, err
    clock.advance(LATER)
    code, _, err = cli("backfill", "--direction", "rollback", "--max-writes-per-second", "1000")
    assert code == 0, err
    code, _, err = cli("phase", "set", "legacy", "--reason", "rolled back")
    assert code == 0, err
    assert on_shard_keys(dynamo) == []

    # The process resumes: its in-flight write goes out first, its heartbeats later.
    world.resumed = True
    world.resume_write.set()
    for _ in range(300):
        if stop.is_set() or world.writes_after_resume >= 3 or not thread.is_alive():
            break
        stop.wait(0.01)
    world.resume_heartbeats.set()
    thread.join(timeout=60)
    assert not thread.is_alive()
    return Outcome(box["run"], on_shard_keys(dynamo), world.writes_after_resume), cli
