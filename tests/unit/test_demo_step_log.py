"""The demo's StepLog: the library's warnings said once each, as notes of the step that logged
them, never as timestamped lines; and the loggers put back as they were afterwards."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

from rich.console import Console

from devkit.demo.ui import Stages, StepLog
from devkit.schema import synth_warnings


def _stages() -> tuple[Stages, StepLog, io.StringIO]:
    out = io.StringIO()
    log = StepLog()
    stages = Stages(total=2, console=Console(file=out, width=200), log=log)
    return stages, log, out


def test_a_warning_logged_many_times_in_a_step_is_said_once_as_its_note() -> None:
    logger = logging.getLogger("saga_index.demo_step_log_test")
    # The in-process CLI's own handler sits on the parent, with a timestamped format
    parent = logging.getLogger("saga_index")
    printed = io.StringIO()
    cli_handler = logging.StreamHandler(printed)
    cli_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    parent.addHandler(cli_handler)
    stages, log, out = _stages()
    try:
        stages.step("backfill")
        for _ in range(3):
            logger.warning("saga row anomaly, left on its key: %s", "RSAGA#1")
        logger.warning("saga row anomaly, left on its key: %s", "RSAGA#2")
        stages.note("backfill done")
        logger.warning("saga row anomaly, left on its key: %s", "RSAGA#1")
        stages.step("repair")
        logger.warning("saga row anomaly, left on its key: %s", "RSAGA#1")
        stages.flush()
    finally:
        log.restore()
        parent.removeHandler(cli_handler)

    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/2] backfill",
        "      logged: saga row anomaly, left on its key: RSAGA#1",
        "      logged: saga row anomaly, left on its key: RSAGA#2",
        "      backfill done",
        "[2/2] repair",
        "      logged: saga row anomaly, left on its key: RSAGA#1",
    ]
    assert printed.getvalue() == ""  # nothing reached the timestamped handler
    # Put back: the logger propagates to its parent's handlers again
    assert logger.propagate is True
    assert log not in logger.handlers


def test_synthesis_warnings_are_read_once_without_their_acknowledgement_tag(
    tmp_path: Path,
) -> None:
    template = tmp_path / "RenewalSagaIndex.template.json"
    template.write_text("{}")
    warning = {"type": "aws:cdk:warning", "data": "No pager [ack: renewal-saga-index:pager]"}
    (tmp_path / "RenewalSagaIndex.metadata.json").write_text(
        json.dumps(
            {
                "/Stack/A": [warning, {"type": "aws:cdk:info", "data": "fine"}],
                "/Stack/B": [warning],
            }
        )
    )
    assert synth_warnings(template) == ["No pager"]
    assert synth_warnings(tmp_path / "missing" / "RenewalSagaIndex.template.json") == []
