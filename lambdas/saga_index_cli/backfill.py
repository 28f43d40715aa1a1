"""`saga-index backfill`: move saga rows between the legacy key and their shards, rate-capped.

Locally (the default) the same worker code as the deployed Lambda runs here, one thread per
segment, with a progress bar on stderr; with --state-machine-arn the deployed state machine runs
it and this command follows the execution to its end. The cutover sequence around it is in
docs/runbook.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import boto3
import click
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from saga_index.backfill.direction import Direction
from saga_index.backfill.local import backfill_locally
from saga_index.backfill.messages import (
    DEFAULT_MAX_WRITES_PER_SECOND,
    DEFAULT_TOTAL_SEGMENTS,
    MAX_TOTAL_SEGMENTS,
    MAX_WRITES_PER_SECOND,
    BackfillRequest,
    BackfillSummary,
    SegmentCounts,
    SegmentResult,
    summarise,
)
from saga_index.backfill.readback import count_source_rows
from saga_index.errors import InvalidInputError
from saga_index.names import INDEX_NAME
from saga_index_cli.context import CliContext, emit, pass_cli

log = logging.getLogger("saga_index.cli.backfill")

EXIT_CLEAN, EXIT_FAILED, EXIT_ANOMALIES = 0, 1, 3
# Non-terminal progress: one log line this often (a log file has no use for a redrawn bar).
PROGRESS_LOG_SECONDS = 10.0
_STATE_MACHINE_ARN = re.compile(
    r"arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}"
)


def exit_code(summary: BackfillSummary, *, failed: bool) -> int:
    """0 complete and clean; 3 complete, anomalies remain; 1 failed, interrupted or unverified."""
    if failed or not summary.complete or not summary.verified:
        return EXIT_FAILED
    return EXIT_ANOMALIES if summary.anomalies_remain else EXIT_CLEAN


def _request(
    direction: str, segments: int, max_writes_per_second: float, dry_run: bool
) -> BackfillRequest:
    try:
        return BackfillRequest(
            direction=Direction(direction),
            total_segments=segments,
            max_writes_per_second=float(max_writes_per_second),
            dry_run=dry_run,
        )
    except ValidationError as err:
        raise InvalidInputError(str(err)) from None


@contextlib.contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
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


class _Progress:
    """A live bar on a terminal (stderr), periodic log lines otherwise. Thread-safe."""

    def __init__(self, *, label: str, total: int | None, unit: str) -> None:
        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.label = label
        self.unit = unit
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_log = self.started
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.live,
        )
        self._task: TaskID = self._progress.add_task(label, total=total, detail="")

    def __enter__(self) -> _Progress:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def show_totals(self, totals: SegmentCounts) -> None:
        self.show(completed=totals.handled, scanned=totals.scanned, restamped=totals.restamped)

    def show(self, *, completed: int, scanned: int, restamped: int, extra: str = "") -> None:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        detail = (
            f"{self.unit} · scanned {scanned} · re-stamped {restamped} "
            f"({restamped / elapsed:.1f}/s){extra}"
        )
        with self._lock:
            self._progress.update(self._task, completed=completed, detail=detail)
            now = time.monotonic()
            if not self.live and now - self._last_log >= PROGRESS_LOG_SECONDS:
                self._last_log = now
                log.info("%s: %d %s", self.label, completed, detail)


def _print_summary(summary: BackfillSummary, extra: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit({**summary.to_json(), **extra})
        return
    state = "complete" if summary.complete else "NOT complete"
    lines = [
        f"backfill {summary.direction.value}{' (dry run)' if summary.dry_run else ''}: {state}",
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
    for key, value in extra.items():
        if value:
            lines.append(f"  {key:<16} {value}")
    if summary.anomaly_keys:
        lines.append("anomaly rows (repair their personId by hand, then run again):")
        lines.extend(f"  PK={k['PK']} SK={k['SK']}" for k in summary.anomaly_keys)
    if summary.anomalies > len(summary.anomaly_keys):
        lines.append(f"  ... and {summary.anomalies - len(summary.anomaly_keys)} more")
    click.echo("\n".join(lines))


# ---- local run --------------------------------------------------------------------------------


@contextlib.contextmanager
def _while_running(stop: threading.Event, progress: _Progress) -> Iterator[None]:
    with _stop_on_signals(stop.set), progress:
        yield


def _run_locally(cli: CliContext, request: BackfillRequest, as_json: bool) -> int:
    table = cli.require_table()
    # Refuse a run the writers would undo (see Direction.check_phase) before reading anything:
    # --phase must say where the deployment is, which the runbook sets before each backfill.
    request.direction.check_phase(cli.phase)
    client = cli.client
    stop = threading.Event()
    total: int | None = None
    if Console(stderr=True).is_terminal:
        # Only for the bar's ETA: a COUNT of the source partition(s) through the index.
        try:
            total = count_source_rows(
                client,
                table,
                index_name=INDEX_NAME,
                direction=request.direction,
                shard_count=cli.shards,
            )
        except (ClientError, BotoCoreError) as err:
            log.warning("could not count the rows to move (no ETA): %s", err)
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''}"
    log.info(
        "backfill %s of %s: %d segment(s), at most %.1f writes/s in total, N=%d",
        label,
        table,
        request.total_segments,
        request.max_writes_per_second,
        cli.shards,
    )
    progress = _Progress(label=label, total=total, unit="rows")
    outcome = backfill_locally(
        client,
        table,
        request,
        phase=cli.phase,
        shard_count=cli.shards,
        index_name=INDEX_NAME,
        stop=stop,
        on_progress=progress.show_totals,
        while_running=_while_running(stop, progress),
    )
    run, summary = outcome.run, outcome.summary
    extra: dict[str, Any] = {"failures": {str(k): v for k, v in run.failures.items()}}
    if run.interrupted:
        extra["interrupted"] = True
    _print_summary(summary, extra, as_json)
    code = exit_code(summary, failed=bool(run.failures) or run.interrupted)
    if code == EXIT_FAILED:
        click.echo(
            "saga-index: backfill did not finish cleanly"
            + (f" (failed segments: {sorted(run.failures)})" if run.failures else "")
            + ("; interrupted" if run.interrupted else "")
            + "; nothing is half-written: run the same command again, it converges",
            err=True,
        )
    return code


# ---- state machine run --------------------------------------------------------------------------


def _task_payload(event: dict[str, Any]) -> dict[str, Any] | None:
    details = event.get("taskSucceededEventDetails") or {}
    try:
        output = json.loads(details.get("output") or "null")
    except json.JSONDecodeError:
        return None
    payload = output.get("Payload") if isinstance(output, dict) else None
    return payload if isinstance(payload, dict) else None


class _ExecutionFollower:
    """Reads an execution's history as it grows: the workers' cumulative per-segment counts,
    the segments finished, and the verification step's summary."""

    def __init__(self, sfn: Any, execution_arn: str) -> None:
        self.sfn = sfn
        self.execution_arn = execution_arn
        self.last_event_id = 0
        self.segments: dict[int, SegmentResult] = {}
        self.finished_segments = 0
        self.summary: BackfillSummary | None = None

    def poll(self) -> None:
        new: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "executionArn": self.execution_arn,
            "reverseOrder": True,
            "maxResults": 200,
        }
        # Newest first, down to what was already seen: each poll reads only the new events.
        while True:
            page = self.sfn.get_execution_history(**kwargs)
            events = page.get("events", [])
            fresh = [e for e in events if int(e["id"]) > self.last_event_id]
            new.extend(fresh)
            if len(fresh) < len(events) or not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        for event in sorted(new, key=lambda e: int(e["id"])):
            self.last_event_id = max(self.last_event_id, int(event["id"]))
            if event["type"] == "MapIterationSucceeded":
                self.finished_segments += 1
            if event["type"] != "TaskSucceeded":
                continue
            payload = _task_payload(event)
            if payload is None:
                continue
            if {"segment", "cursor", "restamped"} <= payload.keys():
                result = SegmentResult.model_validate(payload)
                self.segments[result.segment] = result
            elif "verification" in payload:
                self.summary = BackfillSummary.model_validate(payload)


