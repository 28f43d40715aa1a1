"""The paused-worker scenario on dynalite, a real server without transactions: the fence falls
back to the clock fence (detected once, with a warning), the worker's in-flight write may still
land after it lost its lease (the window docs/control-contract.md states: one row per segment),
the drift guard pages for it in `legacy`, and ONE command, `backfill --direction rollback` in
`legacy`, moves it home. A worker without the clock fence writes more than that window."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from saga_index.layout_change.backfill.fence import FenceMode, LeaseFence
from tests.support.backends import Backend, make_backend
from tests.support.fence_scenario import SAGAS, run_paused_worker_scenario

pytestmark = pytest.mark.conformance


@pytest.fixture
def dynamo(synthesized_template: dict[str, Any], dynalite_endpoint: str) -> Backend:
    return make_backend("fence", synthesized_template, endpoint_url=dynalite_endpoint)


def test_given_a_paused_worker_on_a_server_without_transactions_then_one_command_cleans_up(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        outcome, cli = run_paused_worker_scenario(
            dynamo, capsys, transactional=True, server_has_transactions=False
        )

    # The transaction was refused once; the run went on with the clock fence, and said so
    assert outcome.run.fence_mode == FenceMode.CLOCK.value
    assert any("clock fence only" in r.getMessage() for r in caplog.records)
    # Only the write in flight at the pause landed (the stated window), then the fence stopped
    assert outcome.run.lease_lost is not None
    assert "no heartbeat proved the backfill lease" in outcome.run.lease_lost
    assert len(outcome.strays) == 1
    assert outcome.writes_after_resume == 0  # none after the one in flight
    # The drift guard pages for the stray; `sagas all` misses it
    assert cli.drift() == 1
    assert len(cli.sagas_all()) == len(SAGAS) - 1

    # When the one clean-up command runs in legacy (once that state is effective)
    cli.clock.advance(600)
    code, out, err = cli("backfill", "--direction", "rollback", "--json")

    # Then it moved the stray home: every saga is visible and drift is clean
    assert code == 0, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["restamped"] == 1
    assert cli.sagas_all() == sorted(SAGAS)
    assert cli.drift() == 0


def test_given_a_paused_worker_without_the_clock_fence_then_it_writes_past_the_window(
    dynamo: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deliberately broken variant: the fence checks nothing before a write
    monkeypatch.setattr(LeaseFence, "check_clock", lambda self: self.lost is None)

    outcome, cli = run_paused_worker_scenario(
        dynamo, capsys, transactional=True, server_has_transactions=False
    )

    assert len(outcome.strays) > 1
    assert cli.drift() == 1
