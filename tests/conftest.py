"""Fixtures shared by every layer. Nothing here talks to AWS: credentials are dummies."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections import defaultdict
from collections.abc import Generator, Iterator
from typing import Any

import botocore.session
import pytest
from hypothesis import HealthCheck, settings
from moto.core.botocore_stubber import BotocoreStubber

from devkit.semantics.moto_harness import cheap_transactions
from tests.support import (
    botocore_hooks,
    moto_dispatch,
    moto_jsonpath,
    moto_responses,
    moto_validators,
    moto_values,
)

# boto3 must never find real credentials or a real endpoint from the developer's shell.
for _var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN"):
    os.environ.pop(_var, None)
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_REGION="us-east-1",
    JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    CDK_DISABLE_VERSION_CHECK="1",
    CDK_DISABLE_CLI_TELEMETRY="1",
)

# One botocore data loader for the whole run. Every boto3/botocore Session creates its own, and
# a loader reads each service model, endpoint ruleset and the partitions file from JSON the
# first time it is asked (~16 ms a file); moto gives every test a fresh default session
# (`reset_boto3_session`), so every test read the same files again, ~100 ms of each moto test.
# The loader's cache is per instance and holds only what the installed botocore ships: sharing
# it changes nothing a client does.
botocore.session.create_loader = functools.cache(botocore.session.create_loader)  # type: ignore[attr-defined]
# Every session registers botocore's ~130 built-in handlers and every client its own; each
# registration renames its event by botocore's alias table and asks `inspect` whether the
# handler takes **kwargs, with a cache that starts empty per session. Both are the same answers
# every time: worked out once (tests/support/botocore_hooks.py; tests/unit/test_botocore_hooks.py
# checks them against botocore's own).
botocore_hooks.install()

# moto in-process answers each request on the calling thread and is not thread-safe: an
# UpdateItem applies its actions one at a time and a TransactWriteItems deep-copies the tables
# it may roll back, so a request from another thread in between saw half an update or failed
# ("dictionary changed size during iteration"). DynamoDB answers every request atomically; one
# lock around moto's handling of a request gives the tests' threads (a local backfill's segments
# and heartbeat, an operator's client) that, and nothing else. Re-entrant: a handler may call.
_moto_process_request = BotocoreStubber.process_request
_moto_request_lock = threading.RLock()


def _one_request_at_a_time(self: BotocoreStubber, request: Any) -> Any:
    with _moto_request_lock:
        answered = moto_dispatch.direct_answer(request)
        if answered is not None:
            return answered
        return _moto_process_request(self, request)


BotocoreStubber.process_request = _one_request_at_a_time  # type: ignore[method-assign]

# moto serialises each DynamoDB answer by walking the output model member by member, ten
# members for every attribute value (a third of the simulator's CPU), and compares attribute
# values through a property that asks five type questions before it returns a string (most of
# a Query over a few hundred items). Values already in wire form are served as copies
# (tests/support/moto_responses.py), strings compared as strings (tests/support/moto_values.py);
# tests/unit/test_moto_responses.py and test_moto_values.py check both against moto's own.
moto_responses.install()
moto_values.install()
# A DynamoDB request goes to moto's handler without being rebuilt as a web request, and each
# handler's methods are listed once (tests/support/moto_dispatch.py; tests/unit/
# test_moto_dispatch.py checks the answers against moto's own path).
moto_dispatch.install()
# moto checks an UpdateItem's clause counts and overlapping paths again at every node of the
# expression, each time collecting every clause below it (about half of the control record's
# 25-action update): one walk, the same checks and errors (tests/support/moto_validators.py;
# tests/unit/test_moto_validators.py compares them with moto's own walk).
moto_validators.install()
# moto's Step Functions interpreter built a whole jsonpath_ng parser (lexer, LALR tables) for
# every path of every state it ran: each path string is parsed once (tests/support/
# moto_jsonpath.py; tests/unit/test_moto_jsonpath.py compares what the paths find).
moto_jsonpath.install()
# moto backs up every table a TransactWriteItems names by deep-copying it (40 ms a transaction at
# 200 rows), and every fenced re-stamp of a backfill is a transaction: the backup holds the items
# the transaction names instead (devkit.semantics.moto_harness.cheap_transactions, which the
# benches use; tests/unit/test_cheap_transactions.py checks a cancelled one leaves the table as
# it was). For the whole session: entered once, never left.
_SESSION_HARNESS = contextlib.ExitStack()
_SESSION_HARNESS.enter_context(cheap_transactions())

# Hypothesis times each example (a 200 ms deadline) and its input generation (the too_slow
# health check) by the wall clock. On a shared 2-core machine a worker can wait seconds for a
# core: a loaded run failed a property test whose one draw "took" 15 s. What a property test
# proves does not depend on how long an example takes, so neither clock fails it here; the
# examples drawn are the same.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


@pytest.fixture(scope="session")
def synthesized_template() -> dict[str, Any]:
    """The CDK app's own template: local tables are created from it, never hand-copied."""
    from devkit.schema import load_template

    return load_template()


