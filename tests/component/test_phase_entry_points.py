"""A guarded move cannot complete without its checks, through any public entry point: the domain
operation (`change_phase`, what the Step Functions-free callers, the simulator's runbook and the
benches call), the CLI's `phase set`, and the source of every caller outside the transitions
room (none reaches the executor's write past `change_phase`). `--force` skips them only
explicitly, and the history names what it skipped."""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from saga_index.index import keys
from saga_index.layout_change import transitions
from saga_index.layout_change.record import ControlStore, Phase
from saga_index.layout_change.record.timing import IN_FLIGHT_MARGIN_SECONDS
from saga_index.layout_change.transitions import PreconditionFailedError, change_phase
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.control_fixtures import Clock, moto_backend, probe_64_shard_keys

ROOT = Path(__file__).resolve().parents[2]
COMPLETION_CHECKS = ["backfill-verified", "no-legacy-rows", "no-misrouted-rows", "parity"]
# Where product code and the simulated operator live: none of it may write a move but through
# change_phase.
CALLER_TREES = ("lambdas", "devkit", "bench", "tests/sim")
_WRITE_NAMES = {"set_phase", "_set_phase", "completion_checks", "first_move_guard"}


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any]) -> Iterator[Backend]:
    with moto_backend("phase-entry-points", synthesized_template) as backend:
        yield backend


@pytest.fixture
def store(dynamo: Backend) -> ControlStore:
    return ControlStore(dynamo.client, dynamo.table_name)


def _change(store: ControlStore, clock: Clock, phase: str, **kwargs: Any) -> Any:
    kwargs.setdefault("probe", probe_64_shard_keys)
    return change_phase(store, phase, changed_by="ops", reason=f"to {phase}", clock=clock, **kwargs)


def _migrating_with_a_row_left(dynamo: Backend, store: ControlStore, clock: Clock) -> None:
    dynamo.put_saga("old", "p-1")  # still on the legacy key: the completing move must refuse
    _change(store, clock, "migrating", shard_count=4)
    effective_at = store.read().effective_at
    assert effective_at is not None
    clock.now = effective_at + timedelta(seconds=IN_FLIGHT_MARGIN_SECONDS + 1)


def test_change_phase_chooses_the_completion_checks_itself_and_refuses_writing_nothing(
    dynamo: Backend, store: ControlStore
) -> None:
    clock = Clock()
    _migrating_with_a_row_left(dynamo, store, clock)
    with pytest.raises(PreconditionFailedError) as refused:
        _change(
            store,
            clock,
            "sharded",
            options=transitions.CompletionCheckOptions(recheck_delay_seconds=0),
        )
    assert [r.name for r in refused.value.failed] == [
        "backfill-verified",
        "no-legacy-rows",
        "parity",
    ]
    assert store.read().version == 1
    assert [t.version for t in store.history()] == [1]


def test_change_phase_forced_skips_the_checks_only_by_name_in_the_history(
    dynamo: Backend, store: ControlStore
) -> None:
    clock = Clock()
    _migrating_with_a_row_left(dynamo, store, clock)
    change = _change(store, clock, "sharded", force=True)
    assert change.state.phase is Phase.SHARDED
    assert change.forced == tuple(COMPLETION_CHECKS)
    assert store.history()[-1].checks_forced == tuple(COMPLETION_CHECKS)


def test_change_phase_runs_the_first_move_guard_itself(
    dynamo: Backend, store: ControlStore
) -> None:
    dynamo.put_saga("lost", "p-1", gsi4pk=keys.sharded_gsi4pk(3))
    with pytest.raises(PreconditionFailedError) as refused:
        _change(store, Clock(), "migrating", shard_count=4)
    assert [r.name for r in refused.value.failed] == ["no-rows-on-shard-keys"]
    assert store.read().version == 0


def test_the_cli_phase_set_refuses_the_same_move_with_exit_3(
    dynamo: Backend, store: ControlStore, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    _migrating_with_a_row_left(dynamo, store, clock)
    hooks = CliHooks(identity=lambda _: "ops", clock=clock, shard_key_probe=probe_64_shard_keys)
    argv = ["--table", dynamo.table_name, "phase", "set", "sharded", "--reason", "done"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--recheck-delay", "0"], hooks=hooks)
    assert exited.value.code == 3
    refusal = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in refusal["failed"]] == [
        "backfill-verified",
        "no-legacy-rows",
        "parity",
    ]
    assert store.read().version == 1


def test_no_public_operation_of_the_transitions_room_takes_the_checks_from_its_caller() -> None:
    for name in transitions.__all__:
        member = getattr(transitions, name)
        if not inspect.isfunction(member):
            continue
        parameters = inspect.signature(member).parameters
        assert not {"checks", "guards", "requirements"} & set(parameters), name


def _calls(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
    return names


def test_no_caller_outside_the_transitions_room_builds_or_skips_a_moves_checks() -> None:
    room = ROOT / "lambdas/saga_index/layout_change/transitions"
    offenders = {}
    for tree in CALLER_TREES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            if room in path.parents:
                continue
            used = _calls(path) & _WRITE_NAMES
            if used:
                offenders[str(path.relative_to(ROOT))] = sorted(used)
    assert offenders == {}
    # ...and the ones that write a move do it through the operation.
    for caller in (
        "lambdas/saga_index_cli/phase/change.py",
        "tests/sim/runbook.py",
        "bench/ts_vs_python.py",
    ):
        assert "change_phase" in _calls(ROOT / caller), caller