def _run_state_machine(
    cli: CliContext, request: BackfillRequest, arn: str, as_json: bool, poll_interval: float
) -> int:
    sfn = boto3.client("stepfunctions", region_name=cli.region)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"backfill-{request.direction.value}-{stamp}-{uuid.uuid4().hex[:8]}"
    execution_arn = sfn.start_execution(
        stateMachineArn=arn, name=name, input=json.dumps(request.to_json())
    )["executionArn"]
    log.info("started %s", execution_arn)
    follower = _ExecutionFollower(sfn, execution_arn)
    stop_requested = threading.Event()
    label = f"{request.direction.value}{' dry run' if request.dry_run else ''} (Step Functions)"
    with (
        _stop_on_signals(stop_requested.set),
        _Progress(label=label, total=request.total_segments, unit="segments") as progress,
    ):
        stopped = False
        while True:
            status = sfn.describe_execution(executionArn=execution_arn)
            follower.poll()
            progress.show(
                completed=follower.finished_segments,
                scanned=sum(r.scanned for r in follower.segments.values()),
                restamped=sum(r.restamped for r in follower.segments.values()),
            )
            if status["status"] != "RUNNING":
                break
            if stop_requested.is_set() and not stopped:
                # No new invocation starts; one already running keeps going until it returns
                # (about a minute, still under the cap). The next run skips what was moved.
                sfn.stop_execution(
                    executionArn=execution_arn,
                    error="StoppedByOperator",
                    cause="saga-index backfill received Ctrl-C or SIGTERM",
                )
                stopped = True
            stop_requested.wait(poll_interval)
    final = status["status"]
    summary = follower.summary
    if final == "SUCCEEDED" and status.get("output"):
        summary = BackfillSummary.model_validate(json.loads(status["output"]))
    if summary is None:
        summary = summarise(request, list(follower.segments.values()), complete=False)
    extra: dict[str, Any] = {"executionArn": execution_arn, "status": final}
    if final != "SUCCEEDED":
        extra["error"] = status.get("error")
        extra["cause"] = status.get("cause")
    _print_summary(summary, extra, as_json)
    if final != "SUCCEEDED":
        click.echo(
            f"saga-index: execution {final}: {status.get('error')}: {status.get('cause')}; "
            "nothing is half-written: run the backfill again, it converges",
            err=True,
        )
    return exit_code(summary, failed=final != "SUCCEEDED")


