"""What a `saga-index backfill` run shows its operator, wherever it runs: the progress bar (or
log lines: the display is saga_index_cli.progress, shared with drift and verify), the
Ctrl-C/SIGTERM handling, the summary and JSON report, and the exit code."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click
from botocore.exceptions import BotoCoreError, ClientError

from saga_index.index import InvalidInputError, SagaIndexError
from saga_index.layout_change.backfill import BackfillSummary, SegmentCounts
from saga_index.layout_change.record import ControlState
from saga_index_cli.backfill.advice import BackfillRefusedError
from saga_index_cli.context import CliContext
from saga_index_cli.exit_codes import ExitCode
from saga_index_cli.failures import EXIT_PARTIAL, exit_code_of, retry_at_of
from saga_index_cli.output import emit, report_marker
from saga_index_cli.progress import LiveProgress

log = logging.getLogger("saga_index.cli.backfill")

EXIT_CLEAN, EXIT_FAILED, EXIT_ANOMALIES = ExitCode.OK, ExitCode.FOUND, ExitCode.REFUSED


def exit_code(summary: BackfillSummary, *, failed: bool) -> ExitCode:
    """0 complete and clean; 3 complete, anomalies remain; a run that failed or was
    interrupted: 6 (partly done) once it re-stamped a row, else 1; a complete run whose
    read-back found rows left to move: 1 (found)."""
    if failed or not summary.complete:
        return EXIT_PARTIAL if summary.restamped > 0 else EXIT_FAILED
    if not summary.verified:
        return EXIT_FAILED
    return EXIT_ANOMALIES if summary.anomalies_remain else EXIT_CLEAN


def remaining_to_move(summary: BackfillSummary) -> int | None:
    """The report's `remaining`: rows with a usable personId still to move, as the read-back
    of a complete run found them (0 on a clean one); None when the run did not complete (the
    rows past its cursors were never read: nobody knows)."""
    if not summary.complete or summary.verification is None or summary.dry_run:
        return None
    return summary.verification.unexpected


def write_report(path: Path, document: dict[str, Any]) -> None:
    """The JSON report in FILE, written whole or not at all (a runbook reads it after checking
    the exit code: no pipe through tee hides the code). FILE was checked before the run
    (output.check_output_file: its directory exists, it is replaced only with --overwrite)."""
    path = path.expanduser()
    # Marked as this CLI's report of this command: the same command run again replaces it.
    document = {**document, **report_marker()}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, ensure_ascii=False, sort_keys=True, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def failure_report(err: BaseException) -> dict[str, Any]:
    """What a run that ended in `err` before it wrote anything reports: whether it was turned
    down (refused) or could not run, the error's type (the refusal's own cause), its message,
    the exit code the command exits with, and `retryAt` when it may succeed later."""
    report: dict[str, Any] = {
        # Refused: the run was turned down (nothing ran); else it could not run.
        "refused": isinstance(err, BackfillRefusedError | InvalidInputError),
        "error": err.cause if isinstance(err, BackfillRefusedError) else type(err).__name__,
        "message": str(err),
        "exitCode": exit_code_of(err),
        "completionRecorded": False,
    }
    retry_at = retry_at_of(err)
    if retry_at is not None:
        report["retryAt"] = retry_at
    return report


@contextlib.contextmanager
def report_failures(output: Path | None) -> Iterator[None]:
    """Around a run: when it ends in an error before its report was written (refused before it
    started, the record unreadable, a service that could not be reached), --report-file PATH still
    gets one, naming the error and the exit code the command exits with (stdout stays empty:
    the message on stderr says the same)."""
    try:
        yield
    except (SagaIndexError, ClientError, BotoCoreError) as err:
        report = failure_report(err)
        if output is not None:
            write_report(output, report)
            log.info(
                "the report (%s, exit %d) is written to %s",
                report["error"],
                report["exitCode"],
                output,
            )
        raise


def report_document(summary: BackfillSummary, extra: dict[str, Any]) -> dict[str, Any]:
    """The JSON report: the summary, `remaining`, `extra`; each anomaly key with the
    `repairCommand` that repairs it, the one the text report prints under it."""
    document = {**summary.to_json(), "remaining": remaining_to_move(summary), **extra}
    prefix = _cli_prefix()
    document["anomalyKeys"] = [
        {**key, "repairCommand": repair_command(prefix, key)}
        for key in document.get("anomalyKeys", [])
    ]
    return document


def repair_command(prefix: str, key: Any) -> str:
    """The `repair-anomaly` command of one anomaly row, as it runs in any shell."""
    return (
        f"{prefix} repair-anomaly --pk {shlex.quote(str(key['PK']))} "
        f"--sk {shlex.quote(str(key['SK']))} --from-lease --apply"
    )


def human(value: Any) -> str:
    """A report value as people read it: no Python reprs (lists, dicts, True)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{key} {human(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(human(item) for item in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _extra_lines(extra: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, value in extra.items():
        if not value or key == "exitCode":
            continue
        if key == "segments":
            lines.append("  segments")
            lines += [
                f"    segment {s['segment']}: scanned {s['scanned']}, re-stamped "
                f"{s['restamped']}, {'done' if s['done'] else 'NOT done'}"
                for s in value
            ]
        elif key == "failures":
            lines += [f"  segment {n} failed: {why}" for n, why in value.items()]
        else:
            lines.append(f"  {key:<16} {human(value)}")
    return lines


def _cli_prefix() -> str:
    """`saga-index` with the global options that name this command's table and endpoint, so a
    command printed as advice runs as it is, in any shell."""
    ctx = click.get_current_context(silent=True)
    cli = ctx.find_object(CliContext) if ctx is not None else None
    return "saga-index" if cli is None else cli.command_prefix()


def print_summary(
    summary: BackfillSummary, extra: dict[str, Any], as_json: bool, output: Path | None
) -> None:
    document = report_document(summary, extra)
    if output is not None:
        write_report(output, document)
    if as_json:
        emit(document)
        return
    state = "complete" if summary.complete else "NOT complete"
    moved = ""
    if summary.source is not None and summary.target is not None:
        moved = f" ({summary.source.layout()} -> {summary.target.layout()})"
    lines = [
        f"backfill {summary.direction.value}{moved}"
        f"{' (dry run)' if summary.dry_run else ''}: {state}",
        f"  scanned          {summary.scanned}",
        f"  re-stamped       {summary.restamped}",
        f"  skipped          {summary.skipped}   (moved, changed or deleted by someone else)",
        f"  anomalies        {summary.anomalies}   (unusable personId: left on their key)",
        f"  would re-stamp   {summary.would_restamp}",
        f"  throttles        {summary.throttles}",
    ]
    if summary.verification is not None:
        verdict = "ok" if summary.verification.ok else "FAILED"
        lines.append(f"  verification     {verdict}: {summary.verification.message}")
    lines += _extra_lines(extra)
    if summary.anomaly_keys:
        rollback = summary.target is not None and summary.target.kind == "legacy"
        lines.append(
            # The legacy key needs no personId: a rollback moves these rows and lists them.
            "rows moved back with a bad personId/GSI4SK: repair each before migrating again "
            "with the command under it"
            if rollback
            else "anomaly rows, left on the source key: repair each with the command under "
            "it, then run the same backfill command again"
        )
        lines.append(
            "  (--from-lease takes the person from the saga's lease; for a saga whose lease "
            "names none, give --person-id P instead)"
        )
        prefix = _cli_prefix()
        for k in summary.anomaly_keys:
            lines.append(
                f"  PK={k['PK']} SK={k['SK']}" + (f"  ({k['reason']})" if k.get("reason") else "")
            )
            lines.append(f"    {repair_command(prefix, k)}")
    if summary.anomalies > len(summary.anomaly_keys):
        lines.append(f"  ... and {summary.anomalies - len(summary.anomaly_keys)} more")
    if output is not None:
        lines.append(f"report written to {output}")
    click.echo("\n".join(lines))


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C and SIGTERM call `stop` (finish in-flight writes, then end) instead of killing the
    run mid-write; a second Ctrl-C interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.warning(
            "%s received: stopping after the in-flight writes; run the same command again to "
            "finish (it picks up what is left)",
            signal.Signals(signum).name,
        )
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stop()

    for sig in previous:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class RunProgress(LiveProgress):
    """The backfill's one step: rows (or segments) handled of the total, with what was scanned
    and re-stamped. A live bar on a terminal (stderr), periodic log lines otherwise.
    `approximate`: the total is an estimate (the bar says `~`)."""

    def __init__(
        self, *, label: str, total: int | None, unit: str, approximate: bool = False
    ) -> None:
        super().__init__(logger=log)
        self.label = label
        self.unit = unit
        self._pace: str | None = None
        self._step = self.step(label, total=total, unit=unit, approximate=approximate)

    def show_totals(self, totals: SegmentCounts) -> None:
        # Rows moved (or that a dry run would move), or found moved by someone else: the rows
        # the total counts. Rows a run leaves (anomalies) are not in it.
        moved = totals.restamped + totals.skipped + totals.would_restamp
        self.show(completed=moved, scanned=totals.scanned, restamped=totals.restamped)

    def follow_control(self, state: ControlState) -> None:
        """A state the run's lease keeper applied: the bar says "paused" while it is, and the
        line shows the pace the run chose (as its last heartbeat reported it)."""
        self._pace = state.lease.pace if state.lease is not None else None
        self._step.update(paused=state.backfill_paused)

    def show(self, *, completed: int, scanned: int, restamped: int, extra: str = "") -> None:
        elapsed = max(self._step.reading().elapsed, 1e-9)
        detail = f"scanned {scanned} · re-stamped {restamped} ({restamped / elapsed:.1f}/s){extra}"
        if self._pace:
            detail += f" · pace {self._pace}"
        self._step.update(completed=completed, detail=detail)