# The session's dynalite server (one per worker), for the report of a test that failed on it.
_DYNALITE: list[Any] = []


@pytest.fixture(scope="session")
def dynalite_endpoint() -> Iterator[str]:
    from devkit.dynalite import DynaliteServer

    with DynaliteServer() as server:
        _DYNALITE.append(server)
        try:
            yield server.endpoint_url
        finally:
            _DYNALITE.remove(server)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that used the session's dynalite says whether the server still runs and
    what it last printed (a server that died fails every later test of its worker with
    "Connection refused", which alone does not say why)."""
    report = yield
    if report.failed and "dynalite_endpoint" in getattr(item, "fixturenames", ()):
        for server in _DYNALITE:
            report.sections.append(("dynalite server", server.status()))
    return report


# ---- pytest-xdist: which tests share a worker ------------------------------------------------
#
# `make test` runs pytest with `-n 2 --dist loadfile`: every test file runs on one worker, so a
# module-scoped fixture (a synthesised variant, the packaging test's venv) is built once, as in a
# serial run. Here loadfile also keeps a whole layer on one worker where its SESSION fixtures are
# the expensive part: tests/infra (the owned and import-mode syntheses, seconds each plus jsii
# start-up) and tests/rehearsal (one synth, the moto world and every function started, ~30 s,
# shared by its two files). Done in the scheduler, from node ids: xdist_group marks with
# --dist loadgroup would say the same, but pytest-xdist 3.8.0 writes the group into
# `item._nodeid`, which pytest 9 no longer reads, so under pytest 9.2 the marks are ignored.
_LAYER_GROUPS = {"infra", "rehearsal"}
# The scopes handed out first, longest first (seconds summed on a 2-core machine, a fresh clone
# of 2026-12-07: infra ~41, the simulator's protocol ~35, make local's rehearsal ~33, the
# restore-from-rows safety ~32, the demo ~31, the benches ~27, then 15-22 each): the run's wall
# time is its busiest worker's, and a long scope started last keeps one worker busy after the
# other has run out of work. The rest follow by number of tests, pytest-xdist's own order.
# Order only: what runs where changes nothing a test sees.
_LONGEST_FIRST = (
    "tests/infra/",
    "tests/sim/test_protocol.py",
    "tests/conformance/test_local_rehearsal.py",
    "tests/component/test_phase_record_safety.py",
    "tests/component/test_demo_pipeline.py",
    "tests/component/test_benches.py",
    "tests/component/test_backfill_state_machine.py",
    "tests/component/test_phase_cli.py",
    "tests/conformance/test_engine_fences.py",
    "tests/conformance/test_typescript_client.py",
    "tests/component/test_fence_under_dynamodb_semantics.py",
    "tests/component/test_layouts_bench.py",
    "tests/conformance/test_backfill_dynalite.py",
    "tests/conformance/test_drift_dynalite.py",
    "tests/sim/test_open_index.py",
)


def _scope(nodeid: str) -> str:
    """The unit of work a worker takes whole: a test file, or a whole layer of _LAYER_GROUPS."""
    path = nodeid.split("::", 1)[0]
    layer = _layer(path)
    return f"tests/{layer}/" if layer in _LAYER_GROUPS else path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (absent under -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class LayerOrFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    # The collection arrives in pytest_collection_modifyitems' order (longest first); xdist's
    # reordering by number of tests would undo it.
    config.option.loadscopereorder = False
    return LayerOrFileScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """_LONGEST_FIRST's scopes first, then the others by number of tests (most first); the
    order within a scope stays as collected."""
    rank = {scope: n for n, scope in enumerate(_LONGEST_FIRST)}
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[_scope(item.nodeid)] += 1

    def key(item: pytest.Item) -> tuple[int, int, str]:
        scope = _scope(item.nodeid)
        return (rank.get(scope, len(rank)), -counts[scope], scope)

    items.sort(key=key)


# ---- time per layer, printed before pytest's closing line -------------------------------------


def _layer(nodeid: str) -> str:
    """tests/unit/test_x.py::test_y -> "unit"; a file directly in tests/ -> "tests"."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "tests" else "tests"


