"""The operator's commands, run in this process: `saga-index ...` as docs/runbook.md runs them.

The demo changes the migration state only through the CLI (`phase set`), so what it shows is
what an operator sees: the same checks, the same refusals, the same exit codes and JSON. The
CLI is called in-process (saga_index_cli.main.main) with hooks for T: the deployed functions
re-read the record every 30 s, the demo's processes are all here and read it per command, so
a short T is true of them and lets effectiveAt pass in about a second.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from devkit.demo.ui import Stages
from saga_index.layout_change.record import ControlTiming
from saga_index_cli.context import CliHooks
from saga_index_cli.main import main as saga_index

# T, stale grace and in-flight margin of the demo: effectiveAt = changedAt + 1 s.
DEMO_TIMING: Final = ControlTiming(
    cache_seconds=0.5, stale_grace_seconds=0.25, in_flight_margin_seconds=0.25
)
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED = 0, 1, 2, 3
# `saga-index backfill`: complete, anomaly rows listed (the same code as a refusal's).
EXIT_ANOMALIES = 3
DEMO_REGION: Final = "us-east-1"


class OperatorCommandError(RuntimeError):
    """A `saga-index` command exited with a code the runbook does not expect at that step."""


@dataclass(frozen=True)
class CommandRun:
    args: tuple[str, ...]
    code: int
    stdout: str

    @property
    def command(self) -> str:
        return "saga-index " + shlex.join(self.args)

    def json(self) -> dict[str, Any]:
        """The command's JSON document (`--json`: one object, on the last line of stdout)."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            raise OperatorCommandError(f"`{self.command}` printed no JSON (exit {self.code})")
        document = json.loads(lines[-1])
        if not isinstance(document, dict):
            raise OperatorCommandError(f"`{self.command}` printed {type(document).__name__}")
        return document


class OperatorCli:
    """`saga-index` against the demo's table on the local server."""

    def __init__(
        self,
        endpoint_url: str,
        table: str,
        stages: Stages,
        *,
        timing: ControlTiming = DEMO_TIMING,
    ) -> None:
        self.stages = stages
        self.hooks = CliHooks(timing=timing)
        self.timing = timing
        self.history: list[CommandRun] = []  # every command run, in order (report.json)
        self._globals = (
            "--table",
            table,
            "--endpoint-url",
            endpoint_url,
            "--region",
            DEMO_REGION,
            "--log-level",
            "WARNING",
        )

    def run(self, *args: str, expect: Collection[int] = (EXIT_OK,)) -> CommandRun:
        """Run one command, showing it as an operator would type it (without the connection
        options); its stdout is captured, its stderr (the CLI's messages) passes through.

        OperatorCommandError when the exit code is not one of `expect`.
        """
        self.stages.note(f"$ saga-index {shlex.join(args)}")
        buffer = io.StringIO()
        # Commands exit through sys.exit with the documented code; stdout is their data.
        with contextlib.redirect_stdout(buffer):
            try:
                saga_index([*self._globals, *args], hooks=self.hooks)
                code = EXIT_OK
            except SystemExit as exit_:
                code = _exit_code(exit_.code)
        run = CommandRun(args=tuple(args), code=code, stdout=buffer.getvalue())
        self.history.append(run)
        if code not in expect:
            raise OperatorCommandError(
                f"`{run.command}` exited {code}, expected {' or '.join(map(str, expect))}: "
                f"{run.stdout.strip()[:2000] or '(no output)'}"
            )
        return run


def _exit_code(code: object) -> int:
    if code is None:
        return EXIT_OK
    if isinstance(code, int):
        return code
    return EXIT_FAILED  # sys.exit("message"): the message went to stderr
