"""The backfill CLI in-process, as the component tests drive it: one identity, the injected
clock, the 64-key shard probe (their tables hold no row past sharded(64))."""

from __future__ import annotations

import pytest

from saga_index.layout_change.record import ControlStore
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main
from tests.support.backends import Backend
from tests.support.backfill_contract import Clock
from tests.support.control_fixtures import probe_64_shard_keys


def run(
    capsys: pytest.CaptureFixture[str],
    dynamo: Backend | None,
    *argv: str,
    clock: Clock | None = None,
) -> tuple[int, str, str]:
    """The CLI in-process, following the record (no --phase/--shards unless argv has them):
    its exit code, stdout and stderr."""
    table = ["--table", dynamo.table_name] if dynamo is not None else []
    hooks = CliHooks(
        identity=lambda _: "operator@test",
        clock=clock or Clock(),
        shard_key_probe=probe_64_shard_keys,
    )
    with pytest.raises(SystemExit) as exited:
        main([*table, *argv], hooks=hooks)
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def store(dynamo: Backend) -> ControlStore:
    """A control store on its own client (not the one the CLI's run uses)."""
    return ControlStore(dynamo.new_client(), dynamo.table_name)