class _LayerTimes:
    """Sums each test's setup, call and teardown durations by layer. On the xdist controller
    the workers' reports arrive through the same hook, so the sums cover every worker."""

    ORDER = ("unit", "component", "infra", "conformance", "rehearsal")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Under --dist loadgroup the node id ends in "@<group>": the same for all three phases.
        layer = _layer(report.nodeid)
        self.seconds[layer] += report.duration
        self.tests[layer].add(report.nodeid)

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # around the terminal reporter's summary
    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, config: pytest.Config
    ) -> Generator[None]:
        try:
            return (yield)
        finally:
            # After the short test summary (-ra), before the closing "N passed in ..." line.
            self._write(terminalreporter, config)

    def _write(self, reporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        if not self.tests:
            return
        wall = time.perf_counter() - self.started
        layers = [name for name in self.ORDER if name in self.tests]
        layers += sorted(set(self.tests) - set(self.ORDER))
        workers = getattr(config.option, "numprocesses", None) or 0
        reporter.write_sep("-", "time per layer (setup + call + teardown, summed)")
        for name in layers:
            count = len(self.tests[name])
            reporter.write_line(f"{name:<12} {count:>5} tests {self.seconds[name]:>8.1f} s")
        total = sum(len(t) for t in self.tests.values())
        summed = sum(self.seconds.values())
        ran_on = f"{workers} xdist workers" if workers else "one process"
        reporter.write_line(
            f"{'all':<12} {total:>5} tests {summed:>8.1f} s; wall {wall:.1f} s ({ran_on})"
        )
        if "rehearsal" in self.tests:
            from devkit import layer

            reporter.write_line(f"rehearsal interpreter: {layer.lambda_python().describe()}")
        self._write_make_steps(reporter, wall)

    @staticmethod
    def _write_make_steps(reporter: pytest.TerminalReporter, pytest_wall: float) -> None:
        """Under `make test`: its earlier steps (the Makefile's MAKE_TEST_STEPS file, lines of
        "<step> <milliseconds>" after "start <epoch milliseconds>"), this run, and the total."""
        path = os.environ.get("MAKE_TEST_STEPS")
        if not path or not os.path.isfile(path):
            return
        with open(path, encoding="utf-8") as handle:
            rows = [line.split() for line in handle if len(line.split()) == 2]
        started = next((int(ms) for name, ms in rows if name == "start"), None)
        reporter.write_sep("-", "make test, wall time per step")
        for name, ms in rows:
            if name != "start":
                reporter.write_line(f"{name:<28} {int(ms) / 1000:>8.1f} s")
        reporter.write_line(f"{'pytest':<28} {pytest_wall:>8.1f} s (to this summary)")
        if started is not None:
            total = time.time() - started / 1000
            reporter.write_line(f"{'total':<28} {total:>8.1f} s")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist) reports
        config.pluginmanager.register(_LayerTimes(), "layer-times")