def _state_machine_arn(_: click.Context, __: click.Parameter, value: str | None) -> str | None:
    if value is not None and not _STATE_MACHINE_ARN.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a state machine ARN "
            "(arn:aws:states:<region>:<account>:stateMachine:<name>)"
        )
    return value


@click.command("backfill")
@click.option(
    "--direction",
    type=click.Choice([d.value for d in Direction]),
    default=Direction.FORWARD.value,
    show_default=True,
    help="forward: legacy key -> shard of personId (needs --phase migrating); "
    "rollback: shard -> legacy key (needs --phase rolling-back).",
)
@click.option(
    "--segments",
    type=click.IntRange(1, MAX_TOTAL_SEGMENTS),
    default=DEFAULT_TOTAL_SEGMENTS,
    show_default=True,
    help="Parallel Scan segments (threads here, Map iterations in Step Functions).",
)
@click.option(
    "--max-writes-per-second",
    type=click.FloatRange(0, MAX_WRITES_PER_SECOND, min_open=True),
    default=DEFAULT_MAX_WRITES_PER_SECOND,
    show_default=True,
    help="Cap on re-stamps per second over ALL segments. Each one writes to the hot legacy "
    "index partition (1,000 WCU/s at most, shared with production traffic).",
)
@click.option("--dry-run", is_flag=True, help="Scan and count what would move; write nothing.")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout."
)
@click.option(
    "--state-machine-arn",
    callback=_state_machine_arn,
    help="Start the deployed backfill state machine and follow it to its end, instead of "
    "running here. The deployed phase and N apply (not --phase/--shards); --table is unused.",
)
@click.option("--poll-interval", type=click.FloatRange(0.01, 60), default=2.0, hidden=True)
@pass_cli
def backfill_command(
    cli: CliContext,
    direction: str,
    segments: int,
    max_writes_per_second: float,
    dry_run: bool,
    as_json: bool,
    state_machine_arn: str | None,
    poll_interval: float,
) -> None:
    """Re-stamp GSI4PK of every saga row still on the source key (rate-capped, resumable).

    \b
    Exit codes:
      0  complete and clean (verified: nothing with a usable personId left on the source key)
      3  complete, but anomaly rows (unusable personId) remain on their key: listed
      1  failed, interrupted or not verified: run the same command again, it converges
      2  bad usage or input (including a --phase the writers would undo the run in)

    Ctrl-C or SIGTERM stops after the in-flight writes. The cutover and rollback sequences
    are in docs/runbook.md.
    """
    request = _request(direction, segments, max_writes_per_second, dry_run)
    if state_machine_arn:
        code = _run_state_machine(cli, request, state_machine_arn, as_json, poll_interval)
    else:
        code = _run_locally(cli, request, as_json)
    sys.exit(code)
