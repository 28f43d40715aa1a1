"""The real CLI under DynamoDB's conflict rules (devkit.semantics on moto: every client the CLI
makes is put under one model, a transaction holds its items for 10 ms): `saga-index backfill`
of 8 segments runs to its end while the operator's `saga-index backfill throttle`, `pause` and
`resume`, issued from another thread during the run, each exit 0. With the fence on its own
per-segment slots nothing the run writes contends with them.

"During" is made so, not timed: the operator starts at the first re-stamp, which waits until
its last command exited, while the other segments go on writing; no fixed sleep, so a loaded
machine changes how the writes and commands interleave, never whether the commands fall in the
run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from devkit.capacity.table_schema import TableSchema
from devkit.semantics.hooks import SemanticsHooks
from devkit.semantics.model import DEFAULT_IN_FLIGHT_SECONDS, DynamoSemantics
from devkit.semantics.moto_harness import cheap_transactions, one_request_at_a_time
from saga_index.index import keys
from saga_index_cli import context
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend, make_backend
from tests.support.backfill_contract import Clock, plant
from tests.support.contended_backfill import on_legacy, seed_rows

SEGMENTS = 8
# (rows, writes/s): a dozen rows a segment keep the segments writing beside the operator's
# commands. Thousands of rows take about a minute on moto: `make simulate` runs that size.
SIZES = [
    pytest.param(96, 60.0, id="96-rows"),
    pytest.param(2000, 200.0, id="2000-rows", marks=pytest.mark.long),
]


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with mock_aws():
        yield make_backend("cli-contended", synthesized_template, endpoint_url=None)


def cli(clock: Clock, table: str, *argv: str) -> int:
    hooks = CliHooks(identity=lambda _: "operator@test", clock=clock)
    try:
        main(["--table", table, *argv], hooks=hooks)
    except SystemExit as exited:
        return int(exited.code or 0)
    return 0


@pytest.mark.parametrize(("rows", "rate"), SIZES)
def test_a_cli_backfill_completes_while_the_operator_throttles_pauses_and_resumes_it(
    rows: int,
    rate: float,
    dynamo: Backend,
    synthesized_template: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed_rows(dynamo, rows)
    plant(dynamo, "migrating")
    semantics = DynamoSemantics(
        dynamo.table_name, clock=time.monotonic, in_flight=DEFAULT_IN_FLIGHT_SECONDS
    )
    hooks = SemanticsHooks(
        semantics,
        TableSchema.from_template(synthesized_template, dynamo.table_name),
        reader=dynamo.new_client(),
    )
    made = context.make_client
    monkeypatch.setattr(context, "make_client", lambda **kw: hooks.attach(made(**kw)))
    clock = Clock()
    table = dynamo.table_name
    codes: dict[str, int] = {}
    during: dict[str, bool] = {}
    started, operated, finished = threading.Event(), threading.Event(), threading.Event()
    held: list[int] = []
    lock = threading.Lock()

    def operator() -> None:
        started.wait(timeout=30)
        try:
            for name, argv in (
                ("throttle", ("backfill", "throttle", "--max-writes-per-second", str(rate))),
                ("pause", ("backfill", "pause", "--reason", "peak")),
                ("resume", ("backfill", "resume", "--reason", "off-peak")),
            ):
                codes[name] = cli(clock, table, *argv)
                during[name] = not finished.is_set()
        finally:
            operated.set()

    def first_restamp(params: dict[str, Any], **_: Any) -> None:
        restamps = any(
            item.get("Update", {})
            .get("Key", {})
            .get("PK", {})
            .get("S", "")
            .startswith(keys.SAGA_PK_PREFIX)
            for item in params.get("TransactItems", [])
        )
        with lock:
            first = restamps and not held
            if first:
                held.append(1)
        if first:
            # The run cannot end before this write: the operator's commands fall in the run.
            started.set()
            operated.wait(timeout=60)

    hooks_attach = hooks.attach

    def attach(client: Any) -> Any:
        # First of all: the held re-stamp has not met the model yet (holds no item).
        client.meta.events.register_first(
            "before-parameter-build.dynamodb.TransactWriteItems", first_restamp
        )
        return hooks_attach(client)

    monkeypatch.setattr(hooks, "attach", attach)
    ops = threading.Thread(target=operator, name="operator")
    with one_request_at_a_time(), cheap_transactions():
        ops.start()
        # The backfill in this (the main) thread: the CLI installs its signal handlers here.
        code = cli(
            clock,
            table,
            "backfill",
            "--json",
            "--segments",
            str(SEGMENTS),
            "--max-writes-per-second",
            str(rate),
        )
        finished.set()
        ops.join(timeout=60)
    out, err = capsys.readouterr()

    report = f"code={code} ops={codes} stats={semantics.stats} err={err[-2000:]}"
    assert code == 0, report
    [summary] = [
        json.loads(line)
        for line in out.splitlines()
        if line.startswith("{") and "restamped" in line
    ]
    assert summary["restamped"] == rows, report
    assert summary["complete"] is True, report
    assert on_legacy(dynamo) == 0, report
    # every operator command was issued during the run and exited 0
    assert codes == {"throttle": 0, "pause": 0, "resume": 0}, report
    assert during == {"throttle": True, "pause": True, "resume": True}, report
    # and no re-stamp was cancelled by another's transaction
    assert semantics.stats.cancelled_transactions == 0, report
